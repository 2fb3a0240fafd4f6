"""How long ``flush()`` and ``finish()`` wait, and when ``finish()`` stops waiting.

- **Timeout values.** A number of seconds ``>= 0``; ``None`` is the default; values above
  ``MAX_WAIT`` (``inf`` included) mean ``MAX_WAIT``. ``nan``, negative numbers and
  non-numbers are a ``ConfigurationError`` naming the value.
- **A platform that accepts nothing.** When no sink has stored a single record during the
  whole run and ``SILENT_GRACE`` seconds of ``finish()`` pass without that changing, the
  sinks are closed, and the close-out gets at most ``DOWN_CLOSE_BUDGET`` seconds: the
  records stay in the archive for ``prime-runs sync``. The same short close-out applies when
  every sink already stopped after repeated transient failures.
- **The close-out** runs on a helper thread that ``finish()`` waits for until its deadline
  plus ``CLOSE_MARGIN``: a request the platform never answers cannot hold ``finish()``.
- **Only a whole run is closed.** While a sink owes records (the deadline came first, or
  the sink stopped), the close-out leaves the run open (``LeftOpen``), whatever its status:
  the platform computes a run's numbers (and closes a training run's curves) when it is
  closed, and a closed run takes no more writes. ``prime-runs sync`` delivers what is owed,
  then closes the run with the status the producer gave.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prime_runs._journal.runinfo import closing_text, owed_were
from prime_runs._plural import quantity
from prime_runs.errors import ConfigurationError

if TYPE_CHECKING:
    from prime_runs._delivery.delivery import Delivery
    from prime_runs._journal.archive import RunArchive
    from prime_runs._runs.accounting import Counters

logger = logging.getLogger("prime_runs")

DEFAULT_FINISH_TIMEOUT = 300.0
MAX_WAIT = 24 * 3600.0  # what `inf` (or any longer timeout) means
CLOSE_MARGIN = 0.5  # finish(timeout=T) returns within T plus this
SILENT_GRACE = 10.0
DOWN_CLOSE_BUDGET = 3.0


def check_timeout(timeout: object, *, default: float, what: str) -> float:
    """``timeout`` as seconds to wait (see the module notes); raises ``ConfigurationError``."""
    if timeout is None:
        return default
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigurationError(
            f"{what}(timeout={timeout!r}): the timeout must be a number of seconds or None "
            f"(the default, {default:g} s), not a {type(timeout).__name__}"
        )
    if isinstance(timeout, int) and timeout > MAX_WAIT:
        return MAX_WAIT  # also an integer too large for a float
    seconds = float(timeout)
    if math.isnan(seconds) or seconds < 0:
        raise ConfigurationError(
            f"{what}(timeout={timeout!r}): the timeout must be a number of seconds >= 0 "
            f"(0: do not wait; inf: up to {MAX_WAIT:g} s), or None for the default "
            f"({default:g} s)"
        )
    return min(seconds, MAX_WAIT)


def budget(timeout: object, default: float) -> float:
    """Like ``check_timeout`` for internal callers that must not raise: invalid means default."""
    try:
        return check_timeout(timeout, default=default, what="finish")
    except ConfigurationError:
        return default


def send_by(deadline: float, now: float) -> float:
    """When sending stops: part of what is left before ``deadline`` (a third, at most 5 s)
    is kept for the close-out, so a stalled upload cannot leave the run open."""
    return deadline - min(5.0, max(0.0, deadline - now) / 3)


class LeftOpen(Exception):
    """The close-out left the run open: ``owed`` (sink -> records) is not stored yet."""

    def __init__(self, owed: dict[str, int]) -> None:
        super().__init__(f"records not stored yet: {owed}")
        self.owed = owed


def left_open_message(owed: dict[str, int], status: str, where: object) -> str:
    """What finish() says when it leaves the run open (see the module notes)."""
    at = f" (in {where})" if where is not None else ""
    return (
        f"the run was left open on the platform: {owed_were(owed)} not stored by the "
        f"finish deadline and are kept in the archive{at}; `prime-runs sync` delivers them, "
        f"then {closing_text(status)}"
    )


class CloseOut:
    """The platform close-out on a helper thread, bounded by the caller's wait.

    ``on_late(ok)`` runs on the helper thread when the close-out ends after ``wait`` gave up.
    """

    def __init__(self, closer: Callable[[], None], on_late: Callable[[bool], None]) -> None:
        self._closer = closer
        self._on_late = on_late
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self.error: BaseException | None = None

    def run(self, until: float) -> bool | None:
        """Close out, waiting until ``until``. True: closed; False: failed (``error``);
        None: still running at ``until`` (it goes on; ``on_late`` hears how it ended)."""
        thread = threading.Thread(target=self._work, name="prime-runs-close-out", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            # Python 3.12 refuses new threads once interpreter shutdown began (an atexit
            # hook): close out on this thread; the closer keeps its own deadline.
            self._work()
        self._done.wait(max(0.0, until - time.monotonic()))
        with self._lock:
            if not self._done.is_set():
                self._abandoned = True
                return None
        return self.error is None

    def _work(self) -> None:
        try:
            self._closer()
        except Exception as exc:
            self.error = exc
        with self._lock:
            self._done.set()
            late = self._abandoned
        if late:
            try:
                self._on_late(self.error is None)
            except Exception:  # a late bookkeeping failure has no one to report to
                pass


def down_message(kept: int, stored: int, where: object) -> str:
    """What finish() says when the platform stored nothing (or stopped storing)."""
    what = "stored none of" if not stored else "stopped storing"
    at = f" in {where}" if where is not None else ""
    return (
        f"the platform {what} this run's records and kept failing; finish() stopped "
        f"waiting for it. {quantity(kept, 'record is', 'records are')} kept locally{at}; "
        "`prime-runs sync` "
        "will deliver them (and close the run) once the platform is back"
    )


def platform_summary(summary: dict[str, Any] | None, written: int | None) -> dict[str, Any]:
    """The summary the close-out sends: with ``prime_runs.traces_episodes_written`` for an
    online run (non-finite numbers are dropped by the close-out itself, contract §4.8)."""
    out = dict(summary or {})
    if written is not None:
        extra = out.get("prime_runs")
        extra = dict(extra) if isinstance(extra, dict) else {}
        extra["traces_episodes_written"] = written
        out["prime_runs"] = extra
    return out


def final_summary(
    given: dict[str, Any] | None, updates: dict[str, Any], computed: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The summary a run closes with. As in 0.1.4, ``finish(summary=)`` wins over
    ``update_summary()``; otherwise the updates go over the computed numbers."""
    if given is not None:
        return {**updates, **given}
    if computed is not None:
        return {**computed, **updates}
    return updates or None


def close_sinks(delivery: Delivery, counters: Counters, report: Callable[..., None]) -> None:
    """Close the run's sinks at finish: count (and report) what is left for
    ``prime-runs sync``."""
    for sink, left in delivery.close().items():
        counters.count_sink("failed", sink, left)
        report(
            f"{sink}: {quantity(left, 'record was', 'records were')} not sent before the "
            "finish deadline; they are in the archive for `prime-runs sync`",
            warn=False,
        )


def report_down(
    counters: Counters, archive: RunArchive | None, report: Callable[..., None]
) -> None:
    """Report a platform that stored nothing (or stopped storing) during the run."""
    with counters.lock:
        kept = counters.logged - counters.unjournaled
        stored = sum(counters.acked.values())
    report(down_message(kept, stored, archive.path if archive is not None else None))

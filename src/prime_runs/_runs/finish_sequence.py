"""A run's flush and finish: the drain, the close-out on the platform, and status.json.

``RunState`` takes these steps from ``FinishSequence``; they run on the object the rest of
the run's engine (``_runs/state``: identity, log calls, sink outcomes) keeps. How long each
waits is decided in ``_runs/finishing``. ``LogGate`` keeps log calls out once ``finish()``
has begun; ``Pending`` is a registration under way (``_runs/registering``), which they wait
for within their deadlines.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, cast

import prime_runs._runs.finishing as _finishing
from prime_runs._journal.journal import computed_summary
from prime_runs._records.jsonio import sanitize_nonfinite
from prime_runs._runs.finishing import DEFAULT_FINISH_TIMEOUT
from prime_runs.errors import describe
from prime_runs.status import RunStatus

if TYPE_CHECKING:
    from prime_runs._delivery.delivery import Delivery
    from prime_runs._journal.archive import RunArchive
    from prime_runs._journal.journal import Journal
    from prime_runs._runs.accounting import Counters
    from prime_runs._runs.state import Closer, Identity, RunState
    from prime_runs.exporters._channel import Channel
    from prime_runs.metrics import SummaryAccumulator


class Pending:
    """Thread-safe. The worker calls ``apply``; the waiter ``wait`` (keeps it open) or
    ``settle`` (closes it: a later ``apply`` does nothing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._closed = False

    def apply(self, change: Callable[[], None]) -> bool:
        """Run ``change`` unless the waiter gave up; whether it ran."""
        with self._lock:
            if self._closed:
                return False
            try:
                change()
            finally:
                self._done.set()
            return True

    def wait(self, until: float) -> bool:
        """Wait until ``until`` (``time.monotonic()``) for the outcome; whether it came."""
        return self._done.wait(max(0.0, until - time.monotonic()))

    def settle(self, until: float) -> bool:
        """``wait``, then close: whether the outcome came (it never will after this)."""
        self.wait(until)
        with self._lock:
            self._closed = True
            return self._done.is_set()


class FinishSequence:
    """``flush()`` and ``finish()`` of a ``RunState``, and what they leave on disk."""

    # The run's engine, as ``RunState`` keeps it.
    identity: Identity
    archive: RunArchive | None
    owner: bool
    journal: Journal | None
    delivery: Delivery
    counters: Counters
    summary_acc: SummaryAccumulator
    registering: Pending | None
    gate: LogGate
    _pid: int
    report: Callable[..., None]

    if TYPE_CHECKING:  # RunState's read-only properties

        @property
        def run_id(self) -> str: ...

        @property
        def workers(self) -> list[Channel]: ...

        @property
        def forked(self) -> bool: ...

    def _init_finish(self, closer: Closer | None) -> None:
        self._closer = closer
        self._finish_lock = threading.RLock()  # a signal handler may re-enter
        self._status_lock = threading.Lock()
        self._closed = False  # the platform confirmed the close-out
        # What the close-out left owed (sink -> records) when it left the run open.
        self.left_open: dict[str, int] | None = None
        self.status = RunStatus.RUNNING
        self.finishing = False
        self.finished = False
        self.error: str | None = None
        self.summary: dict[str, Any] | None = None
        self.summary_updates: dict[str, Any] = {}  # Run.update_summary(), merged at finish
        self.summary_given = False  # finish(summary=...): the producer's numbers win
        # A join's last step at finish (_late: records that landed after the finalize).
        self.after_finish: Callable[[RunState, float], None] | None = None

    def _state(self) -> RunState:
        """This object as the hooks take it: a ``FinishSequence`` is only ever the base of
        a ``RunState``, whose ``__init__`` calls ``_init_finish``."""
        return cast("RunState", self)

    def flush(self, timeout: float | None) -> bool:
        deadline = time.monotonic() + _finishing.budget(timeout, DEFAULT_FINISH_TIMEOUT)
        if self.registering is not None:
            self.registering.wait(deadline)
        self.delivery.drain(deadline)
        # Stored everywhere: nothing waits, and no sink gave up on (or refused) a record.
        return not self.delivery.pending() and not any(self.counters.failed.values())

    def finish(
        self,
        status: RunStatus,
        summary: dict[str, Any] | None,
        error: str | None,
        timeout: float | None,
    ) -> bool:
        """Close the run once; later calls return False. Never raises (see ``raise_pending``).

        Returns within ``timeout`` (default 300 s) plus ``_finishing.CLOSE_MARGIN``, and
        within about ``SILENT_GRACE + DOWN_CLOSE_BUDGET`` when the platform accepts nothing.
        """
        with self._finish_lock:
            if self.finished or self.finishing:
                return False
            self.finishing = True
            self.gate.close()
        started = time.monotonic()
        deadline = started + _finishing.budget(timeout, DEFAULT_FINISH_TIMEOUT)
        # Unsent records stay in the journal for sync.
        send_by = _finishing.send_by(deadline, started)
        self.gate.wait_idle(send_by)
        # A platform that has not registered the run has stored nothing of it: waited for
        # as long as a silent one is (below), then `prime-runs sync` takes over.
        self._await_registration(min(send_by, started + _finishing.SILENT_GRACE))
        self.status = status
        self.error = error
        self._settle_summary(summary)
        # Drain before closing: the platform computes statistics at finalize.
        # Whatever the live queues have not delivered (dropped, failed, still queued) goes
        # now, from the ledger (bytes in memory or in the journal), through the same sinks.
        self.delivery.stop_by(send_by)
        silent = self.delivery.drain(
            send_by,
            started=started,
            stored_any=self._stored_any,
            silent_after=_finishing.SILENT_GRACE,
        )
        down = silent or self.delivery.platform_down()
        if down:
            deadline = min(deadline, time.monotonic() + _finishing.DOWN_CLOSE_BUDGET)
        _finishing.close_sinks(self.delivery, self.counters, self.report)
        if down:
            _finishing.report_down(self.counters, self.archive, self.report)
        closed = self._close_out(status, error, deadline)
        if self.after_finish is not None and not self.owner and not self.forked:
            self.after_finish(self._state(), deadline)
        with self._status_lock:
            self.finished = True
            self._closed = closed
            self._write_status()
        self._warn_losses()
        self._release_journal()
        return True

    def _await_registration(self, until: float) -> None:
        """A raw run span's registration still under way: wait for it until ``until``."""
        if self.registering is not None and not self.registering.settle(until):
            self.report(
                "the run was not registered on the platform before the finish deadline; "
                "`prime-runs sync` registers it and uploads its records"
            )

    def _settle_summary(self, given: dict[str, Any] | None) -> None:
        """The run's final numbers: the producer's, else (the owner) computed from every
        worker's records, with ``update_summary()``'s values merged in."""
        self.summary_given = given is not None
        computed = None
        if given is None and self.owner and not self.forked:
            own = set(self.journal.segments) if self.journal is not None else set()
            computed = computed_summary(self.archive, self.summary_acc, self.report, skip=own)
        self.summary = _finishing.final_summary(given, dict(self.summary_updates), computed)

    def _release_journal(self) -> None:
        """Once the run is finished and no request of its is in flight: close its journal
        files and give up its segments' leases, so `prime-runs sync` may deliver what is
        left. A request still in flight keeps them until it settles (``on_late_outcome``)."""
        if self.archive is None or not self.finished:
            return
        if any(c.delivering() for c in self.delivery.channels.values()):
            return
        # A request that went unanswered may still land: its batch is noted in the archive
        # (``_journal/batches``), and sync settles it before sending anything else.
        self.archive.close()

    def _stored_any(self) -> bool:
        return self.counters.stored_any()

    def ensure_whole(self) -> None:
        """Raise ``LeftOpen`` when a sink owes records the archive keeps for sync: a closer
        calls this right before it closes the run (a run without a journal has nothing a
        later sync could send, so it closes with what it has)."""
        owed = self.counters.owed() if self.archive is not None else {}
        if owed:
            raise _finishing.LeftOpen(owed)

    def _close_out(self, status: RunStatus, error: str | None, deadline: float) -> bool:
        """Close the run on the platform within ``deadline`` (plus ``CLOSE_MARGIN``)."""
        closer = self._closer
        if closer is None or not self.owner or self.forked:
            return False
        summary = self._summary_for_platform()
        close = _finishing.CloseOut(
            lambda: closer(self._state(), status, summary, error, deadline), self._closed_late
        )
        outcome = close.run(deadline + _finishing.CLOSE_MARGIN)
        if outcome is None:
            self.report(
                "the platform did not confirm the run's close-out before the finish deadline; "
                "`prime-runs sync` closes it if it stays open"
            )
            return False
        if isinstance(close.error, _finishing.LeftOpen):
            self.left_open = close.error.owed
            where = self.archive.path if self.archive is not None else None
            self.report(_finishing.left_open_message(close.error.owed, status.value, where))
            return False
        if not outcome and close.error is not None:
            self.report(
                f"could not close the run on the platform: {describe(close.error)}", close.error
            )
        return outcome

    def _closed_late(self, ok: bool) -> None:
        """The close-out ended after finish() returned: record a success in status.json."""
        if not ok:
            return
        with self._status_lock:
            self._closed = True
            if self.finished:
                self._write_status()

    def _write_status(self) -> None:
        """status.json, the owner's only: at the start, at finish, after a late close-out."""
        if self.archive is None or not self.owner or self.forked:
            return
        try:
            self.archive.write_status(self._status_doc(closed=self._closed))
        except OSError as exc:
            self.report(f"could not write the run's status to the archive: {exc}")

    def _summary_for_platform(self) -> dict[str, Any]:
        written = self.counters.traces_episodes_written
        online = self.identity.mode == "online"
        return _finishing.platform_summary(self.summary, written if online else None)

    def _status_doc(self, *, closed: bool = False) -> dict[str, Any]:
        summary = sanitize_nonfinite(self.summary) if self.summary is not None else None
        finished_at = time.time() if self.finished else None
        return {
            **{"status": self.status.value, "summary": summary, "error": self.error},
            **{"finished_at": finished_at, "closed": closed, "pid": self._pid},
            "left_open": self.left_open,
            **self.counters.status_fields(),
        }

    def _warn_losses(self) -> None:
        where = f" (archive: {self.archive.path})" if self.archive is not None else ""
        self.counters.warn_losses(run_id=self.run_id, where=where, online=bool(self.workers))

    def _finish_after_fork(self) -> None:
        """In a forked child: locks of its own (the parent's may have been held)."""
        self._finish_lock = threading.RLock()
        self._status_lock = threading.Lock()


class LogGate:
    """The gate between log calls and ``finish()``: every record is either counted in the
    run's final status or refused, never journaled after the counts were taken.

    Admits log calls until ``close()``; ``wait_idle()`` waits for the admitted ones.

    Calls are tracked per thread, so a ``finish()`` run from a signal handler that
    interrupted a log call on the same thread does not wait for that call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # taken directly on the hot path (no Python-level wrapper)
        self._cond = threading.Condition(self._lock)
        self._active: dict[int, int] = {}  # thread id -> log calls in progress
        self.closing = False
        # close() stopped waiting: records of calls still running are refused one by one.
        self.sealed = False

    def enter(self) -> bool:
        """Admit a log call; False once ``close()`` began (refuse the call)."""
        tid = get_ident()
        with self._lock:
            if self.closing:
                return False
            active = self._active
            active[tid] = active.get(tid, 0) + 1
            return True

    def leave(self) -> None:
        tid = get_ident()
        with self._lock:
            left = self._active.pop(tid, 1) - 1
            if left:
                self._active[tid] = left
            if self.closing:
                self._cond.notify_all()

    def close(self) -> None:
        """Admit no more log calls (``finish()`` has begun)."""
        with self._lock:
            self.closing = True

    def wait_idle(self, deadline: float) -> None:
        """Wait until no other thread is inside a log call, or ``deadline``; then seal."""
        me = get_ident()
        with self._cond:
            while any(tid != me for tid in self._active):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self.sealed = True

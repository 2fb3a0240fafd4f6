"""One sink delivering one run's records: the delivery step every path shares.

The sinks' workers (``_delivery/workers``, which ``flush()``/``finish()`` wait on), a
user's exporters and ``prime-runs sync`` all hand records to a sink through
:meth:`Channel.deliver`, so back-off, retirement and the same-bytes resend after a
transient failure behave the same everywhere. Deliveries on one channel run one at a time.

A transient failure keeps the batch (the very same ``Item`` objects, so the traces sink
resends identical bytes and the sample sink reads back before resending) for the next
delivery, after a back-off (Retry-After when the platform gave one). After
``retry.STREAK`` of them in a row the platform is down rather than flaky and the
channel retires, so the run stops hammering it; a channel given ``pause`` (training
metrics, ``_delivery/metrics``) pauses instead and resumes. A permanent failure retires it
at once. The numbers are the one retry policy's (``platform/retry``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import prime_runs.platform.retry as retry
from prime_runs._records.item import Deadline, Item, Outcome, Sink

logger = logging.getLogger("prime_runs")


OutcomeHandler = Callable[["Channel", Outcome], None]


class Channel:
    """Feeds one sink for one run. ``on_outcome`` hears every settled delivery while the
    channel is open; one that settles after :meth:`close` (a request still in flight at the
    finish deadline) goes to ``on_late``, marked ``late``, so what landed can be journaled
    without being counted twice."""

    def __init__(
        self,
        sink: Sink,
        *,
        on_outcome: OutcomeHandler | None = None,
        on_late: OutcomeHandler | None = None,
        pause: float | None = None,
    ) -> None:
        self.sink = sink
        # None: retire after retry.STREAK transient failures in a row; else never retire
        # for them, waiting at most ``pause`` seconds between attempts.
        self._pause = pause
        self._on_outcome = on_outcome
        self._on_late = on_late
        self._send_lock = threading.Lock()  # one delivery at a time
        self._lock = threading.Lock()  # the fields below
        self._retry: list[Item] = []
        self._backoff_until = 0.0
        self._streak = 0
        self._waits = 0  # deliveries in a row that only waited on requests in doubt
        self._current: Deadline | None = None
        self._stop_by: float | None = None
        self._closed = False
        self._sink_closed = False
        self.retired: str | None = None
        self.quiet = False  # retired without it being a loss (service not enabled)
        self.failing = False  # retry.STREAK transient failures in a row (finish() stops early)

    def __repr__(self) -> str:
        return f"Channel({self.name!r}, retired={self.retired!r})"

    @property
    def name(self) -> str:
        return self.sink.name

    def delivering(self) -> bool:
        """A delivery is in flight (possibly one ``close`` gave up on)."""
        return self._send_lock.locked()

    def held(self) -> int:
        """Records kept for a resend after a transient failure."""
        with self._lock:
            return len(self._retry)

    # -- delivery ----------------------------------------------------------------------

    def deliver(self, items: Sequence[Item], deadline: float | None = None) -> Outcome:
        """Send the records kept for a resend, then ``items``, before ``deadline``
        (``time.monotonic()``; default ``retry.DEFAULT_BUDGET`` from now). Never raises."""
        with self._send_lock:
            with self._lock:
                at = time.monotonic() + retry.DEFAULT_BUDGET if deadline is None else deadline
                if self._stop_by is not None:
                    at = min(at, self._stop_by)
                current = self._current = Deadline(at)
                batch = [*self._retry, *items]
                self._retry = []
                retired, backoff = self.retired, self._backoff_until
            try:
                outcome = self._send(batch, current, retired, backoff)
            finally:
                with self._lock:
                    self._current = None
                    late = self._closed
            if late:
                outcome.late = True
                self._close_sink()
        self._report(outcome)
        return outcome

    def _send(
        self, batch: list[Item], deadline: Deadline, retired: str | None, backoff: float
    ) -> Outcome:
        if retired is not None:
            if self.quiet:
                return Outcome(skipped=batch)
            return Outcome(unsent=[(item, retired) for item in batch])
        if not batch:
            return Outcome()
        wait = backoff - time.monotonic()
        if wait > 0 and not deadline.sleep(wait):
            # Out of time before the back-off ended: not another failure of the platform.
            with self._lock:
                self._retry = batch
            return Outcome()
        try:
            outcome = self.sink.export(batch, deadline)
        except Exception as exc:  # a sink bug must never escape into an exporter's caller
            logger.exception("prime-runs: the %s sink failed unexpectedly", self.name)
            outcome = Outcome(retry=batch, retry_reason=f"{type(exc).__name__}: {exc}")
        with self._lock:
            if outcome.retire is None and outcome.retry and deadline.expired():
                # The caller's time ran out (a flush's timeout, finish giving up), not the
                # platform's patience: kept for the next delivery, not another failure.
                self._retry, outcome.retry = outcome.retry, []
                return outcome
            self._apply(outcome)
        return outcome

    def _apply(self, outcome: Outcome) -> None:
        """Keep, retire or reset after one export (under the lock)."""
        if outcome.retire is None and outcome.retry and outcome.held_until is not None:
            # Waiting for a request that may still be stored: looked at again after a
            # growing wait, never past the time it can no longer land; not a failure.
            self._waits += 1
            left = max(0.0, outcome.held_until - time.time())
            self._backoff_until = time.monotonic() + min(retry.resend_wait(self._waits), left)
            self._retry = outcome.retry
            outcome.retry = []
            return
        self._waits = 0
        if outcome.retire is None and outcome.retry:
            self._streak += 1
            self.failing = self._streak >= retry.STREAK
            if self.failing and self._pause is None:
                outcome.retire = (
                    f"{retry.STREAK} failures in a row (last: {outcome.retry_reason}); "
                    "the records are kept in the archive for `prime-runs sync`"
                )
            else:
                delay = outcome.retry_after
                if delay is None:
                    delay = retry.resend_wait(self._streak)
                cap = retry.RETRY_AFTER_CAP if self._pause is None else self._pause
                self._backoff_until = time.monotonic() + min(delay, cap)
                self._retry = outcome.retry
                outcome.retry = []
                return
        if outcome.retire is not None:
            self.retired = outcome.retire
            self.quiet = outcome.quiet
            if outcome.quiet:
                outcome.skipped.extend(outcome.retry)
            else:
                outcome.unsent.extend((item, outcome.retire) for item in outcome.retry)
            outcome.retry = []
            return
        self._streak = 0
        if self.retired is None:  # a late success does not undo a retirement's cause
            self.failing = False

    def _report(self, outcome: Outcome) -> None:
        handler = self._on_late if outcome.late else self._on_outcome
        if handler is None:
            if outcome.late:
                logger.info(
                    "prime-runs: %s settled records after the run closed (%d acknowledged)",
                    self.name,
                    len(outcome.acked),
                )
            return
        try:
            handler(self, outcome)
        except Exception:
            logger.exception("prime-runs: could not record an outcome of the %s sink", self.name)

    # -- deadlines, close, fork ----------------------------------------------------------

    def stop_by(self, at: float) -> None:
        """No delivery runs past ``at`` from now on; the one in flight is cut short."""
        with self._lock:
            self._stop_by = at if self._stop_by is None else min(self._stop_by, at)
            self._backoff_until = min(self._backoff_until, time.monotonic())
            if self._current is not None:
                self._current.cut(at)

    def close(self) -> list[Item]:
        """Stop for good; returns the records kept for a resend (never sent now). A
        delivery still in flight closes the sink when it returns, and reports late."""
        with self._lock:
            self._closed = True
            self.retired = self.retired or "closed"
            kept, self._retry = self._retry, []
            if self._current is not None:
                self._current.cut(time.monotonic())
        if self._send_lock.acquire(blocking=False):
            try:
                self._close_sink()
            finally:
                self._send_lock.release()
        return kept

    def _close_sink(self) -> None:
        with self._lock:
            if self._sink_closed:
                return
            self._sink_closed = True
        try:
            self.sink.close()
        except Exception:
            logger.debug("prime-runs: closing the %s sink failed", self.name, exc_info=True)

    def after_fork(self) -> None:
        """In a forked child: forget the parent's deliveries; start afresh on demand."""
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._retry = []
        self._current = None
        self._backoff_until = 0.0
        self._streak = 0
        self._waits = 0
        try:
            self.sink.after_fork()
        except Exception:
            logger.debug("prime-runs: resetting the %s sink after fork failed", self.name)

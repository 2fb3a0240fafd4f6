"""A bounded queue and a background thread in front of one sink.

The producer never waits here: ``put`` either queues or refuses at once (the
record is already in the journal, so a refusal is counted, not lost). A
transient failure puts the batch back and backs off (Retry-After when the
platform gave one); after ``MAX_TRANSIENT_STREAK`` of them in a row the
platform is down rather than flaky, and the sink is retired so the run stops
hammering it. Permanent failures retire the sink at once. ``drain`` and
``close`` honour their deadlines themselves.

The limits are module constants read when a worker is built, so a test can
shrink them with ``monkeypatch``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from .exporters._base import Deadline, Item, Outcome, Sink

logger = logging.getLogger("prime_runs")

MAX_QUEUE_ITEMS = 100_000
MAX_QUEUE_BYTES = 64 * 1024 * 1024
MAX_BATCH_ITEMS = 2_000
MAX_BATCH_BYTES = 8 * 1024 * 1024
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
# An export that is not racing a flush or finish still ends some time.
EXPORT_BUDGET = 600.0
# After this many transient failures in a row the platform is down, not flaky:
# stop hammering it; the records stay in the journal for `prime-runs sync`.
MAX_TRANSIENT_STREAK = 3
# Let a batch fill for a moment before sending it: a few large requests cost far
# less (CPU, GIL hand-offs, requests) than one request per record. A flush or
# finish cuts the wait short.
LINGER_SECONDS = 0.2
LINGER_BYTES = 4 * 1024 * 1024

OutcomeHandler = Callable[["SinkWorker", Outcome], None]


class SinkWorker:
    """Feeds one sink from its own queue on its own daemon thread.

    ``on_outcome`` hears every settled batch while the worker is open. A batch
    that settles after ``close`` gave up on it (the request was still in flight
    at the deadline, and ``close`` already reported its items as unsent) goes to
    ``on_late`` instead, marked ``late``, so it can be journaled as acknowledged
    without being counted twice; without ``on_late`` it is only logged.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        on_outcome: OutcomeHandler,
        on_late: OutcomeHandler | None = None,
        max_items: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.sink = sink
        self._on_outcome = on_outcome
        self._on_late = on_late
        self._max_items = MAX_QUEUE_ITEMS if max_items is None else max_items
        self._max_bytes = MAX_QUEUE_BYTES if max_bytes is None else max_bytes
        self._cond = threading.Condition()
        self._queue: deque[Item] = deque()
        self._queued_bytes = 0
        self._in_flight = 0
        self._export_deadline: Deadline | None = None
        self._closing = False
        self._abandoned = False  # close() returned while a batch was in flight
        self._stop_by: float | None = None
        self._backoff_until = 0.0
        self._transient_streak = 0
        self.retired: str | None = None
        self.quiet = False  # retired without it being a loss (service not enabled)
        self.failing = False  # retired after MAX_TRANSIENT_STREAK transient failures
        self._thread: threading.Thread | None = None
        self._linger = LINGER_SECONDS
        self._linger_bytes = LINGER_BYTES
        self._oldest_at = 0.0  # when the queue last became non-empty
        self._draining = 0  # callers waiting in drain(): send at once

    def __repr__(self) -> str:
        return f"SinkWorker({self.name!r}, pending={self.pending()}, retired={self.retired!r})"

    @property
    def name(self) -> str:
        return self.sink.name

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting in the queue (read without the lock: a hint, not an account)."""
        return self._queued_bytes

    def pending(self) -> int:
        """Records queued or in flight."""
        with self._cond:
            return len(self._queue) + self._in_flight

    def put(self, item: Item) -> bool:
        """Queue ``item`` without waiting. False when the queue is full or the sink retired."""
        with self._cond:
            if self.retired is not None or self._closing:
                return False
            if (
                len(self._queue) >= self._max_items
                or self._queued_bytes + len(item.data) > self._max_bytes
            ):
                return False
            was_empty = not self._queue
            self._queue.append(item)
            self._queued_bytes += len(item.data)
            if self._thread is None:
                self._start()
            if was_empty:
                self._oldest_at = time.monotonic()
                self._cond.notify_all()
            elif self._queued_bytes >= self._linger_bytes:
                # Wake the worker only when there is something worth sending.
                self._cond.notify_all()
            return True

    def put_wait(self, item: Item, deadline: float) -> bool:
        """Queue ``item``, waiting for room until ``deadline``; for finish-time resends only
        (never on a producer's path). False when retired, closing or out of time."""
        with self._cond:
            while not self.put(item):
                left = deadline - time.monotonic()
                if self.retired is not None or self._closing or left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"prime-runs-{self.sink.name}", daemon=True
        )
        self._thread.start()

    # -- worker thread -----------------------------------------------------------

    def _take(self) -> list[Item]:
        """The next batch: one kind, in order, within the batch limits (at least one item)."""
        batch: list[Item] = []
        size = 0
        kind = self._queue[0].kind
        while self._queue and len(batch) < MAX_BATCH_ITEMS:
            item = self._queue[0]
            if item.kind != kind or (batch and size + len(item.data) > MAX_BATCH_BYTES):
                break
            self._queue.popleft()
            self._queued_bytes -= len(item.data)
            size += len(item.data)
            batch.append(item)
        self._in_flight = len(batch)
        return batch

    def _next_batch(self) -> tuple[list[Item], Deadline] | None:
        """Wait for work; None when the worker should stop."""
        with self._cond:
            while True:
                now = time.monotonic()
                if self._stop_by is not None and now >= self._stop_by:
                    return None
                if self.retired is not None and not self._closing:
                    return None
                if self._queue and now >= self._backoff_until:
                    ready_at = self._oldest_at + self._linger
                    if (
                        now >= ready_at
                        or self._closing
                        or self._draining
                        or self._queued_bytes >= self._linger_bytes
                    ):
                        break
                    self._cond.wait(ready_at - now)
                    continue
                if not self._queue and self._closing:
                    return None
                wait = self._backoff_until - now if self._queue else None
                if self._stop_by is not None:
                    left = self._stop_by - now
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)
            batch = self._take()
            self._cond.notify_all()  # room in the queue for put_wait
            stop_by = self._stop_by if self._stop_by is not None else now + EXPORT_BUDGET
            self._export_deadline = Deadline(stop_by)
            return batch, self._export_deadline

    def _run(self) -> None:
        try:
            while True:
                taken = self._next_batch()
                if taken is None:
                    return
                batch, deadline = taken
                try:
                    outcome = self.sink.export(batch, deadline)
                except Exception as exc:  # a sink bug must never kill the worker
                    logger.exception("prime-runs: the %s sink failed unexpectedly", self.name)
                    outcome = Outcome(retry=batch, retry_reason=f"{type(exc).__name__}: {exc}")
                self._settle(batch, outcome)
        finally:
            with self._cond:
                # close() leaves the sink open while a request is in flight; shut it now.
                close_sink = self._abandoned
            if close_sink:
                self._close_sink()

    def _settle(self, batch: list[Item], outcome: Outcome) -> None:
        with self._cond:
            self._export_deadline = None
            if self._abandoned:
                outcome.late = True
            else:
                self._in_flight = 0
                self._apply(outcome)
            self._cond.notify_all()
        handler = self._on_late if outcome.late else self._on_outcome
        if handler is None:
            logger.info(
                "prime-runs: %s settled %d records after the run closed (%d acknowledged)",
                self.name,
                len(batch),
                len(outcome.acked),
            )
            return
        try:
            handler(self, outcome)
        except Exception:
            logger.exception("prime-runs: could not record an outcome of the %s sink", self.name)

    def _apply(self, outcome: Outcome) -> None:
        """Retire, re-queue or reset after one export (under the lock)."""
        if outcome.retire is None and outcome.retry:
            if self._transient_streak + 1 >= MAX_TRANSIENT_STREAK:
                self.failing = True
                outcome.retire = (
                    f"{MAX_TRANSIENT_STREAK} failures in a row (last: {outcome.retry_reason}); "
                    "the records are kept in the archive for `prime-runs sync`"
                )
            else:
                self._transient_streak += 1
                delay = outcome.retry_after
                if delay is None:
                    delay = FIRST_BACKOFF * 2 ** min(self._transient_streak - 1, 16)
                self._backoff_until = time.monotonic() + min(delay, MAX_BACKOFF)
                for item in reversed(outcome.retry):
                    self._queue.appendleft(item)
                    self._queued_bytes += len(item.data)
                outcome.retry = []
                return
        if outcome.retire is not None:
            self.retired = outcome.retire
            self.quiet = outcome.quiet
            # Everything still queued will not reach this sink during the run.
            left = [*outcome.retry, *self._queue]
            if outcome.quiet:
                outcome.skipped.extend(left)
            else:
                outcome.unsent.extend((item, outcome.retire) for item in left)
            outcome.retry = []
            self._queue.clear()
            self._queued_bytes = 0
            return
        self._transient_streak = 0

    # -- producer side -----------------------------------------------------------

    def drain(self, deadline: float) -> bool:
        """Wait until everything queued so far is settled, or until ``deadline``."""
        with self._cond:
            self._draining += 1
            self._cond.notify_all()  # cut a lingering batch short
            try:
                while self._queue or self._in_flight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    if self._queue and (self._thread is None or not self._thread.is_alive()):
                        self._start()
                    self._cond.wait(left)
                return True
            finally:
                self._draining -= 1

    def close(self, deadline: float) -> int:
        """Stop accepting and send what is queued until ``deadline``; return how many
        records never went (or were still in flight, unconfirmed, at the deadline)."""
        with self._cond:
            self._closing = True
            self._stop_by = deadline
            self._backoff_until = min(self._backoff_until, time.monotonic())
            if self._export_deadline is not None:
                self._export_deadline.cut(deadline)
            if self._queue and (self._thread is None or not self._thread.is_alive()):
                self._start()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            left = len(self._queue) + self._in_flight
            self._queue.clear()
            self._queued_bytes = 0
            in_flight = thread is not None and thread.is_alive() and self._in_flight > 0
            self._in_flight = 0
            self.retired = self.retired or "closed"
            # A request still in flight: closing the sink could break it. The thread shuts
            # the sink when the export returns, and reports it as late.
            self._abandoned = in_flight
            self._cond.notify_all()
        if not in_flight:
            self._close_sink()
        return left

    def _close_sink(self) -> None:
        try:
            self.sink.close()
        except Exception:
            logger.debug("prime-runs: closing the %s sink failed", self.name, exc_info=True)

    def after_fork(self) -> None:
        """In a forked child: forget the parent's queue and thread; start afresh on demand."""
        self._cond = threading.Condition()
        self._queue = deque()
        self._queued_bytes = 0
        self._in_flight = 0
        self._export_deadline = None
        self._thread = None
        self._backoff_until = 0.0
        self._transient_streak = 0
        self._draining = 0
        try:
            self.sink.after_fork()
        except Exception:
            logger.debug("prime-runs: resetting the %s sink after fork failed", self.name)

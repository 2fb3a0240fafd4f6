"""A bounded queue and a background thread in front of one sink.

The producer never waits here: ``put`` either queues or refuses at once (the
record is already in the journal, so a refusal is counted, not lost).
Transient failures put the batch back and back off; permanent ones retire
the sink. ``drain`` honours its deadline itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from .exporters._base import Item, Outcome, Sink

logger = logging.getLogger("prime_runs")

MAX_QUEUE_ITEMS = 100_000
MAX_QUEUE_BYTES = 64 * 1024 * 1024
MAX_BATCH_ITEMS = 2_000
MAX_BATCH_BYTES = 8 * 1024 * 1024
MAX_BACKOFF = 30.0
# After this many transient failures in a row the platform is down, not flaky:
# stop hammering it; the records stay in the journal for `prime-runs sync`.
MAX_TRANSIENT_STREAK = 3


class SinkWorker:
    """Feeds one sink from its own queue on its own daemon thread."""

    def __init__(
        self,
        sink: Sink,
        *,
        on_outcome: Callable[[SinkWorker, Outcome], None],
        max_items: int = MAX_QUEUE_ITEMS,
        max_bytes: int = MAX_QUEUE_BYTES,
    ) -> None:
        self.sink = sink
        self._on_outcome = on_outcome
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._cond = threading.Condition()
        self._queue: deque[Item] = deque()
        self._queued_bytes = 0
        self._in_flight = 0
        self._closing = False
        self._stop_by: float | None = None
        self._backoff_until = 0.0
        self._transient_streak = 0
        self.retired: str | None = None
        self.quiet = False  # retired without it being a loss (service not enabled)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    @property
    def name(self) -> str:
        return self.sink.name

    def pending(self) -> int:
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
            self._queue.append(item)
            self._queued_bytes += len(item.data)
            if self._thread is None:
                self._start()
            self._cond.notify()
            return True

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"prime-runs-{self.sink.name}", daemon=True
        )
        self._thread.start()

    # -- worker thread -----------------------------------------------------------

    def _take(self) -> list[Item]:
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

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._stop_by is not None and now >= self._stop_by:
                        return
                    if self._queue and now >= self._backoff_until:
                        break
                    if not self._queue and self._closing:
                        return
                    wait = None
                    if self._queue:
                        wait = self._backoff_until - now
                    if self._stop_by is not None:
                        left = self._stop_by - now
                        wait = left if wait is None else min(wait, left)
                    self._cond.wait(wait)
                batch = self._take()
                deadline = self._stop_by if self._stop_by is not None else now + 600.0
            try:
                outcome = self.sink.export(batch, deadline)
            except Exception as exc:  # a sink bug must never kill the worker
                logger.exception("prime-runs: the %s sink failed unexpectedly", self.sink.name)
                outcome = Outcome(retry=batch, retry_reason=f"{type(exc).__name__}: {exc}")
            self._settle(batch, outcome)

    def _settle(self, batch: list[Item], outcome: Outcome) -> None:
        with self._cond:
            self._in_flight = 0
            if outcome.retire is not None:
                self.retired = outcome.retire
                self.quiet = outcome.quiet
                # Everything still queued will not reach this sink during the run.
                left = [*outcome.retry, *self._queue]
                if outcome.quiet:
                    outcome.skipped.extend(left)
                else:
                    outcome.rejected.extend((item, outcome.retire) for item in left)
                outcome.retry = []
                self._queue.clear()
                self._queued_bytes = 0
            elif outcome.retry and self._transient_streak + 1 >= MAX_TRANSIENT_STREAK:
                self.retired = (
                    f"{MAX_TRANSIENT_STREAK} failures in a row (last: {outcome.retry_reason}); "
                    "the records are kept in the archive for `prime-runs sync`"
                )
                outcome.retire = self.retired
                outcome.rejected.extend(
                    (item, self.retired) for item in (*outcome.retry, *self._queue)
                )
                outcome.retry = []
                self._queue.clear()
                self._queued_bytes = 0
            elif outcome.retry:
                self._transient_streak += 1
                delay = outcome.retry_after
                if delay is None:
                    delay = min(MAX_BACKOFF, 0.25 * 2 ** min(self._transient_streak, 8))
                self._backoff_until = time.monotonic() + delay
                for item in reversed(outcome.retry):
                    self._queue.appendleft(item)
                    self._queued_bytes += len(item.data)
            else:
                self._transient_streak = 0
            self._cond.notify_all()
        try:
            self._on_outcome(self, outcome)
        except Exception:
            logger.exception("prime-runs: could not record an outcome of the %s sink", self.name)

    # -- producer side -----------------------------------------------------------

    def drain(self, deadline: float) -> bool:
        """Wait until everything queued so far is settled, or until ``deadline``."""
        with self._cond:
            while self._queue or self._in_flight:
                if self.retired is not None and not self._in_flight:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._thread is None or not self._thread.is_alive():
                    if self._queue:
                        self._start()
                self._cond.wait(min(left, 0.5))
            return True

    def close(self, deadline: float) -> int:
        """Stop accepting, send what is queued until ``deadline``; return how many never went
        (or were still in flight, unconfirmed)."""
        with self._cond:
            self._closing = True
            self._stop_by = deadline
            self._backoff_until = min(self._backoff_until, time.monotonic())
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()) + 0.05)
        with self._cond:
            left = len(self._queue) + self._in_flight
            self._queue.clear()
            self._queued_bytes = 0
            self._in_flight = 0
            self.retired = self.retired or "closed"
            # Leave the sink open if a request is still in flight: closing could break it.
            if thread is None or not thread.is_alive():
                try:
                    self.sink.close()
                except Exception:
                    logger.debug("prime-runs: closing the %s sink failed", self.name, exc_info=True)
            return left

    def after_fork(self) -> None:
        """In a forked child: forget the parent's queue and thread; start afresh on demand."""
        self._cond = threading.Condition()
        self._queue = deque()
        self._queued_bytes = 0
        self._in_flight = 0
        self._thread = None
        self._pid = os.getpid()
        self._backoff_until = 0.0
        self._transient_streak = 0
        try:
            self.sink.after_fork()
        except Exception:
            logger.debug("prime-runs: resetting the %s sink after fork failed", self.name)

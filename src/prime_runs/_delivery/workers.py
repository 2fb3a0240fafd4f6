"""The process's delivery engine: one worker thread per sink, shared by every run and join.

A record is held in its run's ledger (the durable queue: the journal keeps what memory does
not); :func:`kick` tells the sink's worker there is work, and the worker claims each
registered run's waiting records from its ledger and sends them through the run's channel.
``flush()`` and ``finish()`` :func:`rush` the same workers and wait on the ledger, so there
is one engine: no second set of threads at the end, and nothing queued beside the ledger
that could drop, go stale or fill.

A worker lets a batch fill for ``OTEL_BSP_SCHEDULE_DELAY`` ms (a few large requests cost far
less than one per record), then delivers what waits: a backlog in batches one after the
other, but what was logged during the last request waits for the next batch, so a producer
that logs steadily is served one request per delay, not a trickle of small ones. A flush
(:func:`kick` with ``rush``) skips the delay and delivers to the last record. Each run's
share of a pass is bounded by ``OTEL_BSP_EXPORT_TIMEOUT``.
Records it could not send (a back-off, a request in doubt) are looked at again after
``RETRY_PAUSE``. The threads live as long as the process (daemon threads, started on the
first record); a forked child starts its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import prime_runs._delivery.registry as _registry
import prime_runs._forking as _forking
from prime_runs._envnumbers import positive_env_int

logger = logging.getLogger("prime_runs")

SCHEDULE_DELAY_ENV = "OTEL_BSP_SCHEDULE_DELAY"
SCHEDULE_DELAY_MILLIS = 200
EXPORT_TIMEOUT_ENV = "OTEL_BSP_EXPORT_TIMEOUT"
EXPORT_TIMEOUT_MILLIS = 30_000  # OpenTelemetry's default for OTEL_BSP_EXPORT_TIMEOUT
RETRY_PAUSE = 0.5  # seconds before a pass that left records owed is made again


class Worker:
    """Delivers one sink's records for every run of the process, on a thread of its own."""

    def __init__(self, sink: str) -> None:
        self.sink = sink
        self._work = threading.Event()  # records may be waiting
        self._rush = threading.Event()  # a flush or finish waits: no schedule delay
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def kick(self, *, rush: bool = False) -> bool:
        """There is work; False when no thread can be started (interpreter shutdown)."""
        if rush:
            self._rush.set()
        if not self._work.is_set():
            self._work.set()
        return self._started()

    def _started(self) -> bool:
        if self._thread is not None:
            return True
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(
                    target=self._loop, name=f"prime-runs-{self.sink}", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # Python 3.12+ starts no thread in exit hooks
                    return False
                self._thread = thread
        return True

    def _loop(self) -> None:
        while True:
            self._work.wait()
            self._let_fill()
            self._work.clear()
            rushed = self._rush.is_set()  # a flush waits: deliver to the last record
            self._rush.clear()
            try:
                owed = self.serve_all(drain=rushed)
            except Exception:  # the engine outlives a bug in one run's delivery
                logger.exception("prime-runs: the %s worker failed a pass", self.sink)
                owed = True
            if owed and not self._work.is_set():
                self._rush.wait(RETRY_PAUSE)
                self._work.set()

    def _let_fill(self) -> None:
        """Let a batch fill for the schedule delay, unless a flush waits. Looked at again
        each second, so a changed (shorter) ``OTEL_BSP_SCHEDULE_DELAY`` takes effect."""
        start = time.monotonic()
        while not self._rush.is_set():
            left = start + schedule_delay() - time.monotonic()
            if left <= 0:
                return
            self._rush.wait(min(left, 1.0))

    def serve_all(self, *, drain: bool = False) -> bool:
        """One pass over every run's waiting records; True when some stay owed. Without
        ``drain``, a run's records logged during its last request wait for the next pass."""
        owed = False
        for delivery in _registry.deliveries():
            until = time.monotonic() + export_timeout()
            owed = not delivery.serve(self.sink, until, drain=drain) or owed
        return owed


_delay_read: tuple[str | None, float] = (None, SCHEDULE_DELAY_MILLIS / 1000)


def schedule_delay() -> float:
    """Seconds a worker lets a batch fill (``OTEL_BSP_SCHEDULE_DELAY``), read again (and a
    bad value warned about) only when the variable changes."""
    global _delay_read
    raw = os.environ.get(SCHEDULE_DELAY_ENV)
    if raw != _delay_read[0]:
        _delay_read = (raw, positive_env_int(SCHEDULE_DELAY_ENV, SCHEDULE_DELAY_MILLIS) / 1000)
    return _delay_read[1]


def export_timeout() -> float:
    """Seconds one run's share of a pass may take (``OTEL_BSP_EXPORT_TIMEOUT``)."""
    return positive_env_int(EXPORT_TIMEOUT_ENV, EXPORT_TIMEOUT_MILLIS) / 1000


_lock = threading.Lock()
_workers: dict[str, Worker] = {}


def worker(sink: str) -> Worker:
    found = _workers.get(sink)
    if found is None:
        with _lock:
            found = _workers.setdefault(sink, Worker(sink))
    return found


def kick(sinks: list[str], *, rush: bool = False) -> bool:
    """Wake the workers of ``sinks``; False when one could not start (the caller then
    delivers on its own thread: interpreter shutdown)."""
    started = True
    for sink in sinks:
        started = worker(sink).kick(rush=rush) and started
    return started


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread
    _workers.clear()  # the parent's threads do not exist here


_forking.in_child(_after_fork)

"""A run's contained failures: each one is an ``errors`` entry and (usually) a warning now,
and under ``on_error="raise"`` the first is raised later, once, from the producer's next
call into the run (never from a delivery thread)."""

from __future__ import annotations

import logging
import threading

from prime_runs._runs.accounting import Counters
from prime_runs.errors import PrimeRunsError

logger = logging.getLogger("prime_runs")

RAISE = "raise"


class Reporter:
    """Thread-safe."""

    def __init__(self, counters: Counters, on_error: str) -> None:
        self._counters = counters
        self._on_error = on_error
        self._lock = threading.Lock()
        self._first: BaseException | None = None
        self._raised = False

    def report(self, message: str, exc: BaseException | None = None, *, warn: bool = True) -> None:
        self._counters.note_error(message)
        with self._lock:
            if self._first is None and self._on_error == RAISE:
                self._first = exc if exc is not None else PrimeRunsError(message)
        if warn:
            logger.warning("prime-runs: %s", message)

    def raise_pending(self) -> None:
        with self._lock:
            if self._first is None or self._raised:
                return
            self._raised = True
            error = self._first
        raise error

"""``Pending``: an outcome that another thread applies at most once, unless the waiter
gave up on it first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


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

"""The gate between log calls and ``finish()``: every record is either counted in the run's
final status or refused, never journaled after the counts were taken."""

from __future__ import annotations

import threading
import time
from threading import get_ident


class LogGate:
    """Admits log calls until ``close()``; ``close()`` waits for the admitted ones.

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

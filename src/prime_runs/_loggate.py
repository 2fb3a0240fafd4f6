"""The gate between log calls and ``finish()``: every record is either counted in the run's
final status or refused, never journaled after the counts were taken."""

from __future__ import annotations

import threading
import time


class LogGate:
    """Admits log calls until ``close()``; ``close()`` waits for the admitted ones.

    Calls are tracked per thread, so a ``finish()`` run from a signal handler that
    interrupted a log call on the same thread does not wait for that call.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active: dict[int, int] = {}  # thread id -> log calls in progress
        self.closing = False
        # close() stopped waiting: records of calls still running are refused one by one.
        self.sealed = False

    def enter(self) -> bool:
        """Admit a log call; False once ``close()`` began (refuse the call)."""
        with self._cond:
            if self.closing:
                return False
            tid = threading.get_ident()
            self._active[tid] = self._active.get(tid, 0) + 1
            return True

    def leave(self) -> None:
        with self._cond:
            tid = threading.get_ident()
            left = self._active.pop(tid, 1) - 1
            if left:
                self._active[tid] = left
            if self.closing:
                self._cond.notify_all()

    def close(self) -> None:
        """Admit no more log calls (``finish()`` has begun)."""
        with self._cond:
            self.closing = True

    def wait_idle(self, deadline: float) -> None:
        """Wait until no other thread is inside a log call, or ``deadline``; then seal."""
        me = threading.get_ident()
        with self._cond:
            while any(tid != me for tid in self._active):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self.sealed = True

"""Fault injection: queued failures, stalls and outages, keyed by route name."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

#: Pseudo-route that matches every request.
ANY = "*"


@dataclass(frozen=True)
class Fault:
    """One injected failure answer (see ``StandInPlatform.fail``)."""

    status: int
    after_processing: bool = False
    retry_after: float | str | None = None
    delay: float | None = None
    reset: bool = False
    code: str | None = None


@dataclass
class Stall:
    """Requests to ``route`` (None: all) wait up to ``seconds`` or until ``released`` is set;
    the first ``after`` of them are let through."""

    route: str | None
    seconds: float
    released: threading.Event
    after: int = 0


class FaultBook:
    """Pending faults and the current stall/outage. All access holds ``lock``."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._queued: dict[str, deque[Fault]] = {}
        self._stall: Stall | None = None
        self._holds: dict[str, deque[float]] = {}
        self._outage: tuple[int, frozenset[str] | None] | None = None

    def add(self, route: str, fault: Fault, times: int) -> None:
        with self._lock:
            self._queued.setdefault(route, deque()).extend([fault] * times)

    def take(self, route: str) -> Fault | None:
        """Pop the next fault for ``route`` (a route-specific one before a ``*`` one)."""
        with self._lock:
            for key in (route, ANY):
                pending = self._queued.get(key)
                if pending:
                    return pending.popleft()
            return None

    def hold(self, route: str, seconds: float, times: int) -> None:
        with self._lock:
            self._holds.setdefault(route, deque()).extend([seconds] * times)

    def take_hold(self, route: str) -> float | None:
        """Seconds the next request to ``route`` is held before it is handled, if any."""
        with self._lock:
            pending = self._holds.get(route)
            return pending.popleft() if pending else None

    def stall(self, route: str | None, seconds: float, after: int = 0) -> None:
        with self._lock:
            self._release_stall()
            self._stall = Stall(route, seconds, threading.Event(), after)

    def unstall(self) -> None:
        with self._lock:
            self._release_stall()

    def stall_for(self, route: str) -> Stall | None:
        with self._lock:
            stall = self._stall
            if stall is None or stall.route not in (None, route):
                return None
            if stall.after > 0:
                stall.after -= 1
                return None
            return stall

    def outage(self, status: int, routes: frozenset[str] | None) -> None:
        with self._lock:
            self._outage = (status, routes)

    def recover(self) -> None:
        with self._lock:
            self._outage = None

    def outage_for(self, route: str) -> int | None:
        """The status every request to ``route`` gets during an outage, else None."""
        with self._lock:
            if self._outage is None:
                return None
            status, routes = self._outage
            return status if routes is None or route in routes else None

    def clear(self) -> None:
        """Forget every fault, and release any stalled request."""
        with self._lock:
            self._queued.clear()
            self._holds.clear()
            self._release_stall()
            self._outage = None

    def _release_stall(self) -> None:
        if self._stall is not None:
            self._stall.released.set()
            self._stall = None

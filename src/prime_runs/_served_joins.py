"""The joins a service opens for spans that arrive under other processes' runs.

A span whose remote parent's baggage names a run (a service's instrumentation extracted a
request's headers) is recorded through a join of that run, which the processor opens on
the first such span. The join stays open while a span of it is open here, and after: the
last ``MAX_IDLE`` joins with no open span are kept for their run's next request (opening a
join costs milliseconds on the request's thread); an older idle one ends, giving back its
journal files, connections and memory. What a long-lived service holds does not grow with
how many runs it served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

MAX_IDLE = 8


class ServedJoins:
    """The served joins and how many spans of each are open. Not locked: the processor
    calls it under its own lock."""

    def __init__(self) -> None:
        self._open: dict[RunState, int] = {}
        self._idle: dict[RunState, None] = {}  # in the order they went idle

    def __contains__(self, state: RunState) -> bool:
        """Read without the lock, so other spans skip it: a join is added before its spans
        are mapped to it, and one removed meanwhile is found gone under the lock."""
        return state in self._open

    def opened(self, state: RunState) -> None:
        """A join opened for a span, which is open."""
        self._open[state] = 1

    def hold(self, state: RunState) -> None:
        """One more span of ``state`` open (nothing for a join not served here)."""
        if state in self._open:
            self._open[state] += 1
            self._idle.pop(state, None)

    def let_go(self, state: RunState) -> list[RunState]:
        """A span of ``state`` ended; the joins to end now (idle ones past ``MAX_IDLE``)."""
        left = self._open.get(state)
        if left is None:
            return []
        self._open[state] = left - 1
        if left > 1:
            return []
        self._idle[state] = None
        ended = []
        while len(self._idle) > MAX_IDLE:
            oldest = next(iter(self._idle))
            del self._idle[oldest], self._open[oldest]
            ended.append(oldest)
        return ended

    def end_all(self) -> list[RunState]:
        """Every served join, forgotten here (the processor shuts down)."""
        ended = list(self._open)
        self._open.clear()
        self._idle.clear()
        return ended

    def states(self) -> list[RunState]:
        return list(self._open)

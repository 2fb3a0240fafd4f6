"""Problems found while mapping a run's GenAI spans: each kind reported once per run, counted.

A problem is a string ``"<kind>: <detail>"``. The first of each kind in a run goes to
``run.errors`` (a warning; raised at finish under ``on_error="raise"``) with the episode it
came from; later ones of that kind are counted, and the count is reported when the run ends.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState


def kind_of(problem: str) -> str:
    return problem.split(":", 1)[0]


class RunReports:
    """Per run: how many problems of each kind, the first of each already reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: weakref.WeakKeyDictionary[RunState, dict[str, int]] = (
            weakref.WeakKeyDictionary()
        )

    def report(self, state: RunState, where: str, problems: Iterable[str]) -> None:
        first = []
        with self._lock:
            counts = self._counts.setdefault(state, {})
            for problem in problems:
                kind = kind_of(problem)
                counts[kind] = counts.get(kind, 0) + 1
                if counts[kind] == 1:
                    first.append(problem)
        for problem in first:
            state.report(f"{where}: {problem} (further cases of this kind are counted)")

    def close(self, state: RunState) -> None:
        """At the run's end: one report per kind seen more than once."""
        with self._lock:
            counts = self._counts.pop(state, {})
        for kind, n in sorted(counts.items()):
            if n > 1:
                state.report(f"GenAI mapping: {n} cases of '{kind}' in this run")

"""Span processors added to a run's provider after its ``run`` span started.

A tool that adds its processors lazily (MLflow's unified mode does so on its first traced
call) never sees the start of a ``run`` span ``pr.init()`` opened before: the trace's root is
unknown to it, and MLflow's processors then fail on every span under it (``KeyError: None``
from their ``on_start``, raised into the program). A raw ``run`` span opened after the tool's
setup does not have the problem, which is why the two differed. When the first span under a
run starts after the provider gained processors, those processors are shown the starts they
missed (the run span, then the episode span open around it), before they see that span;
they see both spans end as any other.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import Span

from prime_runs._otel_private import span_processors

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")


class LateStarts:
    """Per run: its provider's multi-processor and how many processors it had."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # By id(state), from its run span's start to its end (a plain dict: this is read on
        # every span start under a run).
        self._seen: dict[int, tuple[object, int]] = {}

    def run_started(self, state: RunState, span: Span) -> None:
        multi, found = span_processors(span)
        with self._lock:
            self._seen[id(state)] = (multi, len(found))

    def run_ended(self, state: RunState) -> None:
        with self._lock:
            self._seen.pop(id(state), None)

    def member_started(
        self,
        state: RunState,
        span: Span,
        episode_of: Callable[[int], Span | None],
        parent_id: int,
    ) -> None:
        """``span`` starts under ``state``'s run; ``episode_of(parent_id)``: the episode open
        around it. Costs two lookups unless the provider gained processors."""
        multi, found = span_processors(span)
        seen = self._seen.get(id(state))
        # Only the run span's own provider: another never shows its processors its end.
        if seen is None or seen[0] is not multi or len(found) <= seen[1]:
            return
        with self._lock:
            seen = self._seen.get(id(state))
            if seen is None or len(found) <= seen[1]:
                return  # another thread got here first
            self._seen[id(state)] = (multi, len(found))
        missed = [
            s for s in (state.span, episode_of(parent_id)) if isinstance(s, Span) and s is not span
        ]
        for processor in found[seen[1] :]:
            for started in missed:
                if started.end_time is None:
                    try:
                        processor.on_start(started, None)
                    except Exception:  # their hook: never fatal here
                        logger.debug("prime-runs: a late on_start failed", exc_info=True)

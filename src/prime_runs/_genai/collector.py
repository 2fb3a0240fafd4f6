"""Buffers the GenAI spans under an episode until it ends, then ingests one record.

The selection rule (docs/genai.md): a span becomes an episode root when it is not already
under one and it is an ``episode`` span, or a ``gen_ai.operation.name`` of
``invoke_agent``/``chat``/``text_completion``/``generate_content`` directly under the run.
An ``episode`` span that carries ``prime.record`` is the producer's own record: its
buffer is dropped. Memory is bounded: at most ``MAX_SPANS`` spans per episode and
``MAX_OPEN`` episodes open at once; what goes over is counted and reported.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import ReadableSpan, Span

from .. import semconv
from .._encode import encode
from .._state import RunState
from ..errors import PrimeRunsError
from . import names
from .episode import build

logger = logging.getLogger("prime_runs")

MAX_SPANS = 4096  # spans kept per episode
MAX_OPEN = 10_000  # episodes buffered at once


@dataclass
class _Episode:
    state: RunState
    root: ReadableSpan  # live until it ends; read only at its end or at its run's end
    spans: list[ReadableSpan] = field(default_factory=list)
    open: set[int] = field(default_factory=set)
    dropped: int = 0
    late: bool = False  # its run ended first


class GenAICollector:
    """Called from ``RunProcessor``'s hooks for spans under a run; never raises there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._episodes: dict[int, _Episode] = {}  # root span id -> buffer
        self._root_of: dict[int, int] = {}  # open span id -> root span id

    def on_start(self, span: Span, state: RunState, parent_is_run: bool) -> None:
        parent = span.parent
        sid = span.context.span_id
        with self._lock:
            root = self._root_of.get(parent.span_id) if parent is not None else None
            if root is not None:
                self._root_of[sid] = root
                self._episodes[root].open.add(sid)
                return
            if not _is_root(span, parent_is_run) or len(self._episodes) >= MAX_OPEN:
                return
            self._episodes[sid] = _Episode(state, span)
            self._root_of[sid] = sid

    def on_end(self, span: ReadableSpan) -> bool:
        """Whether ``span`` ended an episode that this made a record of."""
        sid = span.context.span_id if span.context is not None else 0
        with self._lock:
            root = self._root_of.pop(sid, None)
            if root is None:
                return False
            episode = self._episodes.get(root)
            if episode is None:
                return False
            if root != sid:
                episode.open.discard(sid)
                if len(episode.spans) < MAX_SPANS:
                    episode.spans.append(span)
                else:
                    episode.dropped += 1
                return False
            del self._episodes[root]
            for child in episode.open:
                self._root_of.pop(child, None)
        if _is_own_record(span):
            return False
        self._emit(span, episode)
        return True

    def on_run_end(self, state: RunState) -> None:
        """Episodes of ``state`` still open when their run ends: recorded with what they
        have now (their spans ending later are not), and reported."""
        with self._lock:
            cut = [(k, e) for k, e in self._episodes.items() if e.state is state]
            for key, episode in cut:
                del self._episodes[key]
                for sid in (key, *episode.open):
                    self._root_of.pop(sid, None)
        for _, episode in cut:
            if not _is_own_record(episode.root):
                episode.late = True
                self._emit(episode.root, episode)

    def _emit(self, root: ReadableSpan, episode: _Episode) -> None:
        state = episode.state
        if not state.gate.enter():
            state.refuse_late(1)  # the episode ended after its run finished
            return
        try:
            record, problems = build(root, episode.spans)
            where = f"GenAI episode span {root.name!r} ({record['id']})"
            if episode.late:
                problems.append("it had not ended when its run ended; recorded as it was then")
            if episode.open:
                problems.append(f"{len(episode.open)} spans under it had not ended; left out")
            if episode.dropped:
                problems.append(f"{episode.dropped} spans over {MAX_SPANS} were left out")
            for problem in problems:
                state.report(f"{where}: {problem}")
            try:
                encoded = encode(record, state.run_id, state.identity.kind)
            except PrimeRunsError as exc:
                state.count_invalid(1)
                state.report(f"{where} could not be recorded: {exc}")
                return
            state.ingest(encoded)
        finally:
            state.gate.leave()


# Attributes of record spans the SDK or the producer already made a record of.
_OWN_RECORD = (semconv.RECORD, semconv.RECORD_KIND, semconv.RECORD_REF)


def _is_root(span: Span, parent_is_run: bool) -> bool:
    attrs = span.attributes or {}
    if any(name in attrs for name in _OWN_RECORD):
        return False
    if span.name == semconv.EPISODE_SPAN:
        return True
    operation = attrs.get(names.OPERATION)
    return parent_is_run and operation in names.ROOT_OPERATIONS


def _is_own_record(span: ReadableSpan) -> bool:
    if any(name in (span.attributes or {}) for name in _OWN_RECORD):
        return True
    return any(semconv.RECORD in (event.attributes or {}) for event in span.events)

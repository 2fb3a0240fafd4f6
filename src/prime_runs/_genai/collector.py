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
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan, Span

import prime_runs._genai.ended as ended
import prime_runs._genai.names as names
import prime_runs._genai.openinference as openinference
from prime_runs._genai.episode import build
from prime_runs._genai.logs import LogEvent
from prime_runs._genai.reporting import RunReports, kind_of
from prime_runs.errors import PrimeRunsError
from prime_runs.semconv import EPISODE_SPAN, RECORD, RECORD_KIND

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")

MAX_SPANS = 4096  # spans kept per episode
MAX_LOGS = 4 * MAX_SPANS  # log records kept per episode
MAX_OPEN = 10_000  # episodes buffered at once

# Every live collector, so a log record processor can hand records to the one whose
# episode the record belongs to without holding the run processor.
_live: weakref.WeakSet[GenAICollector] = weakref.WeakSet()
_live_lock = threading.Lock()


@dataclass
class _Episode:
    state: RunState
    root: Span  # live until it ends; read only at its end or at its run's end
    spans: list[ReadableSpan] = field(default_factory=list)
    open: set[int] = field(default_factory=set)
    ended: set[int] = field(default_factory=set)  # span ids in ``spans``
    logs: dict[int, list[LogEvent]] = field(default_factory=dict)  # by span id
    kept_logs: int = 0
    dropped: int = 0
    dropped_logs: int = 0
    late: bool = False  # its run ended first


class GenAICollector:
    """Called from ``RunProcessor``'s hooks for spans under a run; never raises there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._episodes: dict[int, _Episode] = {}  # root span id -> buffer
        self._root_of: dict[int, int] = {}  # open or buffered span id -> root span id
        self._reports = RunReports()
        self._over: weakref.WeakKeyDictionary[RunState, int] = weakref.WeakKeyDictionary()
        with _live_lock:
            _live.add(self)

    def on_start(self, span: Span, state: RunState, parent_is_run: bool) -> None:
        parent = span.parent
        sid = span.context.span_id
        if not _same_trace(span, state):
            return  # another trace that reuses an id of this run's: not ours
        with self._lock:
            root = self._root_of.get(parent.span_id) if parent is not None else None
            if root is not None:
                if self._episodes[root].root.context.trace_id != span.context.trace_id:
                    return
                self._root_of[sid] = root
                self._episodes[root].open.add(sid)
                return
            if not _is_root(span, parent_is_run):
                return
            if len(self._episodes) >= MAX_OPEN:
                over = self._over[state] = self._over.get(state, 0) + 1
            else:
                self._episodes[sid] = _Episode(state, span)
                self._root_of[sid] = sid
                return
        state.count_invalid(1)  # never recorded: over the limit of open episodes
        if over == 1:
            state.report(
                f"GenAI episode span {span.name!r} was not recorded: {MAX_OPEN} episodes were "
                "already open (further ones are counted in invalid)"
            )

    def episode_of(self, span_id: int) -> Span | None:
        """The open episode span that ``span_id`` (a span open under it, or itself) is in."""
        with self._lock:
            root = self._root_of.get(span_id)
            episode = self._episodes.get(root) if root is not None else None
        return episode.root if episode is not None else None

    def on_log(self, trace_id: int, span_id: int, event: LogEvent) -> bool:
        """A log record emitted in a span of an open episode: kept for its record."""
        with self._lock:
            root = self._root_of.get(span_id)
            episode = self._episodes.get(root) if root is not None else None
            if episode is None or episode.root.context.trace_id != trace_id:
                return False
            if episode.kept_logs >= MAX_LOGS:
                episode.dropped_logs += 1
            else:
                episode.logs.setdefault(span_id, []).append(event)
                episode.kept_logs += 1
            return True

    def on_end(self, span: ReadableSpan) -> bool:
        """Whether ``span`` ended an episode that this made a record of."""
        sid = span.context.span_id if span.context is not None else 0
        with self._lock:
            root = self._root_of.get(sid)
            episode = self._episodes.get(root) if root is not None else None
            if root is None or episode is None or (sid != root and sid not in episode.open):
                return False
            if root != sid:
                episode.open.discard(sid)
                if len(episode.spans) < MAX_SPANS:
                    episode.spans.append(span)
                    episode.ended.add(sid)  # its log records may still come
                else:
                    episode.dropped += 1
                    del self._root_of[sid]
                return False
            self._forget(root, episode)
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
                self._forget(key, episode)
            over = self._over.pop(state, 0)
        for _, episode in cut:
            if not _is_own_record(episode.root):
                episode.late = True
                self._emit(episode.root, episode)
        if over > 1:
            state.report(f"{over} GenAI episode spans over {MAX_OPEN} open were not recorded")
        self._reports.close(state)

    def _forget(self, root: int, episode: _Episode) -> None:
        del self._episodes[root]
        for sid in (root, *episode.open, *episode.ended):
            self._root_of.pop(sid, None)

    @staticmethod
    def _problems(episode: _Episode) -> list[str]:
        """What the limits and the run's end left out of ``episode``."""
        problems = []
        if episode.late:
            problems.append(
                "cut at run end: it had not ended when its run ended; recorded as it was then"
            )
        if episode.open:
            problems.append(
                f"spans still open: {len(episode.open)} spans under it had not ended; left out"
            )
        if episode.dropped:
            problems.append(
                f"over the span limit: {episode.dropped} spans over {MAX_SPANS} were left out"
            )
        if episode.dropped_logs:
            problems.append(
                f"over the log limit: {episode.dropped_logs} log records over {MAX_LOGS} "
                "were left out"
            )
        return problems

    def _emit(self, root: ReadableSpan, episode: _Episode) -> None:
        state = episode.state
        if not state.gate.enter():
            state.refuse_late(1)  # the episode ended after its run finished
            return
        try:
            where = f"GenAI episode span {root.name!r}"
            built = _build(root, episode)
            if built is None:
                state.count_invalid(1)
                state.report(f"{where} could not be mapped to a record")
                return
            record, problems = built
            where = f"{where} ({record['id']})"
            self._reports.report(state, where, [*problems, *self._problems(episode)])
            try:
                encoded = state.encode(record)
            except PrimeRunsError as exc:
                state.count_invalid(1)
                state.report(f"{where} could not be recorded: {exc}")
                return
            state.ingest(encoded)
            if root.context is not None:  # a write on it from now on is lost: said once
                ended.remember(root.context.trace_id, root.context.span_id, state, where)
        finally:
            state.gate.leave()


def deliver_log(trace_id: int, span_id: int, event: LogEvent) -> bool:
    """Hand a log record to the collector whose open episode its span belongs to."""
    with _live_lock:
        collectors = list(_live)
    return any(collector.on_log(trace_id, span_id, event) for collector in collectors)


def _build(root: ReadableSpan, episode: _Episode) -> tuple[dict, list[str]] | None:
    """The record; where the spans hold something the mapping cannot take (a bug of ours
    or a value no check foresaw), the episode is still recorded, without what is under it."""
    try:
        return build(root, episode.spans, episode.logs)
    except Exception as exc:  # the episode must not be lost to one bad value
        logger.debug("prime-runs: GenAI mapping failed", exc_info=True)
        reason = f"mapping failed: {type(exc).__name__}: {exc}; recorded without its GenAI spans"
    try:
        record, problems = build(root, [])
    except Exception:
        logger.debug("prime-runs: GenAI mapping failed on the episode span", exc_info=True)
        return None
    # Its spans were there: not the "nothing mapped" of an episode that had none.
    return record, [reason, *(p for p in problems if kind_of(p) != "nothing mapped")]


def _same_trace(span: Span, state: RunState) -> bool:
    run = state.span
    context = run.get_span_context() if run is not None else None
    return context is None or not context.is_valid or context.trace_id == span.context.trace_id


# Attributes of record spans the SDK or the producer already made a record of.
_OWN_RECORD = (RECORD, RECORD_KIND)


def _is_root(span: Span, parent_is_run: bool) -> bool:
    attrs = span.attributes or {}
    if any(name in attrs for name in _OWN_RECORD):
        return False
    if span.name == EPISODE_SPAN:
        return True
    operation = attrs.get(names.OPERATION)
    if operation is None:  # OpenInference names the kind of span instead
        return parent_is_run and openinference.kind(attrs) in openinference.ROOT_KINDS
    roots = names.ROOT_OPERATIONS
    return parent_is_run and (operation in roots or operation == names.WORKFLOW_OPERATION)


def _is_own_record(span: ReadableSpan) -> bool:
    if any(name in (span.attributes or {}) for name in _OWN_RECORD):
        return True
    return any(RECORD in (event.attributes or {}) for event in span.events)

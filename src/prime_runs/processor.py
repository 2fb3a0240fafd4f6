"""``RunProcessor``: the span processor that turns ``run`` spans into tracked runs.

It sees every span of the provider it is added to. Spans outside a run pass
through at the cost of two dict lookups. A ``run`` span opened by
``prime_runs.init()`` arrives with its state already registered; one opened
with a plain tracer is registered here (contained: a hook never raises), as an
evaluation or, with ``prime.run.type = "train"``, a training run (``_runs/spanrun``).
Record spans carrying ``prime.record`` are journaled and uploaded; a training run's
``step`` spans and events become its metrics rows (``_runs/training``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from functools import partial
from typing import Any

from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanContext

import prime_runs._delivery.flushing as _flushing
import prime_runs._delivery.registry as _registry
import prime_runs._runs.closeouts as _closeouts
import prime_runs._runs.exithooks as _exit
import prime_runs._runs.training as _training
from prime_runs import semconv
from prime_runs._delivery.provenance import from_resource
from prime_runs._genai import GenAICollector
from prime_runs._late_starts import LateStarts
from prime_runs._runid import is_run_id, shown
from prime_runs._runs.accounting import warn_if_empty
from prime_runs._runs.finishing import CLOSE_MARGIN
from prime_runs._runs.limits import (
    count_limit,
    cut_by_limit,
    cut_message,
    dropped_message,
    events_message,
)
from prime_runs._runs.opening import open_raw_run
from prime_runs._runs.spanrun import ending_of, options_of
from prime_runs._runs.state import RunState
from prime_runs._runs.training import log_steps
from prime_runs._served_joins import ServedJoins
from prime_runs.errors import PrimeRunsError
from prime_runs.sampling import note_run_ended, note_run_started
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")

# Context key through which init() hands a registered run to on_start.
STATE_KEY = otel_context.create_key("prime_runs.run_state")
SHUTDOWN_TIMEOUT = 30.0  # seconds shutdown() may take in all, as OpenTelemetry's own processors
SHUTDOWN_REASON = "the tracer provider shut down before the run span ended"
SDK_SCOPE = "prime_runs"  # the tracer of init() runs, whose record spans carry no payload

# Which run a span belongs to, for every RunProcessor of the process: a span made on one
# provider under a run of another (pr.init()'s own provider, a second SDK provider) is
# found by the processor of its own provider. Each processor still owns (closes, flushes)
# only the runs it opened.
# Keyed by (trace id, span id): a span of another trace whose parent id happens to equal a
# run's span id is not adopted.
_RUN_SPANS: dict[tuple[int, int], RunState] = {}
_MEMBER_SPANS: dict[tuple[int, int], RunState] = {}


def _key(context: SpanContext) -> tuple[int, int]:
    return (context.trace_id, context.span_id)


class RunProcessor(SpanProcessor):
    """Registers and closes runs, and ingests records logged as raw spans.

    ``defaults`` are ``init()`` keywords applied to runs opened by raw spans
    (``mode``, ``dir``, ``on_error``, ``api_key``, ``base_url``, ...).
    """

    def __init__(self, **defaults: Any) -> None:
        self._defaults = defaults
        self._lock = threading.Lock()
        self._join_lock = threading.Lock()
        self._runs: dict[int, RunState] = {}  # the runs this processor opened
        self._joined: dict[str, RunState] = {}
        self._served = ServedJoins()  # those of _joined opened for a remote parent
        self._forged_said = False  # a baggage run id that is not one was reported
        # The kinds of limit already reported per run (one report each; every loss counted).
        self._limit_reported: weakref.WeakKeyDictionary[RunState, set[str]] = (
            weakref.WeakKeyDictionary()
        )
        self._genai = GenAICollector()  # GenAI spans under a run become episodes
        self._late = LateStarts()

    # -- lookups -----------------------------------------------------------------------

    def state_for(self, span_context: SpanContext | None) -> RunState | None:
        """The run a span belongs to (the run span itself or any span under it)."""
        if span_context is None or not span_context.is_valid:
            return None
        key = _key(span_context)
        return _RUN_SPANS.get(key) or _MEMBER_SPANS.get(key)

    def open_runs(self) -> list[RunState]:
        """The runs this processor opened, and the joins it serves."""
        with self._lock:
            return [*self._runs.values(), *self._served.states()]

    # -- hooks -----------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        _flushing.moved_on()
        try:
            if span.name == semconv.RUN_SPAN:
                self._start_run(span, parent_context)
                return
            parent = span.parent
            if parent is None:
                return
            run = _RUN_SPANS.get(_key(parent))
            state = run or _MEMBER_SPANS.get(_key(parent))
            if state is None and parent.is_remote:
                state = self._join(parent_context)  # counted among its join's open spans
            elif state is not None and state in self._served:  # others take no lock
                self._hold(state)
            if state is not None:
                _MEMBER_SPANS[_key(span.context)] = state
                self._late.member_started(state, span, self._genai.episode_of, parent.span_id)
                if not _sdk_record_span(span):  # never a GenAI episode, even if its attributes
                    self._genai.on_start(span, state, run is not None)  # are cut
        except Exception:
            logger.warning("prime-runs: could not track a span", exc_info=True)

    def on_end(self, span: ReadableSpan) -> None:
        _flushing.moved_on()
        try:
            context = span.context
            if context is None:
                return
            if span.name == semconv.RUN_SPAN:
                with self._lock:
                    state = self._runs.pop(context.span_id, None)
                    _RUN_SPANS.pop(_key(context), None)
                if state is not None:
                    self._late.run_ended(state)
                    note_run_ended(context.trace_id)
                    self._ingest_events(state, span)  # before the run closes
                    self._genai.on_run_end(state)
                if state is not None and not state.finishing:
                    if not _training.logged_any(state):  # a training run's are metrics rows
                        warn_if_empty(state)
                    self._finish_raw(state, span)
                return
            state = _MEMBER_SPANS.pop(_key(context), None)
            if state is None:
                return
            payload = None
            if span.name in semconv.RECORD_SPANS:
                payload = (span.attributes or {}).get(semconv.RECORD)
                if isinstance(payload, str):
                    self._ingest_raw(state, payload, origin=(context.span_id, -1))
            self._ingest_events(state, span)
            log_steps(state, span)  # a training run's `step` spans and events: metrics rows
            built = self._genai.on_end(span)
            if span.name in semconv.RECORD_SPANS and not isinstance(payload, str):
                self._check_dropped_record(state, span, built)
            if state in self._served:  # a run's own spans and workers' joins: no lock
                self._let_go(state)
        except Exception:
            logger.warning("prime-runs: could not process a span", exc_info=True)

    def shutdown(self) -> None:
        """Close runs still open as crashed and end their spans (the processors added
        after this one still export them), then wait for close-outs under way; all
        within ``SHUTDOWN_TIMEOUT``."""
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT
        with self._lock:
            self._end_joins(self._served.end_all())
        for state in self.open_runs():
            if state.finishing or not state.owner or state.forked:
                continue  # a forked child or a joined worker never closes the run
            # finish(timeout=T) may take T plus its close margin: ask for that much less.
            left = max(0.0, deadline - time.monotonic() - CLOSE_MARGIN)
            _closeouts.close_open(state, RunStatus.CRASHED, SHUTDOWN_REASON, left)
        _closeouts.wait(deadline, owner=self)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait for close-outs under way, then for open runs' uploads, within the timeout."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        # The processors after this one get what is left; ours on this thread keep to it.
        _flushing.begin(deadline)
        closed = _closeouts.wait(deadline, owner=self)
        flushed = [state.flush(max(0.0, deadline - time.monotonic())) for state in self.open_runs()]
        return closed and all(flushed)

    # -- runs opened by raw spans ------------------------------------------------------

    def _start_run(self, span: Span, parent_context: otel_context.Context | None) -> None:
        state = otel_context.get_value(STATE_KEY, parent_context)
        if not isinstance(state, RunState):
            state = self._open_raw(span)
            if state is None:
                return
        state.span = span
        self._late.run_started(state, span)  # processors added later are shown its start
        note_run_started(span.context.trace_id)  # prime_runs.sampler() keeps its spans
        _exit.track_state(state)  # reset in forked children, drained there at exit
        with self._lock:
            self._runs[span.context.span_id] = state
            _RUN_SPANS[_key(span.context)] = state
        span.set_attribute(semconv.RUN_ID, state.run_id)
        span.set_attribute(semconv.RUN_MODE, state.identity.mode)
        span.set_attribute(semconv.RUN_TYPE, state.identity.kind)
        if state.identity.url:
            span.set_attribute(semconv.RUN_URL, state.identity.url)

    def _open_raw(self, span: Span) -> RunState | None:
        try:
            options = options_of(
                span.attributes or {}, from_resource(span.resource), self._defaults
            )
            return open_raw_run(options)
        except PrimeRunsError as exc:
            logger.warning("prime-runs: the run span %r is not tracked: %s", span.name, exc)
            return None

    def _finish_raw(self, state: RunState, span: ReadableSpan) -> None:
        status, summary, error = ending_of(span)
        # The drain and close-out take seconds: they must not hold the thread ending the
        # span. force_flush(), shutdown() and process exit wait for them.
        _closeouts.start(self, state, lambda: state.finish(status, summary, error, None))

    def _ingest_raw(
        self,
        state: RunState,
        payload: str,
        where: str = "attribute",
        origin: tuple[int, int] | None = None,  # lets a user's exporter claim the record
    ) -> None:
        if not state.gate.enter():
            state.refuse_late(1)  # a record span that ended after its run finished
            return
        try:
            try:
                record = json.loads(payload)
                encoded = state.encode(record)
            except (ValueError, PrimeRunsError) as exc:
                state.count_invalid(1)
                limit = cut_by_limit(payload)
                if limit is None:
                    why = exc if isinstance(exc, PrimeRunsError) else f"it is not JSON ({exc})"
                    state.report(f"a {semconv.RECORD} {where} was not logged: {why}")
                elif self._first_cut(state):
                    state.report(cut_message(state.run_id, where, limit))
                _settled_here(origin)
                return
            state.ingest(encoded, origin=origin)
            if not state.delivery.online:
                _settled_here(origin)  # offline: the journal keeps it, nothing to upload
        finally:
            state.gate.leave()

    def _ingest_events(self, state: RunState, span: ReadableSpan) -> None:
        """Records sent as ``episode``/``trace`` span events, like record spans."""
        found = False
        span_id = span.context.span_id if span.context is not None else 0
        for index, event in enumerate(span.events):
            if event.name not in semconv.RECORD_SPANS:
                continue
            payload = (event.attributes or {}).get(semconv.RECORD)
            if isinstance(payload, str):
                found = True
                self._ingest_raw(state, payload, "event attribute", (span_id, index))
            elif getattr(event, "dropped_attributes", 0):  # the SDK's Event counts them
                kept = len(event.attributes or {})
                limit = count_limit("event attributes", kept)
                where = f"an event named {event.name!r} on span {span.name!r}"
                message = dropped_message(state.run_id, where, 1, limit, event=True)
                self._count_dropped(state, 1, message, "event attributes")
        if span.dropped_events:
            # The oldest events went: when the kept ones carry records, so did they.
            limit = count_limit("span events", len(span.events))
            where = f"span {span.name!r}"
            message = events_message(state.run_id, where, span.dropped_events, limit, found)
            self._count_dropped(state, span.dropped_events if found else 0, message, "events")

    def _check_dropped_record(self, state: RunState, span: ReadableSpan, built: bool) -> None:
        """A raw record span that ended without ``prime.record`` after dropping attributes
        may have had it evicted (a span that dropped nothing simply carried no record).
        ``built``: the GenAI collector made an episode of it, so no record is counted lost."""
        dropped = span.dropped_attributes
        if not dropped or _sdk_record_span(span):
            return
        limit = count_limit("span attributes", len(span.attributes or {}))
        where = f"a span named {span.name!r}"
        message = dropped_message(state.run_id, where, dropped, limit, built=built)
        self._count_dropped(state, 0 if built else 1, message, "span attributes")

    def _count_dropped(self, state: RunState, records: int, message: str, limit: str) -> None:
        """Count ``records`` lost to a count limit like cut ones; report each ``limit`` (and
        whether it lost records for certain) once per run."""
        if records:
            if state.gate.enter():
                try:
                    state.count_invalid(records)
                finally:
                    state.gate.leave()
            else:
                state.refuse_late(records)  # ended after its run finished: late either way
        if self._first(state, f"{limit}:{bool(records)}"):
            state.report(message)

    def _first_cut(self, state: RunState) -> bool:
        # One report per run: every cut record is counted (invalid) in the finish report.
        return self._first(state, "length")

    def _first(self, state: RunState, kind: str) -> bool:
        with self._lock:
            reported = self._limit_reported.setdefault(state, set())
            if kind in reported:
                return False
            reported.add(kind)
            return True

    # -- joined runs ---------------------------------------------------------------------

    def adopt(self, run_id: str, state: RunState) -> None:
        """Use ``state`` (opened by ``init()`` joining ``run_id``) for spans of that run."""
        with self._lock:
            # Joins that ended are let go (a worker may join many runs in its life), and a
            # new join of the same run replaces an ended one.
            for ended in [rid for rid, joined in self._joined.items() if joined.finished]:
                del self._joined[ended]
            self._joined.setdefault(run_id, state)

    def _join(self, parent_context: otel_context.Context | None) -> RunState | None:
        run_id = baggage.get_baggage(semconv.BAGGAGE_RUN_ID, parent_context)
        if not isinstance(run_id, str) or not run_id:
            return None
        if not is_run_id(run_id):  # forged or garbled baggage: join nothing (said once)
            if not self._forged_said:
                self._forged_said = True
                logger.warning(
                    "prime-runs: spans whose baggage %s is not a run id (e.g. %s) are not "
                    "tracked: a run's carrier comes from run.context() unchanged",
                    semconv.BAGGAGE_RUN_ID,
                    shown(run_id),
                )
            return None
        from prime_runs._runs.join import join_state

        # Joins wait for each other (one state per run), never other spans' hooks: opening
        # a join writes its archive folder.
        with self._join_lock:
            with self._lock:
                state = self._joined.get(run_id)
                if state is not None:
                    self._served.hold(state)
                    return state
            state = join_state(run_id, parent_context, self._defaults)
            if state is not None:
                with self._lock:
                    self._joined[run_id] = state
                    self._served.opened(state)
            return state

    def _hold(self, state: RunState) -> None:
        with self._lock:
            self._served.hold(state)

    def _let_go(self, state: RunState) -> None:
        with self._lock:
            self._end_joins(self._served.let_go(state))

    def _end_joins(self, states: list[RunState]) -> None:
        """End served joins (under ``_lock``), each on a close-out thread: a drain takes
        time, and force_flush, shutdown and exit wait for close-outs."""
        for state in states:
            if self._joined.get(state.run_id) is state:
                del self._joined[state.run_id]
            _closeouts.start(self, state, partial(state.finish, state.status, None, None, None))


def _sdk_record_span(span: ReadableSpan) -> bool:
    """A record span of an ``init()`` run: its payload travels beside it, never as
    ``prime.record``, so a count limit can cut its attributes but never its record."""
    scope = span.instrumentation_scope
    return span.name in semconv.RECORD_SPANS and scope is not None and scope.name == SDK_SCOPE


def _settled_here(origin: tuple[int, int] | None) -> None:
    """A raw record this process has dealt with, which a user's exporter has nothing to
    send for: marked so that exporter does not call it a record of no tracked run."""
    if origin is not None:
        _registry.note_origin(origin, None, -1)

"""Joining a run from another process or host through W3C context.

The owner process puts ``traceparent`` plus ``baggage`` (``prime.run.id``,
``prime.run.mode``, and ``prime.run.kind`` for a training run) in a carrier; a worker
that extracts it logs into the same run. A joined process never creates an evaluation
nor registers a training run, and never closes the run: it journals and uploads its own
records (and a training rank its own metrics rows) only.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import prime_runs._forking as _forking
import prime_runs._runs.exithooks as _exit
import prime_runs._runs.late as _late
import prime_runs._runs.rerun as _retry
from prime_runs import semconv
from prime_runs._delivery.provenance import upload_context
from prime_runs._journal.archive import RunArchive
from prime_runs._plural import quantity
from prime_runs._runid import check_run_id
from prime_runs._runs.eval_kind import wire_sinks
from prime_runs._runs.options import RunOptions, archive_root
from prime_runs._runs.state import Identity, RunState
from prime_runs._runs.training import TrainingSide
from prime_runs.errors import ConfigurationError
from prime_runs.exporters._sinks import build_sinks
from prime_runs.exporters.train_samples import SINK_NAME as SAMPLES_SINK
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.lifecycle import Registration
from prime_runs.platform.training import TRAIN, TrainingPlatform
from prime_runs.settings import BAGGAGE_ENV, OFFLINE, ONLINE, TRACEPARENT_ENV, Settings

logger = logging.getLogger("prime_runs")

AfterFinish = Callable[[RunState, float], None]

BAGGAGE_MODE = "prime.run.mode"
BAGGAGE_KIND = "prime.run.kind"  # only a training run's carrier has it: eval is the default
_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


def carrier(
    span: trace.Span, run_id: str, mode: str, *, env: bool = False, kind: str = "eval"
) -> dict[str, str]:
    """The W3C carrier that lets another process join the run.

    ``{"traceparent", "baggage"}`` (the baggage carries ``prime.run.id`` and
    ``prime.run.mode``, and ``prime.run.kind`` for a training run); with ``env=True``
    the same values under the ``TRACEPARENT``/``BAGGAGE`` names a child process reads
    from its environment. A run without a valid span (a disabled run) yields ``{}``:
    there is nothing to join.
    """
    if not span.get_span_context().is_valid:
        return {}
    ctx = trace.set_span_in_context(span, otel_context.Context())
    ctx = baggage.set_baggage(semconv.BAGGAGE_RUN_ID, run_id, ctx)
    ctx = baggage.set_baggage(BAGGAGE_MODE, mode, ctx)
    if kind != "eval":
        ctx = baggage.set_baggage(BAGGAGE_KIND, kind, ctx)
    out: dict[str, str] = {}
    _PROPAGATOR.inject(out, context=ctx)
    if env:
        return {key.upper(): value for key, value in out.items()}
    return out


_FROM_OWNER = "join with the carrier the owner's run.context() returned, unchanged"
_FROM_ENV = (
    f"set {TRACEPARENT_ENV} and {BAGGAGE_ENV} from the owner's run.context(env=True), or unset them"
)


def _checked(run_id: object, source: str, fix: str = _FROM_OWNER) -> str:
    return check_run_id(run_id, source=f"{source}'s {semconv.BAGGAGE_RUN_ID}", fix=fix)


def extract(
    values: Mapping[str, str], source: str = "the carrier", fix: str = _FROM_OWNER
) -> otel_context.Context | None:
    """The context in a carrier (or ``TRACEPARENT``/``BAGGAGE`` env form) that names a run.
    A run id that is not one (``../x``, ``/abs``, a NUL) raises ``ConfigurationError``:
    a carrier is input, often from a request's headers, and the id names a folder."""
    lowered = {k.lower(): v for k, v in values.items() if isinstance(v, str)}
    ctx = _PROPAGATOR.extract(lowered, context=otel_context.Context())
    run_id = baggage.get_baggage(semconv.BAGGAGE_RUN_ID, ctx)
    span_context = trace.get_current_span(ctx).get_span_context()
    if not run_id or not span_context.is_valid:
        return None
    _checked(run_id, source, fix)
    return ctx


def context_to_join(explicit: Mapping[str, str] | None = None) -> otel_context.Context | None:
    """A run to join: an explicit carrier, the current context's baggage, or the environment.

    An explicit carrier that names no run raises ``ConfigurationError`` rather
    than quietly creating a second run; an empty one (``context()`` of a
    disabled run) means there is nothing to join. A run id that is not one raises
    ``ConfigurationError`` whichever of the three names it.
    """
    if explicit is not None:
        if not explicit:
            return None
        ctx = extract(explicit)
        if ctx is None:
            raise ConfigurationError(
                "join= must be a carrier from run.context() (traceparent and baggage with "
                f"{semconv.BAGGAGE_RUN_ID}); got keys {sorted(explicit)}"
            )
        return ctx
    current = otel_context.get_current()
    run_id = baggage.get_baggage(semconv.BAGGAGE_RUN_ID, current)
    if run_id:
        span_context = trace.get_current_span(current).get_span_context()
        if span_context.is_valid:
            _checked(run_id, "the current context")
            return current
    env = {k: os.environ[k] for k in (TRACEPARENT_ENV, BAGGAGE_ENV) if k in os.environ}
    if TRACEPARENT_ENV not in env:
        return None
    return extract(env, f"the {BAGGAGE_ENV} environment variable", _FROM_ENV)


# This process's open join of each run: joining the same run again (a Ray task per shard
# in one worker) takes another handle on it rather than another journal and connection.
_lock = threading.Lock()
_open: dict[str, tuple[RunState, dict[str, Any]]] = {}


def shared_join(
    run_id: str, ctx: otel_context.Context | None, defaults: Mapping[str, Any]
) -> RunState | None:
    """The process's open join of ``run_id`` made with the same settings, with one more
    handle on it (``RunState.release_handle``); else a new one."""
    settings = _settings(run_id, defaults)
    if settings is None:
        return None
    wanted = {**defaults, "_where": _where(settings, defaults)}
    with _lock:
        # A join ends with its last handle; the next join lets go of those that ended.
        for ended in [rid for rid, (state, _) in _open.items() if state.finished]:
            del _open[ended]
        found = _open.get(run_id)
        if found is not None and found[1] == wanted and found[0].take_handle():
            return found[0]
    state = join_state(run_id, ctx, defaults, settings)
    if state is not None:
        with _lock:
            _open[run_id] = (state, wanted)
    return state


def _settings(run_id: str, defaults: Mapping[str, Any]) -> Settings | None:
    try:
        return Settings.resolve(api_key=defaults.get("api_key"), base_url=defaults.get("base_url"))
    except Exception as exc:
        logger.warning("prime-runs: cannot join run %s: %s", run_id, exc)
        return None


def _where(settings: Settings, defaults: Mapping[str, Any]) -> tuple[object, ...]:
    """Where a join's records would go: the same run id on another platform or archive
    root is another join."""
    key = settings.api_key or ""
    return (
        hashlib.sha256(key.encode()).hexdigest(),  # which account, without keeping the key
        settings.base_url,
        settings.traces_url,
        archive_root(defaults.get("dir")),
    )


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()
    _open.clear()  # the parent's joins are the parent's


_forking.in_child(_after_fork)


def join_state(
    run_id: str,
    ctx: otel_context.Context | None,
    defaults: Mapping[str, Any],
    settings: Settings | None = None,
) -> RunState | None:
    """A non-owning state that logs into ``run_id`` from this process."""
    mode = baggage.get_baggage(BAGGAGE_MODE, ctx) or OFFLINE
    kind = TRAIN if baggage.get_baggage(BAGGAGE_KIND, ctx) == TRAIN else "eval"
    opts = RunOptions(**{k: v for k, v in defaults.items() if k in RunOptions.__dataclass_fields__})
    settings = settings or _settings(run_id, defaults)
    if settings is None:
        return None
    mode = run_mode = str(mode)
    if mode == ONLINE and not settings.api_key:
        logger.warning(
            "prime-runs: run %s is online but this process has no API key; its records are "
            "kept in the local archive only, until `prime-runs sync` runs with a key",
            run_id,
        )
        mode = OFFLINE
    # The run's mode, not this process's: sync (with a key) uploads an online run's part.
    description = {"name": run_id, "mode": run_mode, "kind": kind, "joined": True}
    archive = None
    try:
        archive = RunArchive.create(archive_root(opts.dir), run_id, description)
    except OSError as exc:
        logger.warning("prime-runs: no local journal for joined run %s: %s", run_id, exc)
    state = RunState(
        Identity(run_id, run_id, mode, None, kind),
        description=description,
        config={},
        archive=archive,
        on_error=opts.on_error,
        owner=False,
    )
    _exit.track_state(state)  # drained at exit, reset in forked children
    online = settings if mode == ONLINE else None
    state.after_finish = functools.partial(_after_join, online)
    if kind == TRAIN:
        # Metrics rows of its own, and the traces sink; nothing registered, nothing closed.
        state.after_finish = _wire_rank(state, online, opts, _after_training_join)
    elif mode == ONLINE:
        wire_sinks(
            state,
            settings,
            Registration(run_id, run_id, None),
            opts,
            context=upload_context(run_type="eval", resource=opts.resource),
        )
    state.stored_ids = _retry.stored_ids(archive, list(state.delivery.channels))
    return state


def _after_join(settings: Settings | None, state: RunState, deadline: float) -> None:
    """A worker's join ends: say what a retry did not resend (``_retry``), and whether its
    records were late for the run's finalize (``_late``)."""
    if state.already_stored:
        message = (
            f"{quantity(state.already_stored, 'record')} logged into run {state.run_id} "
            f"{'was' if state.already_stored == 1 else 'were'} already "
            "stored by an earlier attempt on this host (a retried task); not sent again"
        )
        state.counters.note_error(message)
    if settings is None:
        return
    try:
        client = PlatformClient(settings)
    except Exception:  # never fatal to the worker
        return
    try:
        _late.after_join(state, client, deadline)
    finally:
        client.close()


def _after_training_join(state: RunState, deadline: float) -> None:
    """A rank's join ends. A training run has no evaluation to look at for late records
    (``_late``); only a retry's message applies."""
    _after_join(None, state, deadline)


def _wire_rank(
    state: RunState,
    settings: Settings | None,
    opts: RunOptions,
    after: AfterFinish,
) -> AfterFinish:
    """A rank that joins a training run: its ``log_metrics`` rows are journaled in the run's
    folder and delivered by a metrics delivery of its own, as the owner's are; finishing it
    sends what it has left, then lets go. Gives a joined ``state`` its training side (and,
    online, its sinks); the ``after_finish`` hook that finishes the side before ``after``."""
    platform = TrainingPlatform(settings) if settings is not None else None
    state.training = TrainingSide(state, platform, state.archive)
    if state.journal is not None:
        # The sample table is the owner's: a rank's episodes have no row there, and sync,
        # reading the run's folder, must not send them to it.
        state.journal.skipped_by = (SAMPLES_SINK,)
    if settings is not None:
        # Episodes reach Prime Traces as the owner's do. The per-step sample table is the
        # owner's alone: ranks presigning the same step's object would overwrite it.
        context = upload_context(run_type=TRAIN, resource=opts.resource)
        sinks = build_sinks(settings, state.run_id, context, traces=opts.traces, samples=False)
        state.delivery.attach(sinks)

    def finish(done: RunState, deadline: float) -> None:
        try:
            side = getattr(done, "training", None)
            if isinstance(side, TrainingSide):
                side.finish(deadline)
        finally:
            if platform is not None:
                platform.shutdown()
        after(done, deadline)

    return finish

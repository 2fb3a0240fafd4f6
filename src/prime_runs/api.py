"""The entry points: ``init()``, ``configure_exporter()`` and ``log_episodes()/log_traces()``."""

from __future__ import annotations

import dataclasses
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import prime_runs._providers as _providers
import prime_runs._runs.exithooks as _exit
from prime_runs import semconv
from prime_runs._delivery.provenance import from_resource
from prime_runs._records.ids import ID_GENERATOR
from prime_runs._runs.accounting import RAISE
from prime_runs._runs.compat014 import apply_opt_out, disabled_config
from prime_runs._runs.handling import run_span_attributes
from prime_runs._runs.join import context_to_join, shared_join
from prime_runs._runs.opening import open_run
from prime_runs._runs.options import RunOptions, check_arguments, check_on_error
from prime_runs._runs.state import RunState
from prime_runs._runs.training import check_kind
from prime_runs._version import __version__
from prime_runs.errors import AmbiguousRunError, ConfigurationError, RunFinishedError
from prime_runs.processor import STATE_KEY, RunProcessor
from prime_runs.run import Run
from prime_runs.sampling import check_provider, sampler, sdk_disabled, untracked_reason, warn_once
from prime_runs.settings import DISABLED

if TYPE_CHECKING:
    from prime_runs.platform.training import TrainingSpec

_current: weakref.ReferenceType[Run] | None = None


def _sdk_provider(tracer_provider: object | None) -> TracerProvider:
    """The SDK provider the run's spans go to: ``tracer_provider`` (or the SDK provider it
    wraps), else the global one (unwrapped), else our private one (``_providers``)."""
    if tracer_provider is not None:
        found = _providers.sdk_provider_of(tracer_provider)
        if found is None:
            raise ConfigurationError(
                "tracer_provider must be an opentelemetry.sdk.trace.TracerProvider (or a "
                f"provider that wraps one in .provider), not {type(tracer_provider).__name__}"
            )
        return found
    return _providers.global_sdk_provider() or _providers.private_provider()


def configure_exporter(
    tracer_provider: TracerProvider | None = None, **settings: Any
) -> RunProcessor:
    """Add the run processor to an OpenTelemetry provider (the global one by default).

    Idempotent per provider: calling it again returns the processor already
    added, so nothing is exported twice. ``settings`` are ``init()`` keywords
    (``mode``, ``dir``, ``api_key``, ``base_url``, ``traces``, ``samples``,
    ``journal``) used for runs opened by plain ``run`` spans. With no SDK
    provider configured, one is created (with ``prime_runs.sampler()``) and installed as
    the global provider. A provider whose sampler would drop ``run`` spans, or
    ``OTEL_SDK_DISABLED=true``, is warned about once (see ``docs/opentelemetry.md``).
    """
    allowed = set(RunOptions.__dataclass_fields__) - {
        "name",
        "environments",
        "model",
        "framework",
        "config",
        "description",
        "tags",
        "id",
        "kind",
        "training",
        "register_timeout",  # a raw span never waits for its registration
    }
    unknown = set(settings) - allowed
    if unknown:
        raise ConfigurationError(
            f"configure_exporter() got unknown settings {sorted(unknown)}; "
            f"allowed: {sorted(allowed)}"
        )
    check_arguments(settings)
    if "on_error" in settings:
        check_on_error(settings["on_error"])
    if tracer_provider is None:
        current = _providers.global_sdk_provider()  # a wrapping one (Logfire's) unwrapped
        if current is None:
            # Seed-proof ids: random.seed() in the application must not repeat them.
            current = TracerProvider(id_generator=ID_GENERATOR, sampler=sampler())
            trace.set_tracer_provider(current)
        tracer_provider = current
    provider = _sdk_provider(tracer_provider)
    check_provider(provider)
    return _add_processor(provider, settings)


def _record_tracer(provider: TracerProvider, tracer: trace.Tracer) -> trace.Tracer | None:
    """The tracer for a run's record spans; None on our private provider, where no exporter
    could ever see them (about half of a log call's cost on verifiers-sized records)."""
    return None if _providers.is_private(provider) else tracer


def _add_processor(provider: TracerProvider, settings: dict[str, Any]) -> RunProcessor:
    return _providers.add_processor(provider, settings)


def init(
    name: str | None = None,
    environments: Sequence[object] | str | None = None,
    model: str | None = None,
    framework: str | None = None,
    config: object = None,
    *,
    description: str | None = None,
    tags: Sequence[str] | None = None,
    team_id: str | None = None,
    id: str | None = None,
    mode: str | None = None,
    dir: str | os.PathLike[str] | None = None,
    on_error: str = "warn",
    api_key: str | None = None,
    base_url: str | None = None,
    tracer_provider: TracerProvider | None = None,
    traces: bool = True,
    samples: bool = True,
    journal: bool = True,
    handle_signals: bool = False,
    join: Mapping[str, str] | bool | None = None,
    kind: str = "eval",
    training: TrainingSpec | None = None,
    finish_timeout: float | None = None,
    traces_opt_out: bool | None = None,
    register_timeout: float | None = None,
) -> Run:
    """Start a run and return its handle.

    Online with an API key (argument, ``PRIME_API_KEY`` or ``~/.prime/config.json``),
    otherwise offline into a local archive (``dir=``, ``PRIME_RUNS_DIR``,
    ``./prime-runs``); ``mode="disabled"`` does nothing at all. A process whose
    context or environment carries a run (``run.context()``) joins it instead of
    creating another; pass ``join=False`` to never join, or a carrier to join it.
    See ``docs/concepts.md``. ``kind="train"`` with ``training=TrainingSpec(...)`` and a
    team registers a training run (``docs/training.md``). 0.1.4's ``finish_timeout``
    (``finish()``'s default timeout) and ``traces_opt_out`` (keep the run off Prime Traces:
    argument > ``PRIME_TRACES_OPT_OUT`` > config file) are accepted too. An online run
    waits at most ``register_timeout`` s (``PRIME_RUNS_REGISTER_TIMEOUT``, else 15) to be
    registered, then goes on under a local id; ``await prime_runs.ainit(...)`` in a coroutine.
    """
    # First statement: locals() is exactly the call's arguments here.
    arguments = dict(locals())
    check_arguments(arguments)
    check_on_error(on_error)
    opts = apply_opt_out(_options(arguments), traces_opt_out)
    if join is not False and id is None and mode != DISABLED:
        ctx = context_to_join(join if isinstance(join, Mapping) else None)
        if ctx is not None:
            return _join(ctx, opts, tracer_provider, handle_signals, finish_timeout)
    provider = _sdk_provider(tracer_provider)  # checked before anything is created
    opts = dataclasses.replace(opts, resource=from_resource(provider.resource))
    state = open_run(opts)  # an evaluation, or a training run (kind="train")
    if state is None:
        return _disabled(opts, finish_timeout)
    run = _start(provider, state, finish_timeout)
    if handle_signals:
        _exit.install_signal_handlers()
    return run


def _start(provider: TracerProvider, state: RunState, finish_timeout: float | None) -> Run:
    """The handle of a run ``init()`` opened, with its ``run`` span started on ``provider``."""
    _add_processor(provider, {})
    tracer = provider.get_tracer("prime_runs", __version__)
    run = Run(
        state,
        span=_run_span(tracer, state),
        tracer=_record_tracer(provider, tracer),
        mode=state.identity.mode,
        finish_timeout=finish_timeout,
    )
    _set_current(run)
    return run


def _disabled(opts: RunOptions, finish_timeout: float | None) -> Run:
    # As 0.1.4: a disabled run keeps the id a launcher handed it (init(id=...)).
    return Run(
        None,
        span=trace.INVALID_SPAN,
        tracer=None,
        mode=DISABLED,
        run_id=opts.id,
        name=opts.name,
        kind=opts.kind,
        config=disabled_config(opts.config),
        finish_timeout=finish_timeout,
    )


# init() arguments that say how to start the run rather than what it is.
_NOT_OPTIONS = frozenset(
    {"tracer_provider", "handle_signals", "join", "finish_timeout", "traces_opt_out"}
)


def _options(arguments: dict[str, Any]) -> RunOptions:
    values = {k: v for k, v in arguments.items() if k not in _NOT_OPTIONS}
    if isinstance(values["environments"], str):
        values["environments"] = [values["environments"]]
    values["tags"] = list(values["tags"] or ())
    check_kind(values["kind"], values["training"])  # before a join, too
    return RunOptions(**values)


def _run_span(tracer: trace.Tracer, state: RunState) -> trace.Span:
    ctx = otel_context.set_value(STATE_KEY, state)
    span = tracer.start_span(semconv.RUN_SPAN, context=ctx, attributes=run_span_attributes(state))
    if span.get_span_context().is_valid:
        return span
    # OTEL_SDK_DISABLED: the SDK hands out no spans. The run does not need one to archive
    # and upload; ids of its own keep its context joinable and findable.
    return trace.NonRecordingSpan(
        trace.SpanContext(ID_GENERATOR.generate_trace_id(), ID_GENERATOR.generate_span_id(), False)
    )


def _join(
    ctx: otel_context.Context,
    opts: RunOptions,
    tracer_provider: object,
    handle_signals: bool,
    finish_timeout: float | None,
) -> Run:
    from opentelemetry import baggage

    run_id = str(baggage.get_baggage(semconv.BAGGAGE_RUN_ID, ctx))
    defaults: dict[str, Any] = {
        k: getattr(opts, k)
        for k in ("dir", "on_error", "api_key", "base_url", "traces", "samples", "journal")
    }
    provider = _sdk_provider(tracer_provider)
    defaults["resource"] = from_resource(provider.resource)
    state = shared_join(run_id, ctx, defaults)
    parent = trace.get_current_span(ctx)
    if state is None:
        return Run(
            None,
            span=parent,
            tracer=None,
            mode=DISABLED,
            run_id=run_id,
            finish_timeout=finish_timeout,
        )
    # Spans under the joined context reach the processor as remote children: hand it
    # this state so it does not open a second one for the same run.
    _add_processor(provider, {}).adopt(run_id, state)
    tracer = provider.get_tracer("prime_runs", __version__)
    run = Run(
        state,
        span=parent,
        tracer=_record_tracer(provider, tracer),
        mode=state.identity.mode,
        run_id=run_id,
        context=ctx,
        finish_timeout=finish_timeout,
    )
    _set_current(run)
    if handle_signals:
        _exit.install_signal_handlers()
    return run


def _set_current(run: Run) -> None:
    global _current
    _current = weakref.ref(run)


def current_run() -> Run | None:
    """The run of the current OpenTelemetry context; outside one, the only open run in this
    process, else the last unfinished one ``init()`` started here (``None`` if none)."""
    run = _run_in_context()
    if run is not None:
        return run
    open_runs = _open_runs()
    if len(open_runs) == 1:
        return open_runs[0]
    return _last_started()


def _run_in_context() -> Run | None:
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    for run in _exit.live_runs():
        if run.span.get_span_context().trace_id == span_context.trace_id:
            return run
    for processor in _providers.processors():
        state = processor.state_for(span_context)
        if state is not None:
            return _handle_for(state)
    return None


def _open_runs() -> list[Run]:
    """Every unfinished run of this process, once each (``init()`` handles and raw runs)."""
    runs: dict[str, Run] = {}
    for run in _exit.live_runs():
        if not run.finished and run.mode != DISABLED:
            runs.setdefault(run.id, run)
    for processor in _providers.processors():
        for state in processor.open_runs():
            if not state.finishing and state.owner and state.run_id not in runs:
                runs[state.run_id] = _handle_for(state)
    return list(runs.values())


def _last_started() -> Run | None:
    run = _current() if _current is not None else None
    if run is not None and not run.finished:
        return run
    return None


def _handle_for(state: RunState) -> Run:
    handle = getattr(state, "handle", None)
    if handle is None:
        tracer = trace.get_tracer("prime_runs", __version__)
        handle = Run(
            state, span=state.span or trace.INVALID_SPAN, tracer=tracer, mode=state.identity.mode
        )
        state.handle = handle
    return handle


def log_episodes(episodes: object) -> None:
    """Log episodes into the run of the current context (see ``current_run``).

    Outside a run's context it logs into the only open run; with several open it logs
    into the last one ``init()`` started and warns (``on_error="raise"``: raises
    ``AmbiguousRunError``). Inside a span no run can see (dropped by a sampler, or
    ``OTEL_SDK_DISABLED``), with no run open, it warns once and records nothing.
    """
    run = _require_run()
    if run is not None:
        run.log_episodes(episodes)


def log_traces(traces: object) -> None:
    """Log bare traces into the run of the current context (as ``log_episodes``)."""
    run = _require_run()
    if run is not None:
        run.log_traces(traces)


def _require_run() -> Run | None:
    run = _run_in_context()
    if run is not None:
        return run
    open_runs = _open_runs()
    if len(open_runs) == 1:
        return open_runs[0]
    span = trace.get_current_span()
    if not open_runs:
        if (span.get_span_context().is_valid and not span.is_recording()) or sdk_disabled():
            # A raw `run` span nobody could see: never an exception in the eval loop.
            warn_once(
                f"untracked:{span.get_span_context().trace_id}",
                "prime-runs: records logged inside a span that is not recording are not "
                "tracked (no run can see that span: %s); this warning is given once per trace",
                untracked_reason(_providers.providers()),
            )
            return None
        raise RunFinishedError(
            "no run is active: call prime_runs.init() first, or log inside a `run` span"
        )
    chosen = _last_started() or open_runs[-1]
    message = (
        f"{len(open_runs)} runs are open and none is in the current OpenTelemetry context; "
        f"records logged with prime_runs.log_episodes() go to run {chosen.id}. Log "
        "through the run's handle (run.log_episodes()) or inside its context "
        "(`with run:`) to choose"
    )
    if chosen.on_error == RAISE:
        raise AmbiguousRunError(message)
    warn_once(f"ambiguous:{chosen.id}", "prime-runs: %s", message)
    return chosen

"""A head sampler that never costs a run its records, and the checks that say when one would.

A run's records reach the journal through the run processor, which only sees spans that
are *recording*. A head sampler that drops the ``run`` span (``always_off``, a trace-id
ratio) or the spans under it (``parentbased_*`` under an unsampled run) would lose them
silently. ``sampler(base)`` wraps the application's sampler: it answers at least
``RECORD_ONLY`` for ``run`` spans and for every span under an open run, and ``base``'s
answer otherwise. ``RECORD_ONLY`` spans are seen by span processors but never exported,
so the application's exporters still get exactly what ``base`` chose.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Sequence

from opentelemetry import baggage, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import sampling as otel_sampling
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from prime_runs import semconv
from prime_runs.errors import ConfigurationError

logger = logging.getLogger("prime_runs")

SAMPLER_ENV = "OTEL_TRACES_SAMPLER"
SAMPLER_ARG_ENV = "OTEL_TRACES_SAMPLER_ARG"
SDK_DISABLED_ENV = "OTEL_SDK_DISABLED"
FIX = "TracerProvider(sampler=prime_runs.sampler(base))"
ENTRY_POINT = "prime_runs"  # OTEL_TRACES_SAMPLER=prime_runs under opentelemetry-instrument

# Trace ids of the run spans open in this process (a trace may hold several runs).
_lock = threading.Lock()
_open_traces: dict[int, int] = {}
_warned: set[str] = set()


def note_run_started(trace_id: int) -> None:
    """A ``run`` span started recording: spans of its trace are kept from now on."""
    with _lock:
        _open_traces[trace_id] = _open_traces.get(trace_id, 0) + 1


def note_run_ended(trace_id: int) -> None:
    with _lock:
        left = _open_traces.pop(trace_id, 0) - 1
        if left > 0:
            _open_traces[trace_id] = left


def _under_run(parent_context: Context | None, trace_id: int) -> bool:
    if trace_id in _open_traces:
        return True
    # Another process's run: its context carries the run id as baggage.
    return bool(baggage.get_baggage(semconv.BAGGAGE_RUN_ID, parent_context))


class RunSampler(Sampler):
    """``base``'s decision, raised to ``RECORD_ONLY`` for a run's spans. See ``sampler()``."""

    def __init__(self, base: Sampler) -> None:
        self.base = base

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        result = self.base.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        if result.decision.is_recording():
            return result
        if name != semconv.RUN_SPAN and not _under_run(parent_context, trace_id):
            return result
        # Recorded for the run processor, never exported: the base decided that.
        return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)

    def get_description(self) -> str:
        return f"prime_runs.sampler{{{self.base.get_description()}}}"


def sampler(base: Sampler | None = None) -> Sampler:
    """An OpenTelemetry ``Sampler`` under which no run loses records to head sampling.

    ``base`` decides what is sampled (exported); ``run`` spans and every span under an
    open run are at least recorded, so the run processor journals their records. The
    default ``base`` is what ``OTEL_TRACES_SAMPLER``/``OTEL_TRACES_SAMPLER_ARG`` name, else
    ``ParentBased(ALWAYS_ON)``, the SDK's default. Use it when creating the provider::

        TracerProvider(sampler=prime_runs.sampler(TraceIdRatioBased(0.1)))
    """
    if base is None:
        base = sampler_from_env()
    if not isinstance(base, Sampler):
        raise ConfigurationError(
            f"prime_runs.sampler(base) takes an opentelemetry.sdk.trace.sampling.Sampler, "
            f"not {type(base).__name__}"
        )
    if isinstance(base, RunSampler):
        return base
    return RunSampler(base)


def sampler_from_env() -> Sampler:
    """The sampler ``OTEL_TRACES_SAMPLER`` names, as the SDK's ``TracerProvider`` reads it
    (``prime_runs``, our own entry point, names its base in ``OTEL_TRACES_SAMPLER_ARG``)."""
    name = os.environ.get(SAMPLER_ENV, "parentbased_always_on").strip().lower()
    if name == ENTRY_POINT:
        return base_from_arg(os.environ.get(SAMPLER_ARG_ENV))
    return _named(name, os.environ.get(SAMPLER_ARG_ENV, ""))


def _named(name: str, rate_text: str) -> Sampler:
    static = {
        "always_on": otel_sampling.ALWAYS_ON,
        "always_off": otel_sampling.ALWAYS_OFF,
        "parentbased_always_on": otel_sampling.DEFAULT_ON,
        "parentbased_always_off": otel_sampling.DEFAULT_OFF,
    }
    if name in static:
        return static[name]
    if name in ("traceidratio", "parentbased_traceidratio"):
        try:
            rate = float(rate_text)
        except ValueError:
            rate = 1.0  # what the SDK does with an unreadable rate
        if name == "traceidratio":
            return otel_sampling.TraceIdRatioBased(rate)
        return otel_sampling.ParentBasedTraceIdRatio(rate)
    logger.warning(
        "prime-runs: %r is not a sampler the SDK knows; using parentbased_always_on", name
    )
    return otel_sampling.DEFAULT_ON


def base_from_arg(arg: str | None) -> Sampler:
    """The base named by ``OTEL_TRACES_SAMPLER_ARG`` under ``OTEL_TRACES_SAMPLER=prime_runs``:
    a standard sampler name, with a ratio after a colon (``parentbased_traceidratio:0.1``)."""
    name, _, rate = (arg or "parentbased_always_on").partition(":")
    return _named(name.strip().lower() or "parentbased_always_on", rate.strip() or "1.0")


def entry_point_sampler(arg: str | None = None) -> Sampler:
    """``OTEL_TRACES_SAMPLER=prime_runs`` (an ``opentelemetry_traces_sampler`` entry point,
    read by ``opentelemetry-instrument``): ``sampler()`` over the base the argument names."""
    return RunSampler(base_from_arg(arg))


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true``: SDK providers hand out non-recording spans only."""
    return os.environ.get(SDK_DISABLED_ENV, "").strip().lower() == "true"


# -- checks ----------------------------------------------------------------------------

# The id a trace-id ratio sampler keeps last: probing with it finds any ratio below 1.
_PROBE_TRACE_ID = (1 << 128) - 1
_PROBE_SPAN_ID = (1 << 64) - 1


def drops_run_spans(provider_sampler: object) -> bool:
    """Whether ``provider_sampler`` would drop a ``run`` span or a record span under one."""
    if isinstance(provider_sampler, RunSampler) or not isinstance(provider_sampler, Sampler):
        return False
    sampled_parent = trace.NonRecordingSpan(
        trace.SpanContext(
            _PROBE_TRACE_ID,
            _PROBE_SPAN_ID,
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
    )
    probes = (
        (None, semconv.RUN_SPAN),
        (trace.set_span_in_context(sampled_parent), semconv.EPISODE_SPAN),
    )
    try:
        for context, name in probes:
            result = provider_sampler.should_sample(context, _PROBE_TRACE_ID, name)
            if not result.decision.is_recording():
                return True
    except Exception:  # an odd custom sampler: nothing to say about it
        logger.debug("prime-runs: probing the provider's sampler failed", exc_info=True)
    return False


def warn_once(key: str, message: str, *args: object) -> bool:
    """Log ``message`` as a warning the first time ``key`` is seen in this process."""
    with _lock:
        if key in _warned:
            return False
        _warned.add(key)
    logger.warning(message, *args)
    return True


def check_provider(provider: object) -> None:
    """Warn once if runs opened by raw spans on ``provider`` would lose records."""
    if sdk_disabled():
        warn_once(
            "sdk-disabled",
            "prime-runs: %s=true: the OpenTelemetry SDK creates no spans, so `run` spans "
            "opened with a tracer are not tracked and their records are not recorded. "
            "prime_runs.init() runs still archive and upload; unset %s to track raw spans",
            SDK_DISABLED_ENV,
            SDK_DISABLED_ENV,
        )
        return
    provider_sampler = getattr(provider, "sampler", None)
    if drops_run_spans(provider_sampler):
        assert isinstance(provider_sampler, Sampler)
        warn_once(
            f"sampler:{id(provider)}",
            "prime-runs: the tracer provider's sampler %s drops `run` spans or the record "
            "spans under them, so runs opened with raw `run` spans would lose their "
            "records. Create the provider with %s, passing your sampler as base: your "
            "exporters still see only what it samples (prime_runs.init() runs are not "
            "affected)",
            provider_sampler.get_description(),
            FIX,
        )


def untracked_reason(providers: Iterable[object]) -> str:
    """Why a non-recording span in the current context cannot be a run's (``providers``:
    those the run processor is on)."""
    if sdk_disabled():
        return f"{SDK_DISABLED_ENV}=true makes every span non-recording"
    # The newest provider first: the likeliest to have made the span (an older one may
    # linger until it is collected).
    newest_first = (*reversed(list(providers)), trace.get_tracer_provider())
    samplers = [getattr(p, "sampler", None) for p in newest_first]
    for provider_sampler in samplers:
        if drops_run_spans(provider_sampler):
            assert isinstance(provider_sampler, Sampler)
            return (
                f"the tracer provider's sampler {provider_sampler.get_description()} dropped "
                f"it; create the provider with {FIX}"
            )
    return f"a sampler dropped it, or no SDK TracerProvider made it; create the provider with {FIX}"

"""Which tracer provider a run's spans land on, whichever tool set it up first.

Tools that trace (Langfuse, Logfire, MLflow, OpenLLMetry, the Agents SDK's instrumentations,
LiteLLM) either reuse the global SDK provider or install their own as the global one, and
OpenTelemetry lets only the first install stand. So the run processor goes where the spans
land:

- a provider that wraps an SDK one (Logfire's ``ProxyTracerProvider`` keeps it in
  ``.provider``) is unwrapped (``sdk_provider_of``);
- ``init()`` with no global SDK provider runs on a private one; when the run's context is
  entered (``with run:``) the global provider is looked at again: one set up since is joined
  (the processor added), and with none at all the private provider becomes the global one,
  so that instrumentations and tools set up later attach to it;
- a provider refused as the global one (OpenTelemetry's "Overriding of current
  TracerProvider is not allowed") holds spans no run can see: said once, naming the module
  that tried and the fix (``watch_refusals``).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import weakref
from types import FrameType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import prime_runs._logwatch as _logwatch
import prime_runs._runs.exithooks as _exit
from prime_runs._otel_private import provider_processors
from prime_runs._records.ids import ID_GENERATOR
from prime_runs.processor import RunProcessor
from prime_runs.sampling import sampler, warn_once

logger = logging.getLogger("prime_runs")

# Public attributes under which a wrapping provider keeps the SDK provider it forwards to.
WRAPPED = ("provider", "tracer_provider")
MAX_WRAPPING = 4
EXIT_FLUSH_MILLIS = 10_000  # at exit, for the processors others added to ours

_lock = threading.Lock()
_processors: weakref.WeakKeyDictionary[TracerProvider, RunProcessor] = weakref.WeakKeyDictionary()
_private: TracerProvider | None = None
_private_pid = 0  # the process that made it


def sdk_provider_of(candidate: object) -> TracerProvider | None:
    """``candidate`` itself when it is an SDK provider, else the SDK provider it wraps."""
    for _ in range(MAX_WRAPPING):
        if isinstance(candidate, TracerProvider):
            return candidate
        inner = next((getattr(candidate, a, None) for a in WRAPPED if hasattr(candidate, a)), None)
        if inner is None or inner is candidate:
            return None
        candidate = inner
    return None


def global_sdk_provider() -> TracerProvider | None:
    return sdk_provider_of(trace.get_tracer_provider())


def private_provider() -> TracerProvider:
    """Our own provider, for ``init()`` when no SDK provider is configured (one per process)."""
    global _private, _private_pid
    with _lock:
        if _private is None or os.getpid() != _private_pid:
            _private = TracerProvider(
                shutdown_on_exit=False, id_generator=ID_GENERATOR, sampler=sampler()
            )
            _private_pid = os.getpid()  # a forked child makes its own
        return _private


def is_private(provider: object) -> bool:
    return provider is not None and provider is _private


def add_processor(provider: TracerProvider, settings: dict[str, Any]) -> RunProcessor:
    """The run processor of ``provider``, added once."""
    with _lock:
        processor = _processors.get(provider)
        if processor is None:
            processor = RunProcessor(**settings)
            provider.add_span_processor(processor)
            _processors[provider] = processor
    _exit.register_exit_hook()
    watch_refusals()
    from prime_runs.genai_logs import attach  # the logs SDK loads only here, not at import

    attach()  # GenAI content sent as log records reaches its episode (docs/genai.md)
    return processor


def processors() -> list[RunProcessor]:
    with _lock:
        return list(_processors.values())


def providers() -> list[TracerProvider]:
    with _lock:
        return list(_processors)


def enter_run() -> None:
    """The run's context is being entered: join a global SDK provider set up since
    ``init()``, or, with none at all, make the private one global (see the module doc)."""
    current = trace.get_tracer_provider()
    found = sdk_provider_of(current)
    if found is not None:
        if found not in _processors:
            add_processor(found, {})
        return
    if isinstance(current, trace.ProxyTracerProvider) and _private is not None:
        if _private_pid == os.getpid():
            trace.set_tracer_provider(_private)
            # As the global provider, others' processors may batch on it: flushed at exit
            # as an SDK provider's are (it is made with shutdown_on_exit=False: closing runs
            # is the exit hook's, not a shutdown's).
            atexit.register(_flush_others, _private)


def _flush_others(provider: TracerProvider) -> None:
    """Flush the processors other tools added to ``provider`` (not the run processor)."""
    for processor in provider_processors(provider):
        if not isinstance(processor, RunProcessor):
            try:
                processor.force_flush(EXIT_FLUSH_MILLIS)
            except Exception:  # their processor: never fatal at exit
                logger.debug("prime-runs: flushing a processor at exit failed", exc_info=True)


# -- a provider OpenTelemetry refused as the global one ----------------------------------

_REFUSED = "Overriding of current TracerProvider is not allowed"
_HINTS = {
    "logfire": "logfire.configure(additional_span_processors=[pr.RunProcessor()])",
}


def watch_refusals() -> None:
    _logwatch.watch("opentelemetry.trace", _REFUSED, lambda: _refused(_caller_module()))


def _caller_module() -> str:
    """The first module on the stack outside OpenTelemetry, logging and prime-runs."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not name.startswith(("opentelemetry", "logging", "prime_runs")):
            return name
        frame = frame.f_back
    return "an unknown module"


def _refused(module: str) -> None:
    if not providers():
        return  # prime-runs is not tracing in this process: not ours to say
    tool = module.split(".", 1)[0]
    fix = _HINTS.get(tool, "add the run processor to that provider: "
                           "provider.add_span_processor(pr.RunProcessor())")  # fmt: skip
    warn_once(
        f"refused:{tool}",
        "prime-runs: %s set up a TracerProvider of its own after another was installed as "
        "the global one, and OpenTelemetry kept the first: spans made on %s's provider reach "
        "no run. Set %s up first (before pr.init()'s `with run:` or pr.configure_exporter()), "
        "or %s (docs/integrations.md)",
        module,
        tool,
        tool,
        fix,
    )

"""prime-runs: OpenTelemetry-native run tracking for LLM evaluations and RL runs.

A run is a root span named ``run``; each logged episode is a child span. See
``docs/concepts.md`` for the model and ``semconv`` for the span contract.

The public names below load on first use (PEP 562), so ``import prime_runs``, the CLI's
start-up and the pytest plugin (imported by every pytest session once the package is
installed) cost almost nothing; ``prime_runs.init`` loads the SDK, and only a run that
uploads to Prime Traces loads prime-traces.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from prime_runs._version import __version__

if TYPE_CHECKING:
    from prime_runs import metrics, projection, semconv
    from prime_runs._ainit import ainit
    from prime_runs._joining import join
    from prime_runs._runs.config import CONFIG_SOURCE_KEY, ConfigSource
    from prime_runs.api import configure_exporter, current_run, init, log_episodes, log_traces
    from prime_runs.errors import (
        AmbiguousRunError,
        APIError,
        APITimeoutError,
        ConfigurationError,
        ConflictError,
        EnvironmentResolutionError,
        ForbiddenError,
        JournalError,
        NotFoundError,
        PaymentRequiredError,
        PrimeRunsError,
        RecordError,
        RetryableAPIError,
        RunFinishedError,
        SyncError,
        TransportError,
        UnauthorizedError,
        ValidationRejectedError,
    )
    from prime_runs.platform.environments import EnvironmentRef
    from prime_runs.platform.training import RunKind, TrainingSpec
    from prime_runs.processor import RunProcessor
    from prime_runs.run import Run
    from prime_runs.sampling import sampler
    from prime_runs.settings import MODE_ENV, TRACES_OPT_OUT_ENV
    from prime_runs.status import RunStatus

# errors.py imports nothing, so its list is free to read here (one list, not two).
_ERRORS = tuple(importlib.import_module(".errors", __name__).__all__)

#: Public name -> the module that defines it (a submodule maps to itself).
_SOURCES: dict[str, str] = {
    **{name: ".errors" for name in _ERRORS},
    "ainit": "._ainit",
    "CONFIG_SOURCE_KEY": "._runs.config",
    "ConfigSource": "._runs.config",
    "configure_exporter": ".api",
    "current_run": ".api",
    "init": ".api",
    "join": "._joining",
    "log_episodes": ".api",
    "log_traces": ".api",
    "EnvironmentRef": ".platform.environments",
    "RunKind": ".platform.training",
    "TrainingSpec": ".platform.training",
    "RunProcessor": ".processor",
    "Run": ".run",
    "sampler": ".sampling",
    "record_score": "._genai.scores",
    "MODE_ENV": ".settings",
    "TRACES_OPT_OUT_ENV": ".settings",
    "RunStatus": ".status",
    "metrics": ".metrics",
    "projection": ".projection",
    "semconv": ".semconv",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'prime_runs' has no attribute {name!r}")
    module = importlib.import_module(source, __name__)
    value = module if source == f".{name}" else getattr(module, name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "CONFIG_SOURCE_KEY",
    "MODE_ENV",
    "TRACES_OPT_OUT_ENV",
    "APIError",
    "APITimeoutError",
    "AmbiguousRunError",
    "ConfigSource",
    "ConfigurationError",
    "ConflictError",
    "EnvironmentRef",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "JournalError",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "RecordError",
    "RetryableAPIError",
    "Run",
    "RunFinishedError",
    "RunKind",
    "RunProcessor",
    "RunStatus",
    "SyncError",
    "TrainingSpec",
    "TransportError",
    "UnauthorizedError",
    "ValidationRejectedError",
    "__version__",
    "ainit",
    "configure_exporter",
    "current_run",
    "init",
    "join",
    "log_episodes",
    "log_traces",
    "metrics",
    "projection",
    "record_score",
    "sampler",
    "semconv",
]

"""prime-runs: OpenTelemetry-native run tracking for LLM evaluations and RL runs.

A run is a root span named ``run``; each logged episode is a child span. See
``docs/concepts.md`` for the model and ``semconv`` for the span contract.
"""

from . import metrics, projection, semconv
from ._runconfig import CONFIG_SOURCE_KEY, ConfigSource
from ._version import __version__
from .api import configure_exporter, current_run, init, log_episodes, log_traces
from .errors import (
    APIError,
    APITimeoutError,
    ConfigurationError,
    ConflictError,
    EnvironmentResolutionError,
    ForbiddenError,
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
from .platform.environments import EnvironmentRef
from .processor import RunProcessor
from .run import Run
from .settings import MODE_ENV
from .status import RunStatus

__all__ = [
    "CONFIG_SOURCE_KEY",
    "MODE_ENV",
    "APIError",
    "APITimeoutError",
    "ConfigSource",
    "ConfigurationError",
    "ConflictError",
    "EnvironmentRef",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "RecordError",
    "RetryableAPIError",
    "Run",
    "RunFinishedError",
    "RunProcessor",
    "RunStatus",
    "SyncError",
    "TransportError",
    "UnauthorizedError",
    "ValidationRejectedError",
    "__version__",
    "configure_exporter",
    "current_run",
    "init",
    "log_episodes",
    "log_traces",
    "metrics",
    "projection",
    "semconv",
]

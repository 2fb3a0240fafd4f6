"""Every error prime-runs raises.

    PrimeRunsError
    ├── ConfigurationError          bad settings, unknown mode, unreadable config file
    ├── RecordError                 a record that cannot be logged (type, JSON, size)
    ├── RunFinishedError            logging into a run that has finished
    ├── AmbiguousRunError           module-level logging with several runs open, none in context
    ├── EnvironmentResolutionError  an environment that does not resolve on the hub
    ├── SyncError                   an archive that `prime-runs sync` cannot upload
    ├── JournalError                the run's local archive could not be written (also an OSError)
    └── APIError                    the platform answered with an error (status_code, code)
        ├── UnauthorizedError       401
        ├── PaymentRequiredError    402
        ├── ForbiddenError          403 (code `forbidden` or `service_not_enabled`)
        ├── NotFoundError           404
        ├── ConflictError           409
        ├── ValidationRejectedError 400 / 413 / 422: the request can never succeed as sent
        ├── RetryableAPIError       429 / 502 / 503 / 504 (`retry_after` in seconds, if given)
        └── TransportError          no HTTP answer: connect, timeout, broken stream
            └── APITimeoutError

No message ever contains an API key.
"""

from __future__ import annotations


def describe(error: BaseException) -> str:
    """``"<Type>: <message>"``, the reason format runs and logs use for an exception."""
    return f"{type(error).__name__}: {error}"


class PrimeRunsError(Exception):
    """Base class of every error prime-runs raises."""


class ConfigurationError(PrimeRunsError, ValueError):
    """A setting is invalid; the message names it and how to fix it."""


class RecordError(PrimeRunsError, ValueError):
    """A record cannot be logged: not a mapping, not JSON-serializable, or too large."""


class RunFinishedError(PrimeRunsError, RuntimeError):
    """A record was logged into a run that has already finished."""


class AmbiguousRunError(PrimeRunsError, RuntimeError):
    """``prime_runs.log_episodes()`` outside any run's context while several runs are open."""


class EnvironmentResolutionError(PrimeRunsError):
    """An environment given to ``init()`` did not resolve; no evaluation was created."""

    def __init__(self, environment: str, reason: str) -> None:
        super().__init__(f"environment {environment!r} did not resolve: {reason}")
        self.environment = environment
        self.reason = reason


class SyncError(PrimeRunsError):
    """An archived run could not be (fully) uploaded by ``prime-runs sync``."""


class JournalError(PrimeRunsError, OSError):
    """The run's local archive could not be written: disk full, file too large, or a
    symbolic link inside the run folder. ``errno`` is the operating system's, when known."""


class APIError(PrimeRunsError):
    """The platform or Prime Traces answered with an error."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.method = method
        self.path = path


class UnauthorizedError(APIError):
    """401: the API key was rejected."""


class PaymentRequiredError(APIError):
    """402: the account needs a payment method or credits."""


class ForbiddenError(APIError):
    """403: the key lacks a scope (`forbidden`) or the service is off (`service_not_enabled`)."""


class NotFoundError(APIError):
    """404: the evaluation, environment or route does not exist."""


class ConflictError(APIError):
    """409: e.g. the evaluation is already closed, or a line-format conflict."""


class ValidationRejectedError(APIError):
    """400/413/422: rejected as sent; resending the same request cannot succeed."""


class RetryableAPIError(APIError):
    """429/502/503/504: the platform asked for a retry."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]  # APIError's own keywords
        self.retry_after = retry_after


class TransportError(APIError):
    """No HTTP answer: connection refused or reset, timeout, broken stream."""


class APITimeoutError(TransportError):
    """The request timed out."""


__all__ = [
    "APIError",
    "APITimeoutError",
    "AmbiguousRunError",
    "ConfigurationError",
    "ConflictError",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "JournalError",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "RecordError",
    "RetryableAPIError",
    "RunFinishedError",
    "SyncError",
    "TransportError",
    "UnauthorizedError",
    "ValidationRejectedError",
]

"""0.1.4's module path for the errors: ``from prime_runs.exceptions import APIError`` keeps
working. The names are those of ``prime_runs.errors`` (also exported by ``prime_runs``), plus
what 0.1.4's module also held: prime-traces' ``TraceTooLargeError`` and
``LineFormatConflictError`` (loaded on first use) and the ``is_transient`` /
``is_record_rejection`` helpers, which read this package's errors and prime-traces' alike."""

from __future__ import annotations

import importlib
import sys
from typing import Any

from prime_runs.errors import *  # noqa: F403 - the same objects, under 0.1.4's module name
from prime_runs.errors import (
    APIError,
    ConfigurationError,
    RetryableAPIError,
    TransportError,
    ValidationRejectedError,
)
from prime_runs.errors import __all__ as _ERRORS

#: prime-traces' own errors that 0.1.4 re-exported; nothing here raises them.
_FROM_PRIME_TRACES = ("TraceTooLargeError", "LineFormatConflictError")


def __getattr__(name: str) -> Any:
    if name in _FROM_PRIME_TRACES:  # loaded only when asked for: it imports prime-traces
        value = getattr(importlib.import_module("prime_traces.exceptions"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'prime_runs.exceptions' has no attribute {name!r}")


def _traces_errors(*names: str) -> tuple[type[BaseException], ...]:
    # An instance of prime-traces' classes exists only once prime-traces is loaded.
    module = sys.modules.get("prime_traces.exceptions")
    return tuple(getattr(module, n) for n in names if hasattr(module, n)) if module else ()


def is_transient(exc: BaseException) -> bool:
    """A failure about this moment (retry later) rather than this run (0.1.4's helper)."""
    theirs = _traces_errors("RetryableAPIError", "TransportError")
    return isinstance(exc, (RetryableAPIError, TransportError, *theirs))


def is_record_rejection(exc: BaseException) -> bool:
    """A failure of the submitted batch only: a later batch can still succeed (0.1.4's
    helper). A ``ConfigurationError`` is about the run, never a batch."""
    if isinstance(exc, ConfigurationError):
        return False
    theirs = _traces_errors(
        "TraceTooLargeError", "ValidationRejectedError", "LineFormatConflictError"
    )
    rejections: tuple[type[BaseException], ...] = (
        TypeError,
        ValueError,
        ValidationRejectedError,
        *theirs,
    )
    if isinstance(exc, rejections):
        return True
    api_errors: tuple[type[BaseException], ...] = (APIError, *_traces_errors("APIError"))
    return isinstance(exc, api_errors) and getattr(exc, "status_code", None) in (413, 422)


__all__ = [*_ERRORS, *_FROM_PRIME_TRACES, "is_record_rejection", "is_transient"]

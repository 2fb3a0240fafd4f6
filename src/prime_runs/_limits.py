"""Telling a ``prime.record`` cut by an OpenTelemetry attribute length limit from bad JSON.

The SDK truncates string attribute values to ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``
(span attributes), ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (all attributes, events too) or
the ``SpanLimits`` given to the provider. A cut record is a JSON prefix: its length equals
the limit, and its brackets or a string are left open.
"""

from __future__ import annotations

import os
import re

LENGTH_LIMIT_ENVS = (
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _env_limit(name: str) -> int | None:
    try:
        return int(os.environ.get(name, ""))
    except ValueError:
        return None


def _incomplete(payload: str) -> bool:
    """Whether ``payload`` stops inside a JSON value (an open string, object or array)."""
    rest = _STRING.sub("", payload)
    if '"' in rest:  # a string that never closes
        return True
    return rest.count("{") + rest.count("[") > rest.count("}") + rest.count("]")


def cut_by_limit(payload: str) -> str | None:
    """The limit that cut ``payload`` (a setting to name), or ``None`` if it was not cut."""
    size = len(payload)
    for name in LENGTH_LIMIT_ENVS:
        if _env_limit(name) == size:
            return f"{name}={size}"
    if payload.lstrip().startswith(("{", "[")) and _incomplete(payload):
        return (
            f"an attribute length limit of {size} characters, e.g. "
            f"SpanLimits(max_attribute_length={size}) given to the TracerProvider"
        )
    return None


def cut_message(run_id: str, where: str, limit: str) -> str:
    return (
        f"a prime.record {where} in run {run_id} was cut by {limit}, so it is not a whole "
        "JSON record and was not logged. Raise the limit, or log records with "
        "pr.log_episodes() (its payload never travels as an attribute); every cut record "
        "is counted as invalid in the finish report"
    )

"""Naming the OpenTelemetry limit that cut or dropped a ``prime.record``.

Length: the SDK truncates string attribute values to ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``
(span attributes), ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (all attributes, events too) or
the ``SpanLimits`` given to the provider. A cut record is a JSON prefix: its length equals
the limit, and its brackets or a string are left open.

Count: a span or event that is full evicts its oldest attribute for each new one, and a span
evicts its oldest event (``BoundedAttributes``, ``BoundedList``), counting them as dropped.
A full container holds exactly the limit, which is how the limit is told from the count kept.
"""

from __future__ import annotations

import os
import re

from prime_runs.semconv import RECORD

LENGTH_LIMIT_ENVS = (
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
)
DEFAULT_COUNT_LIMIT = 128  # the SDK's default for every count limit
# What a count limit bounds -> the variables that set it (the first one present governs, as
# in the SDK) and the SpanLimits argument that overrides them.
COUNT_LIMITS = {
    "span attributes": (
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
        "max_span_attributes",
    ),
    "event attributes": (
        ("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
        "max_event_attributes",
    ),
    "span events": (("OTEL_SPAN_EVENT_COUNT_LIMIT",), "max_events"),
}
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
        return f"{_CODE_LIMIT}{size}"
    return None


# A limit set in code (SpanLimits) is not visible from here: an unclosed record may be cut by
# one, or may never have been whole, so the message gives both causes and both fixes.
_CODE_LIMIT = "SpanLimits(max_attribute_length="


def cut_message(run_id: str, where: str, limit: str) -> str:
    fixes = (
        "Raise the limit, or log records with pr.log_episodes() (its payload never travels "
        "as an attribute); every cut record is counted as invalid in the finish report"
    )
    if not limit.startswith(_CODE_LIMIT):
        return (
            f"a prime.record {where} in run {run_id} was cut by {limit}, so it is not a "
            f"whole JSON record and was not logged. {fixes}"
        )
    size = limit[len(_CODE_LIMIT) :]
    return (
        f"a prime.record {where} in run {run_id} is not a whole JSON record (its JSON stops "
        f"open after {size} characters), so it was not logged. If it was cut by an attribute "
        f"length limit of {size} characters (SpanLimits(max_attribute_length={size}) given "
        f"to the TracerProvider): {fixes}. If no such limit is set, the producer wrote "
        "incomplete JSON: set the attribute to json.dumps(record)"
    )


def count_limit(bounded: str, kept: int) -> str:
    """The limit on ``bounded`` (a ``COUNT_LIMITS`` key) that left ``kept`` items on a span or
    event that dropped some: a setting to name."""
    names, argument = COUNT_LIMITS[bounded]
    present = [name for name in names if name in os.environ]
    if present and _env_limit(present[0]) == kept:
        return f"{present[0]}={kept}"
    if not present and kept == DEFAULT_COUNT_LIMIT:
        return f"the default {names[0]} of {kept}"
    return (
        f"a limit of {kept} {bounded}, e.g. SpanLimits({argument}={kept}) given to the "
        "TracerProvider"
    )


def dropped_message(
    run_id: str, where: str, dropped: int, limit: str, *, event: bool = False, built: bool = False
) -> str:
    """A record span or ``event`` that ended without its ``prime.record`` after dropping
    attributes: the record was evicted to make room for later ones. ``built``: the span was
    recorded from the GenAI spans under it instead, so a record it carried is not counted."""
    last = "last in the event's attributes" if event else "after the span's other attributes"
    counted = (
        "it was recorded from the GenAI spans under it, not from a prime.record it carried"
        if built
        else "every such record is counted as invalid in the finish report"
    )
    return (
        f"{where} in run {run_id} ended without its {RECORD} after dropping {dropped} "
        f"attributes over {limit}: OpenTelemetry evicts the oldest attribute first, so a "
        f"record set before the others is lost. Raise the limit, set {RECORD} {last} (or set "
        "fewer attributes), or log records with pr.log_episodes() (its payload never travels "
        f"as an attribute); {counted}"
    )


def events_message(run_id: str, where: str, dropped: int, limit: str, counted: bool) -> str:
    """A span under a run that dropped events: records sent as the oldest events are lost."""
    if counted:
        lost = f"records sent as those events are lost: up to {dropped}, counted as invalid"
    else:
        lost = "records sent as those events, if any, are lost (the events kept carry none)"
    return (
        f"{where} of run {run_id} dropped {dropped} events over {limit}; OpenTelemetry drops "
        f"the oldest events first, so {lost}. Raise the limit, or log records as child spans "
        "or with pr.log_episodes()"
    )

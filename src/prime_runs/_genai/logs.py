"""GenAI content and evaluations sent as OpenTelemetry log records, read as span data.

Instrumentations put content in log records instead of span attributes in their default
modes: the official OpenAI instrumentation sends one ``gen_ai.<role>.message`` /
``gen_ai.choice`` record per message (``CAPTURE_MESSAGE_CONTENT=true``), or one
``gen_ai.client.inference.operation.details`` record per call holding the span's own
attributes (``EVENT_ONLY``). A record names the span it was emitted in; ``merged`` folds
the records of a span into what the mapping reads of it, so every mode yields the same
messages as the span form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

import prime_runs._genai.messages as messages
import prime_runs._genai.names as names

# Attributes a details record carries for its span (structured values, not JSON strings).
CONTENT_ATTRIBUTES = (names.INPUT_MESSAGES, names.OUTPUT_MESSAGES, names.SYSTEM_INSTRUCTIONS)
EVENT_NAME = "event.name"  # where SDKs before the log record's own event_name put it


@dataclass(frozen=True)
class LogEvent:
    """One log record, shaped like a span event: ``name`` and ``attributes`` (the record's
    attributes, and its body's keys when the body is a mapping)."""

    name: str
    attributes: Mapping[str, Any]
    timestamp: int | None = None

    @classmethod
    def of(cls, record: Any) -> LogEvent | None:
        """A ``LogRecord`` (SDK or API) as an event; None when it names no event."""
        attributes = dict(getattr(record, "attributes", None) or {})
        name = getattr(record, "event_name", None) or attributes.pop(EVENT_NAME, None)
        if not isinstance(name, str) or not name:
            return None
        body = getattr(record, "body", None)
        if isinstance(body, Mapping):
            attributes.update(body)
        return cls(name, attributes, getattr(record, "timestamp", None))


def _as_json(value: object, what: str, problems: list[str]) -> str | None:
    if isinstance(value, str):
        return value
    if messages.too_deep(value):
        problems.append(f"too deeply nested {what}: in a log record; left out")
        return None
    return json.dumps(value, default=lambda v: list(v) if isinstance(v, tuple) else str(v))


def merged(
    span: ReadableSpan, logs: Sequence[LogEvent], problems: list[str]
) -> tuple[Mapping[str, Any], list[Any]]:
    """The span's attributes and events with its log records folded in: content a span
    lacks is taken from its details record; every other record is one more event."""
    attrs: Mapping[str, Any] = span.attributes or {}
    events: list[Any] = list(span.events)
    if not logs:
        return attrs, events
    extra: dict[str, Any] = {}
    for log in logs:
        if any(name in log.attributes for name in CONTENT_ATTRIBUTES):
            for name in CONTENT_ATTRIBUTES:
                if name in log.attributes and name not in attrs:
                    value = _as_json(log.attributes[name], name, problems)
                    if value is not None:
                        extra[name] = value
        else:
            events.append(log)
    return ({**attrs, **extra} if extra else attrs), events

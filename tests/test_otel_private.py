"""The private OpenTelemetry names prime-runs relies on (``prime_runs._otel_private``) still
mean what the SDK means by them: a release that renames or moves one fails here first."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry import context as otel_context
from opentelemetry.instrumentation.utils import (
    is_http_instrumentation_enabled,
    is_instrumentation_enabled,
    suppress_instrumentation,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from prime_runs._otel_private import SUPPRESS_KEYS
from prime_runs._otel_private import suppress_instrumentation as our_suppress


def test_our_suppression_is_what_instrumentations_read() -> None:
    assert is_instrumentation_enabled() and is_http_instrumentation_enabled()
    with our_suppress():
        assert not is_instrumentation_enabled()
        assert not is_http_instrumentation_enabled()
    assert is_instrumentation_enabled()


def test_the_public_suppression_sets_the_keys_we_name() -> None:
    assert len(SUPPRESS_KEYS) == 3
    with suppress_instrumentation():
        set_keys = [k for k in SUPPRESS_KEYS if otel_context.get_value(k)]
    assert set_keys, "none of the keys named in _otel_private is set by the public helper"


class _Blocked(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        return SpanExportResult.SUCCESS


def test_the_logs_signal_names_the_genai_log_processor_reads_are_there() -> None:
    from opentelemetry._logs import get_logger_provider
    from opentelemetry.sdk import _logs as sdk_logs
    from opentelemetry.sdk._logs import export as logs_export

    from prime_runs._genai import log_processor

    assert callable(get_logger_provider)
    assert hasattr(sdk_logs, "LoggerProvider") and hasattr(sdk_logs, "LogRecordProcessor")
    assert any(hasattr(logs_export, n) for n in ("LogRecordExporter", "LogExporter"))
    assert issubclass(log_processor.GenAILogProcessor, sdk_logs.LogRecordProcessor)


def test_span_processors_names_the_providers_processors_as_they_grow() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from prime_runs._otel_private import span_processors

    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("s")
    multi, before = span_processors(span)
    added = SimpleSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(added)
    again, after = span_processors(span)
    span.end()
    assert multi is not None and again is multi
    assert after == (*before, added)


def test_provider_processors_names_what_was_added() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from prime_runs._otel_private import provider_processors

    provider = TracerProvider()
    added = SimpleSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(added)
    assert provider_processors(provider) == (added,)

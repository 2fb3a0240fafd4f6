"""The logs signal: GenAI log records reach the episode of the span they were emitted in.

``GenAILogProcessor`` is a synchronous ``LogRecordProcessor``: a record must reach its
episode before the episode span ends and its record is built, which a batching processor
cannot promise. ``pr.configure_exporter()`` attaches one to the SDK logger provider in
place; ``OTEL_LOGS_EXPORTER=prime_runs`` does the same in zero-code setups (the exporter
the SDK wraps in its batch processor only attaches the processor, and exports nothing).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry._logs import get_logger_provider
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor

if TYPE_CHECKING:  # checked against the SDK of the dev extra (1.39+)
    from opentelemetry.sdk._logs.export import LogRecordExporter as _Exporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult as _Result
else:
    try:  # renamed in SDK 1.39; the SDK's configurator checks the exporter's class
        from opentelemetry.sdk._logs.export import LogRecordExporter as _Exporter
        from opentelemetry.sdk._logs.export import LogRecordExportResult as _Result
    except ImportError:
        from opentelemetry.sdk._logs.export import LogExporter as _Exporter
        from opentelemetry.sdk._logs.export import LogExportResult as _Result

from prime_runs._genai.collector import deliver_log
from prime_runs._genai.logs import LogEvent

logger = logging.getLogger("prime_runs")

_attached: weakref.WeakSet[Any] = weakref.WeakSet()  # providers that have the processor
_attach_lock = threading.Lock()


def _forward(record: Any) -> None:
    inner = getattr(record, "log_record", record)  # SDK wrappers hold the API record
    span_id = getattr(inner, "span_id", None)
    if not span_id:
        return
    event = LogEvent.of(inner)
    if event is not None:
        deliver_log(getattr(inner, "trace_id", 0) or 0, span_id, event)


class GenAILogProcessor(LogRecordProcessor):
    """Hands each log record emitted in a span under a run to that span's episode.

    Records outside every open episode pass through untouched; this never raises."""

    def on_emit(self, log_record: Any) -> None:  # SDK 1.39+
        try:
            _forward(log_record)
        except Exception:
            logger.warning("prime-runs: could not read a log record", exc_info=True)

    emit = on_emit  # earlier SDKs call ``emit(log_data)``

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def attach(provider: Any = None) -> bool:
    """Add the processor to ``provider`` (the global logger provider by default), once.
    False when it is not an SDK provider (nothing emits log records to us then)."""
    provider = provider if provider is not None else get_logger_provider()
    if not isinstance(provider, LoggerProvider):
        return False
    with _attach_lock:
        if provider in _attached:
            return True
        provider.add_log_record_processor(GenAILogProcessor())
        _attached.add(provider)
    return True


class PrimeRunsLogExporter(_Exporter):
    """``OTEL_LOGS_EXPORTER=prime_runs``: attaches ``GenAILogProcessor`` to the logger
    provider being configured. Records that still reach ``export`` (the exporter used on
    a provider it could not attach to) are handed over there instead."""

    def __init__(self, **_: Any) -> None:
        self._attached = attach()

    def export(self, batch: Sequence[Any]) -> Any:
        if not self._attached:
            for record in batch:
                try:
                    _forward(record)
                except Exception:
                    logger.warning("prime-runs: could not read a log record", exc_info=True)
        return _Result.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

"""The public span exporters: OpenTelemetry ``SpanExporter``s over the run's sinks.

An exporter delivers the records of the spans it is given to its sinks, each span to the
sinks of its own run (one instance serves every run of the process). The spans that carry
records are raw ``episode``/``trace`` spans (or span events) with ``prime.record``: the run
processor on the same provider has journaled the record when the span ended, and the
exporter claims it from the run's ledger, so the run's own workers (``_delivery/workers``)
and an exporter a user placed on their provider deliver it once between them, through the
same sink. Other spans are ignored.

``export`` never raises and returns within its timeout (the ``timeout`` argument in
seconds, else ``OTEL_BSP_EXPORT_TIMEOUT`` in milliseconds, else 30 s), whatever the
platform does: it answers ``SUCCESS`` when every record of the batch is settled (stored, or
refused for its own sake), ``FAILURE`` when some are not stored yet (they stay pending in
the run's journal and are delivered by the next export, at ``flush()``/``finish()`` or by
``prime-runs sync``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import prime_runs._delivery.flushing as _flushing
import prime_runs._delivery.registry as _registry
import prime_runs._delivery.workers as _workers
from prime_runs import semconv
from prime_runs.errors import ConfigurationError
from prime_runs.exporters.samples import SINK_NAME as SAMPLES
from prime_runs.exporters.traces import SINK_NAME as TRACES

logger = logging.getLogger("prime_runs")


def export_timeout(timeout: float | None = None) -> float:
    """Seconds one ``export`` may take: ``timeout``, else ``OTEL_BSP_EXPORT_TIMEOUT``."""
    if timeout is not None:
        if not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout <= 0:
            raise ConfigurationError(f"timeout must be a number of seconds > 0, not {timeout!r}")
        return float(timeout)
    return _workers.export_timeout()


class RunRecordExporter(SpanExporter):
    """Base class: delivers record spans to the sinks named in ``SINKS``."""

    SINKS: tuple[str, ...] = (TRACES, SAMPLES)

    def __init__(
        self, sinks: tuple[str, ...] | None = None, *, timeout: float | None = None
    ) -> None:
        self._stopped = False
        self._sinks = self.SINKS if sinks is None else tuple(sinks)
        self._timeout = export_timeout(timeout)
        self._warned = False
        _registry.user_exporter_created()  # from now on, raw spans can be claimed

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def sinks(self) -> tuple[str, ...]:
        return self._sinks

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped:
            return SpanExportResult.FAILURE
        # Within the provider force_flush this thread may be in (see ``_delivery.flushing``).
        now = time.monotonic()
        until = _flushing.capped(now + self._timeout, now)
        try:
            ok = True
            groups, untracked = _by_run(spans)
            if untracked and not self._warned:
                self._warned = True
                logger.warning(
                    "prime-runs: %s got record spans of no run this process tracks; add the "
                    "run processor to the same provider (prime_runs.configure_exporter("
                    "provider)) or use PrimeRunsExporter, which attaches it",
                    type(self).__name__,
                )
            for delivery, refs in groups.items():
                for sink in self._sinks:
                    ok = delivery.export(sink, refs, until) and ok
            return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE
        except Exception:  # an exporter never raises into the batch processor
            logger.exception("prime-runs: %s failed to export a batch", type(self).__name__)
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Deliver every pending record of every run of the process, within the timeout."""
        until = time.monotonic() + max(0, timeout_millis) / 1000
        deliveries = _registry.deliveries()
        for delivery in deliveries:
            delivery.drain(until)
        return all(not delivery.pending() for delivery in deliveries)

    def shutdown(self) -> None:
        self._stopped = True


def _by_run(spans: Sequence[ReadableSpan]) -> tuple[dict[Any, list[int]], int]:
    """The record handles of ``spans``, by the delivery of their run; and how many raw
    records belong to no run this process tracks."""
    groups: dict[Any, list[int]] = {}
    untracked = 0
    for span in spans:
        attrs = span.attributes or {}
        for origin in _raw_origins(span, attrs):
            found = _registry.take_origin(origin)
            if found is None:
                untracked += 1
            elif found[0] is not None:  # None: its run has finished and settled it
                groups.setdefault(found[0], []).append(found[1])
    return groups, untracked


def _raw_origins(span: ReadableSpan, attrs: Any) -> list[tuple[int, int]]:
    """(span id, -1) for a raw record span, (span id, index) for each record event."""
    context = span.context
    if context is None:
        return []
    found = []
    if span.name in semconv.RECORD_SPANS and isinstance(attrs.get(semconv.RECORD), str):
        found.append((context.span_id, -1))
    for index, event in enumerate(span.events):
        if event.name in semconv.RECORD_SPANS and isinstance(
            (event.attributes or {}).get(semconv.RECORD), str
        ):
            found.append((context.span_id, index))
    return found


class PrimeTracesExporter(RunRecordExporter):
    """Uploads each record to Prime Traces, stamped with its run (sink ``traces``)."""

    SINKS = (TRACES,)

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__(timeout=timeout)


class SampleTableExporter(RunRecordExporter):
    """Appends each episode's v0 rows to its evaluation's sample table (sink
    ``eval_samples``)."""

    SINKS = (SAMPLES,)

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__(timeout=timeout)

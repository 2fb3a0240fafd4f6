"""The public span exporters: OpenTelemetry ``SpanExporter``s over the run's sinks.

An exporter delivers the records of the spans it is given to its sinks, each span to the
sinks of its own run (one instance serves every run of the process). A record span names
its run (``prime.run.id``) and carries the run's handle for the record
(``prime.record.ref``); the payload travels beside the span, in the run's ledger, so a
queue of these spans stays small and no other exporter ever sees a megabyte attribute.
Spans that are not record spans of a run this process delivers are ignored.

``export`` never raises: it answers ``SUCCESS`` when every record of the batch is settled
(stored, or refused for its own sake), ``FAILURE`` when some are not stored yet (they stay
pending in the run's journal and are delivered at ``flush()``/``finish()`` or by
``prime-runs sync``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import _registry, semconv
from .samples import SINK_NAME as SAMPLES
from .traces import SINK_NAME as TRACES

logger = logging.getLogger("prime_runs")


class RunRecordExporter(SpanExporter):
    """Base class: delivers record spans to the sinks named in ``SINKS``."""

    SINKS: tuple[str, ...] = (TRACES, SAMPLES)

    def __init__(self, sinks: tuple[str, ...] | None = None) -> None:
        self._stopped = False
        self._sinks = self.SINKS if sinks is None else tuple(sinks)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def sinks(self) -> tuple[str, ...]:
        return self._sinks

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped:
            return SpanExportResult.FAILURE
        try:
            ok = True
            for delivery, refs in _by_run(spans).items():
                for sink in self._sinks:
                    ok = delivery.export(sink, refs) and ok
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


def _by_run(spans: Sequence[ReadableSpan]) -> dict[Any, list[int]]:
    """The record handles of ``spans``, by the delivery of their run."""
    groups: dict[Any, list[int]] = {}
    for span in spans:
        attrs = span.attributes
        if not attrs:
            continue
        ref = attrs.get(semconv.RECORD_REF)
        if not isinstance(ref, int) or isinstance(ref, bool):
            continue
        delivery = _registry.lookup(attrs.get(semconv.RUN_ID))
        if delivery is not None:
            groups.setdefault(delivery, []).append(ref)
    return groups


class PrimeTracesExporter(RunRecordExporter):
    """Uploads each record to Prime Traces, stamped with its run (sink ``traces``)."""

    SINKS = (TRACES,)

    def __init__(self) -> None:
        super().__init__()


class SampleTableExporter(RunRecordExporter):
    """Appends each episode's v0 rows to its evaluation's sample table (sink
    ``eval_samples``)."""

    SINKS = (SAMPLES,)

    def __init__(self) -> None:
        super().__init__()


class PrimeRunsExporter(RunRecordExporter):
    """Both: Prime Traces uploads and sample-table rows."""

    SINKS = (TRACES, SAMPLES)


def exporter_for(sink: str) -> RunRecordExporter:
    """A fresh exporter for one sink (the run's own live path)."""
    if sink == TRACES:
        return PrimeTracesExporter()
    if sink == SAMPLES:
        return SampleTableExporter()
    return RunRecordExporter((sink,))  # any other sink (tests use scripted ones)

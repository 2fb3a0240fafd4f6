"""OpenTelemetry span exporters that deliver a run's records (a documented public module).

- :class:`PrimeTracesExporter`: Prime Traces uploads (sink ``traces``).
- :class:`SampleTableExporter`: v0 sample-table rows (sink ``eval_samples``).
- :class:`PrimeRunsExporter`: both.

They subclass ``opentelemetry.sdk.trace.export.SpanExporter`` and run under a user's
``BatchSpanProcessor`` or ``SimpleSpanProcessor``, for the raw record spans of the user's
own pipeline (a run's own records go through the process's sink workers,
``_delivery/workers``). See ``docs/opentelemetry.md``.
"""

from prime_runs.exporters._attaching import PrimeRunsExporter
from prime_runs.exporters._exporter import PrimeTracesExporter, SampleTableExporter

__all__ = [
    "PrimeRunsExporter",
    "PrimeTracesExporter",
    "SampleTableExporter",
]

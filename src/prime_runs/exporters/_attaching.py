"""``PrimeRunsExporter``: both sinks, and the zero-code entry point, which attaches the run
processor to the global provider. It is the one exporter that reaches up to the public
face (``prime_runs.configure_exporter``), so it lives apart from the other exporter
classes (``_exporter``), and nothing below the public face imports it.
"""

from __future__ import annotations

import logging
from typing import Any

from prime_runs.exporters._exporter import RunRecordExporter
from prime_runs.exporters.samples import SINK_NAME as SAMPLES
from prime_runs.exporters.traces import SINK_NAME as TRACES

logger = logging.getLogger("prime_runs")


class PrimeRunsExporter(RunRecordExporter):
    """Both: Prime Traces uploads and sample-table rows; the zero-code entry point.

    With ``attach=True`` (the default) it also adds the run processor (run lifecycle and
    journal; ``prime_runs.configure_exporter``) to the global SDK tracer provider, when one
    is set: OpenTelemetry's configurator sets the provider before it builds exporters, so
    ``OTEL_TRACES_EXPORTER=prime_runs`` under ``opentelemetry-instrument`` tracks ``run``
    spans with no ``prime_runs`` call in the program. ``settings`` are
    ``configure_exporter`` settings (``mode``, ``dir``, ...).
    """

    SINKS = (TRACES, SAMPLES)

    def __init__(
        self, *, attach: bool = True, timeout: float | None = None, **settings: Any
    ) -> None:
        super().__init__(timeout=timeout)
        if attach:
            _attach_to_global_provider(settings)


def _attach_to_global_provider(settings: dict[str, Any]) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        logger.info(
            "prime-runs: no OpenTelemetry SDK provider is set yet; PrimeRunsExporter does not "
            "attach the run processor (call prime_runs.configure_exporter(provider))"
        )
        return
    from prime_runs.api import configure_exporter  # the package imports this module

    configure_exporter(provider, **settings)

"""The ``OTEL_TRACES_EXPORTER=prime_runs`` entry point, and a note when the zero-code setup
failed.

OpenTelemetry's configurator loads every exporter class it is told to use before it builds
any, so a metrics or logs exporter it cannot find (``opentelemetry-distro`` defaults both to
OTLP, which a plain install lacks) stops it after this module was imported: the program then
runs with no tracing and no run is recorded, while the only sign is a traceback at start-up.
Importing this module (only the entry point does) arranges for a check at exit that says so.
"""

from __future__ import annotations

import atexit
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from prime_runs.exporters import PrimeRunsExporter

__all__ = ["PrimeRunsExporter"]

ENTRY_POINT = "prime_runs"

FAILED_SETUP = (
    "prime-runs: OTEL_TRACES_EXPORTER names prime_runs, but OpenTelemetry's setup failed "
    "before tracing was set up (its error is above), so this program ran untraced and no "
    "run was recorded. With a plain opentelemetry-distro install, set "
    "OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none as well (the distro defaults them to "
    "otlp, whose exporter is not installed), or install opentelemetry-exporter-otlp.\n"
)


def _selected() -> bool:
    names = os.environ.get("OTEL_TRACES_EXPORTER", "")
    return ENTRY_POINT in (name.strip() for name in names.split(","))


def _say_if_setup_failed() -> None:
    # A working setup has installed the SDK provider before the program ran.
    if _selected() and not isinstance(trace.get_tracer_provider(), TracerProvider):
        sys.stderr.write(FAILED_SETUP)


atexit.register(_say_if_setup_failed)

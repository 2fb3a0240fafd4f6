"""The process's live delivery path: one OpenTelemetry ``BatchSpanProcessor`` per sink,
shared by every run and every join of the process.

A record's span (its run id and its handle in the run's ledger; the payload stays in the
ledger) is queued here, and the processor's exporter (``prime_runs.exporters``) finds the
run by id and delivers the records of each run of the batch through that run's channel.
The threads therefore belong to the process, not to a run: a hundred runs or joins cost
the same two worker threads as one. The processors live as long as the process (their
workers are daemon threads); OpenTelemetry resets them in a forked child.
"""

from __future__ import annotations

import logging
import threading

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import prime_runs._forking as _forking
from prime_runs._otel_private import BATCH_PROCESSOR_LOGGERS
from prime_runs.settings import positive_env_int

logger = logging.getLogger("prime_runs")

# BatchSpanProcessor defaults for this workload, each overridden by its OTEL_BSP_* variable.
# Let a batch fill for a moment: a few large requests cost far less (CPU, GIL hand-offs,
# requests) than one per record, and flush()/finish() do not wait for the delay.
SCHEDULE_DELAY_MILLIS = 200
# A span on this path is a few hundred bytes (the payload is beside it), so a batch of this
# many is one request or a few; the sinks split by bytes themselves.
MAX_EXPORT_BATCH_SIZE = 2048
# OpenTelemetry's own default: one batch. What a full queue drops is delivered from the
# ledger by the next export (or at flush/finish), so a longer queue would only hold more
# memory (a span here is about 600 bytes).
MAX_QUEUE_SIZE = 2048
_ENV = {
    "max_queue_size": ("OTEL_BSP_MAX_QUEUE_SIZE", MAX_QUEUE_SIZE),
    "schedule_delay_millis": ("OTEL_BSP_SCHEDULE_DELAY", SCHEDULE_DELAY_MILLIS),
    "max_export_batch_size": ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", MAX_EXPORT_BATCH_SIZE),
}
RESOURCE = Resource.get_empty()

# Set while this thread hands a record's span to the run's own processors.
_handing = threading.local()


class _OwnQueueDrops(logging.Filter):
    """Hides "Queue full, dropping Span." from the run's own processors: what their queue
    drops is delivered from the ledger by the next export or at flush/finish, so the line
    would announce a loss that is none. A user's own processors still log it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_handing, "active", False)


def _install_filter() -> None:
    for name in BATCH_PROCESSOR_LOGGERS:
        # First in line: OpenTelemetry's duplicate filter must not count a hidden line
        # against a user's identical one.
        logging.getLogger(name).filters.insert(0, _OwnQueueDrops())


_install_filter()


def batch_settings() -> dict[str, int]:
    """The ``BatchSpanProcessor`` settings: ``OTEL_BSP_*`` where set (and valid), else ours."""
    chosen = {arg: positive_env_int(env, default) for arg, (env, default) in _ENV.items()}
    # The SDK refuses a batch larger than the queue.
    chosen["max_export_batch_size"] = min(chosen["max_export_batch_size"], chosen["max_queue_size"])
    return chosen


_lock = threading.Lock()
# (sink, settings) -> its processor. Settings are fixed for a process in practice; a test
# that changes OTEL_BSP_* between runs gets processors of its own settings.
_processors: dict[tuple[str, tuple[tuple[str, int], ...]], BatchSpanProcessor] = {}


def processor(sink: str) -> BatchSpanProcessor | None:
    """The process's processor for ``sink`` under the current ``OTEL_BSP_*`` settings; None
    at interpreter shutdown (Python 3.12+ starts no thread in exit hooks, and a processor is
    a thread): there is no live path then, and the caller's records wait in its ledger for
    ``finish()``, which delivers them on its own thread."""
    settings = batch_settings()
    key = (sink, tuple(sorted(settings.items())))
    with _lock:
        found = _processors.get(key)
        if found is None:
            # The public exporters import the core: a deferred import keeps the core first.
            from prime_runs.exporters._exporter import exporter_for

            try:
                found = BatchSpanProcessor(
                    exporter_for(sink),
                    max_queue_size=settings["max_queue_size"],
                    schedule_delay_millis=settings["schedule_delay_millis"],
                    max_export_batch_size=settings["max_export_batch_size"],
                )
            except RuntimeError:
                return None
            _processors[key] = found
        return found


def hand(span: ReadableSpan, processors: list[BatchSpanProcessor]) -> None:
    """Queue a record's span on each of ``processors`` (from :func:`processor`)."""
    _handing.active = True
    try:
        for found in processors:
            found.on_end(span)
    finally:
        _handing.active = False


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread


_forking.in_child(_after_fork)

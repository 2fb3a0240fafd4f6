"""OpenTelemetry's "Queue full, dropping Span." is not printed for the run's own batch
processors (what they drop is delivered from the ledger, nothing is lost), and still is for
a user's own."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs import _otel_private
from prime_runs.testing import StandInPlatform


class _CountQueueFull(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        self.count += _queue_full(record.getMessage())
        return True


def test_the_runs_own_full_queue_says_nothing_and_loses_nothing(
    request: pytest.FixtureRequest,
    prime_env: StandInPlatform,
    burst: Callable[[int], list[dict]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    records = burst(40)
    caplog.set_level(logging.WARNING)
    run = pr.init(name="full-queue", environments=["gsm8k"], model="m", framework="f")
    # Counts the line ahead of the SDK's filter: proof that the queues did overflow.
    overflowed = _CountQueueFull()
    for name in _otel_private.BATCH_PROCESSOR_LOGGERS:
        logging.getLogger(name).filters.insert(0, overflowed)
        request.addfinalizer(lambda name=name: logging.getLogger(name).removeFilter(overflowed))
    prime_env.stall(None, 30)  # the first exports hang: the one-span queues overflow
    try:
        run.log_episodes(records)
    finally:
        prime_env.unstall()
    run.finish(timeout=120)
    assert run.archive_path is not None
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert overflowed.count > 0  # the queues did drop spans...
    assert not [r for r in caplog.records if _queue_full(r.getMessage())]  # ...quietly
    assert status["acked"] == {"traces": 40, "eval_samples": 40}
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}


def _queue_full(message: str) -> bool:
    # "Queue full, dropping Span." (newer SDKs) or "Queue is full, ..." (older ones).
    return "Queue full" in message or "Queue is full" in message


_USER_PIPELINE = """
import logging, threading
import prime_runs._delivery.delivery  # installs the filter: it must leave this pipeline alone
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
logging.getLogger().addHandler(Keep())

gate = threading.Event()
class Slow(SpanExporter):
    def export(self, spans):
        gate.wait(10)
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(
    BatchSpanProcessor(Slow(), max_queue_size=2, max_export_batch_size=1, schedule_delay_millis=1)
)
tracer = provider.get_tracer("user")
for _ in range(20):
    tracer.start_span("work").end()
gate.set()
provider.shutdown()
print(sum("Queue full" in line or "Queue is full" in line for line in seen))
"""


def test_a_users_own_full_queue_is_still_reported() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _USER_PIPELINE], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip().splitlines()[-1]) >= 1

"""A run keeps no span queue of its own: a burst while the platform stalls waits in the
ledger, drops nothing and logs no "Queue full, dropping Span."; a user's own batch
processor still reports its full queue (the SDK leaves OpenTelemetry's logging alone)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.testing import StandInPlatform


def test_a_burst_while_the_platform_stalls_says_nothing_and_loses_nothing(
    prime_env: StandInPlatform,
    burst: Callable[[int], list[dict]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")  # no queue of ours to overflow
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    records = burst(40)
    caplog.set_level(logging.WARNING)
    run = pr.init(name="full-queue", environments=["gsm8k"], model="m", framework="f")
    prime_env.stall(None, 30)  # the first requests hang while the burst is logged
    try:
        run.log_episodes(records)
    finally:
        prime_env.unstall()
    run.finish(timeout=120)
    assert run.archive_path is not None
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert not [r for r in caplog.records if _queue_full(r.getMessage())]
    assert status["acked"] == {"traces": 40, "eval_samples": 40}
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}


def _queue_full(message: str) -> bool:
    # "Queue full, dropping Span." (newer SDKs) or "Queue is full, ..." (older ones).
    return "Queue full" in message or "Queue is full" in message


_USER_PIPELINE = """
import logging, threading
import prime_runs._delivery.delivery  # the SDK must leave this pipeline's logging alone
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

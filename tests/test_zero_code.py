"""The three ways in, against the stand-in: zero-code (a real ``opentelemetry-instrument``
subprocess selecting ``OTEL_TRACES_EXPORTER``), and a user's own provider with our
exporter in their ``BatchSpanProcessor`` or ``SimpleSpanProcessor``, fed by raw spans.
Every record is stored once, stamped with the run, with one sample row each."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)

import prime_runs as pr
import prime_runs._delivery.registry as _registry
from prime_runs.exporters import PrimeRunsExporter, PrimeTracesExporter
from prime_runs.testing import StandInPlatform

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"


def _stored_once(p: StandInPlatform, expected_records: int) -> str:
    (eval_id,) = p.evaluations
    assert p.evaluations[eval_id]["finalize_count"] == 1
    assert len(p.episode_writes) == expected_records
    assert set(p.episode_writes.values()) == {1}
    for doc in p.episodes.values():
        assert doc["run"]["id"] == eval_id
    rows = Counter(r["sample_id"] for r in p.samples(eval_id))
    assert rows == Counter({episode_id: 1 for episode_id in p.episode_writes})
    return eval_id


@pytest.mark.parametrize("exporters", ["prime_runs", "console,prime_runs"])
def test_opentelemetry_instrument_selects_the_exporter_by_name(
    prime_env: StandInPlatform, exporters: str
) -> None:
    env = dict(os.environ)
    env.update(
        OTEL_TRACES_EXPORTER=exporters,
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        PYTHONPATH=str(EXAMPLES),
    )
    result = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(EXAMPLES / "zero_code.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "logged 10 episodes" in result.stdout
    assert "Traceback" not in result.stderr
    eval_id = _stored_once(prime_env, 10)
    assert prime_env.evaluations[eval_id]["name"] == "zero-code"
    if exporters.startswith("console"):
        assert '"name": "run"' in result.stdout  # the console exporter got the spans too


def test_the_own_batch_processor_example(prime_env: StandInPlatform) -> None:
    env = dict(os.environ, PYTHONPATH=str(EXAMPLES))
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "own_batch_processor.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "10 episodes logged as spans and delivered" in result.stdout
    _stored_once(prime_env, 10)


class _Recording(PrimeRunsExporter):
    def __init__(self) -> None:
        super().__init__(attach=False)
        self.results: list[SpanExportResult] = []

    def export(self, spans: Any) -> SpanExportResult:
        result = super().export(spans)
        self.results.append(result)
        return result


def _raw_run(provider: TracerProvider, episodes: list[dict[str, Any]]) -> None:
    tracer = provider.get_tracer("user")
    attributes = {"prime.run.name": "own-pipeline", "prime.run.environments": ["gsm8k"]}
    with tracer.start_as_current_span("run", attributes=attributes):
        for episode in episodes:
            with tracer.start_as_current_span("episode") as span:
                span.set_attribute("prime.record", json.dumps(episode))


@pytest.mark.parametrize("processor", [BatchSpanProcessor, SimpleSpanProcessor])
def test_our_exporter_in_a_users_own_processor(
    prime_env: StandInPlatform,
    episodes: list[dict[str, Any]],
    processor: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    claimed: list[object] = []
    take = _registry.take_origin

    def counting(origin: tuple[int, int]) -> Any:
        found = take(origin)
        claimed.append(found)
        return found

    monkeypatch.setattr(_registry, "take_origin", counting)
    provider = TracerProvider()
    pr.configure_exporter(provider)  # the run lifecycle and the journal
    exporter = _Recording()
    provider.add_span_processor(processor(exporter))
    _raw_run(provider, episodes)
    assert provider.force_flush(60_000)  # waits for the run's close-out too
    provider.shutdown()
    _stored_once(prime_env, len(episodes))
    assert exporter.results and SpanExportResult.FAILURE not in exporter.results
    # The user's exporter found every raw record in its run (whoever sent it first).
    assert len(claimed) == len(episodes) and None not in claimed


def test_an_exporter_without_the_run_processor_says_what_is_missing(
    prime_env: StandInPlatform,
    episodes: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(PrimeTracesExporter()))
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        _raw_run(provider, episodes)
    provider.shutdown()
    assert prime_env.evaluations == {}
    assert sum("configure_exporter(provider)" in r.getMessage() for r in caplog.records) == 1


def test_records_sent_as_span_events_reach_a_users_exporter_once(
    prime_env: StandInPlatform,
    episodes: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    claimed: list[object] = []
    take = _registry.take_origin

    def counting(origin: tuple[int, int]) -> Any:
        found = take(origin)
        claimed.append(found)
        return found

    monkeypatch.setattr(_registry, "take_origin", counting)
    provider = TracerProvider()
    pr.configure_exporter(provider)
    exporter = _Recording()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("user")
    attributes = {"prime.run.name": "events", "prime.run.environments": ["gsm8k"]}
    with tracer.start_as_current_span("run", attributes=attributes) as run_span:
        for episode in episodes:
            run_span.add_event("episode", {"prime.record": json.dumps(episode)})
    assert provider.force_flush(60_000)
    provider.shutdown()
    _stored_once(prime_env, len(episodes))
    assert len(claimed) == len(episodes) and None not in claimed  # one origin per event
    assert SpanExportResult.FAILURE not in exporter.results

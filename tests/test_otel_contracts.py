"""OpenTelemetry's contracts and the run's own promises (issue 20): ``export()`` returns within
its timeout whatever the platform does, and ``flush()`` says False while a stopped sink holds
records the platform never stored."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prime_runs as pr
from prime_runs import semconv
from prime_runs.exporters import PrimeTracesExporter
from prime_runs.testing import StandInPlatform

RUN_ATTRS = {semconv.RUN_ENVIRONMENTS: ["gsm8k"], semconv.RUN_MODEL: "m"}


def test_flush_is_false_while_a_stopped_sink_holds_records(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    run = pr.init(name="stopped-sink", environments=["gsm8k"], model="m", framework="f")
    prime_env.outage(500, routes=["samples_append"])  # sink-wide: the sink stops

    assert run.flush(timeout=60) is True  # nothing logged yet: nothing owed
    run.log_episodes(episodes)

    assert run.flush(timeout=60) is False
    assert run.failed_records.get("eval_samples") == len(episodes)
    assert len(prime_env.episodes) == len(episodes)  # the other sink stored everything
    prime_env.recover()
    run.finish(timeout=30)


def test_flush_is_true_once_everything_is_stored(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    run = pr.init(name="all-stored", environments=["gsm8k"], model="m", framework="f")
    run.log_episodes(episodes)

    assert run.flush(timeout=60) is True
    assert run.failed_records == {}
    run.finish(timeout=30)


@pytest.mark.parametrize(("timeout_ms", "via"), [(1500, "env"), (1000, "argument")])
def test_export_returns_within_its_timeout_against_a_stalled_platform(
    prime_env: StandInPlatform,
    episodes: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    timeout_ms: int,
    via: str,
) -> None:
    # The run's own live path waits (a long schedule delay), so only this export sends.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    if via == "env":
        monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", str(timeout_ms))
        exporter = PrimeTracesExporter()
    else:
        exporter = PrimeTracesExporter(timeout=timeout_ms / 1000)
    provider = TracerProvider()
    seen = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(seen))
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("app")
    run_span = tracer.start_span("run", attributes=RUN_ATTRS)
    context = trace.set_span_in_context(run_span)
    for episode in episodes:
        attrs = {semconv.RECORD: json.dumps(episode)}
        tracer.start_span("episode", context, attributes=attrs).end()
    spans = [s for s in seen.get_finished_spans() if s.name == "episode"]
    prime_env.stall("traces_upload", 60)
    try:
        started = time.monotonic()
        result = exporter.export(spans)
        took = time.monotonic() - started
    finally:
        prime_env.unstall()

    assert result is SpanExportResult.FAILURE  # not stored yet: still owed by the journal
    assert took < timeout_ms / 1000 + 1.0, took
    run_span.end()
    provider.force_flush(60_000)
    provider.shutdown()
    assert {e["id"] for e in episodes} <= set(prime_env.episodes)  # delivered afterwards


def test_an_init_run_span_ends_like_a_raw_one_with_its_error(span_capture: Any) -> None:
    provider, exporter = span_capture
    run = pr.init(name="failing", environments=["gsm8k"], mode="offline", tracer_provider=provider)

    run.fail("the grader crashed")

    (span,) = [s for s in exporter.get_finished_spans() if s.name == "run"]
    assert span.attributes[semconv.RUN_STATUS] == "failed"
    assert span.attributes[semconv.RUN_ERROR] == "the grader crashed"
    assert span.status.description == "the grader crashed"


def test_a_cut_deadline_stops_the_platform_clients_retries(prime_env: StandInPlatform) -> None:
    import threading

    from prime_runs._records.item import Deadline
    from prime_runs.errors import APIError
    from prime_runs.platform._http import PlatformClient
    from prime_runs.settings import Settings

    prime_env.outage(503, routes=["eval_get"])
    client = PlatformClient(Settings.resolve())
    deadline = Deadline(time.monotonic() + 120)
    threading.Timer(0.5, deadline.cut, args=(time.monotonic() + 0.5,)).start()
    started = time.monotonic()
    try:
        with pytest.raises(APIError):  # what the last attempt answered
            client.request("GET", "/evaluations/ev_x", idempotent=True, deadline=deadline)
    finally:
        client.close()
    # The retry waits (1 s, 2 s, 4 s, ...) would have run for 15 s: the cut ends them.
    assert time.monotonic() - started < 3.0
    assert 1 <= len(prime_env.requests_for("eval_get")) <= 3

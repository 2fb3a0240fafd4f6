"""Record spans made on another provider under a run are records of that run (issue 20): a
raw ``episode`` span on a second SDK provider (with the run processor) under a ``run`` span
of the first, or under a ``pr.init()`` run, is journaled, delivered and counted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from prime_runs import semconv
from prime_runs.testing import StandInPlatform


def _episode_spans(tracer: trace.Tracer, context: Any, records: list[dict[str, Any]]) -> None:
    for record in records:
        attrs = {semconv.RECORD: json.dumps(record)}
        tracer.start_span("episode", context, attributes=attrs).end()


def test_episode_spans_of_a_second_provider_under_a_raw_run_are_records(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    first, second = TracerProvider(), TracerProvider()
    pr.configure_exporter(first)
    pr.configure_exporter(second)
    run_span = first.get_tracer("app").start_span(
        "run", attributes={semconv.RUN_ENVIRONMENTS: ["gsm8k"]}
    )
    context = trace.set_span_in_context(run_span)
    half = len(episodes) // 2

    _episode_spans(first.get_tracer("app"), context, episodes[:half])
    _episode_spans(second.get_tracer("other"), context, episodes[half:])
    run_span.end()
    first.force_flush(60_000)
    first.shutdown()
    second.shutdown()

    assert set(prime_env.episodes) == {e["id"] for e in episodes}
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1


def test_episode_spans_of_a_users_provider_under_an_init_run_are_records(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    users = TracerProvider()
    pr.configure_exporter(users)
    run = pr.init(name="two-providers", environments=["gsm8k"], model="m", framework="f")
    half = len(episodes) // 2
    run.log_episodes(episodes[:half])

    with run:
        _episode_spans(users.get_tracer("app"), None, episodes[half:])

    assert run.logged_records == len(episodes)
    assert run.acknowledged_records == {"traces": len(episodes), "eval_samples": len(episodes)}
    users.shutdown()


def test_a_record_span_of_another_trace_is_never_a_record_of_the_run(
    episodes: list[dict[str, Any]],
) -> None:
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    run_span = tracer.start_span("run", attributes={semconv.RUN_ENVIRONMENTS: ["gsm8k"]})
    own = run_span.get_span_context()
    # Same span id as the run, another trace: a remote parent that only collides with it.
    other = SpanContext(own.trace_id ^ 1, own.span_id, True, TraceFlags(1))
    _episode_spans(tracer, trace.set_span_in_context(NonRecordingSpan(other)), episodes[:1])
    _episode_spans(tracer, trace.set_span_in_context(run_span), episodes[1:2])
    run_span.end()
    provider.shutdown()

    run_dir = next(Path(os.environ["PRIME_RUNS_DIR"]).iterdir())
    lines = [
        json.loads(line)
        for path in (run_dir / "records").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert [r["id"] for r in lines] == [episodes[1]["id"]]

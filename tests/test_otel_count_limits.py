"""OpenTelemetry's count limits never lose a record silently: a ``prime.record`` evicted from a
full span or event, or a record event dropped from a full span, is reported once per run naming
the limit, and counted; records the limits left whole are still delivered."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanLimits

import _archives
import prime_runs as pr
from _otel import RUN_ATTRS, archived, evaluation_of, only_archive, provider_with, run_script
from prime_runs.testing import StandInPlatform

COUNT_SCRIPT = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
import prime_runs as pr


def record(tag):
    return json.dumps({"id": tag, "traces": [{"id": f"tr-{tag}", "reward": 1.0}]})


trace.set_tracer_provider(TracerProvider())
pr.configure_exporter(mode="offline")
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("run", attributes={"prime.run.name": "counted"}) as run_span:
    for i in range(4):
        attributes = {"prime.record": record(f"ep-{i}")}
        with tracer.start_as_current_span("episode", attributes=attributes) as span:
            span.set_attribute("prime.task.id", str(i))
            if i % 2 == 0:  # a third attribute: a span limited to two evicts prime.record
                span.set_attribute("app.extra", i)
    with tracer.start_as_current_span("episode") as span:  # prime.record last: it stays
        span.set_attribute("app.a", 1)
        span.set_attribute("app.b", 2)
        span.set_attribute("prime.record", record("last"))
    with tracer.start_as_current_span("tool-call", attributes={"a": 1, "b": 2, "c": 3}):
        pass  # drops attributes but is no record span
    run_span.add_event("episode", {"prime.record": record("ev-0"), "step": 0})
    run_span.add_event("episode", {"prime.record": record("ev-1")})
    with tracer.start_as_current_span("rollout") as rollout:
        for i in range(3):
            rollout.add_event("trace", {"prime.record": record(f"rv-{i}")})
run = pr.init(name="sdk-logged", mode="offline")
run.log_episodes([{"id": tag, "env": {"id": "gsm8k"}, "traces": [{"id": f"t-{tag}", "reward": 1.0}]}
                  for tag in ("sdk-a", "sdk-b")])
run.finish()
"""
ALL = {"ep-0", "ep-1", "ep-2", "ep-3", "last", "ev-0", "ev-1", "rv-0", "rv-1", "rv-2"}


def by_name(root: Path) -> dict[str, _archives.Archive]:
    runs = {}
    for archive in _archives.runs(root):
        runs[archive.description()["name"]] = archive
    return runs


@pytest.mark.parametrize(
    ("variable", "value", "lost"),
    [
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2", {"ep-0", "ep-2"}),
        ("OTEL_ATTRIBUTE_COUNT_LIMIT", "2", {"ep-0", "ep-2"}),
        ("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "1", {"ev-0"}),
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "2", {"rv-0"}),
    ],
)
def test_a_record_lost_to_a_count_limit_is_reported_naming_it_and_counted(
    variable, value, lost, tmp_path, isolated_env
):
    proc = run_script(tmp_path, COUNT_SCRIPT, {variable: value})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(f"over {variable}={value}") == 1  # once per run, then counted
    said = "1 record was" if len(lost) == 1 else f"{len(lost)} records were"
    assert f"{said} not logged: {len(lost)} refused as bad input" in proc.stderr
    runs = by_name(isolated_env)
    counted = runs["counted"]
    assert sorted(r["id"] for r in archived(counted)) == sorted(ALL - lost)
    status = counted.status()
    assert (status["logged"], status["invalid"]) == (len(ALL - lost), len(lost))
    # The SDK's own record spans lose attributes too, but never their record: no loss is
    # claimed and no GenAI episode is made of them.
    sdk = runs["sdk-logged"]
    assert sorted(r["id"] for r in archived(sdk)) == ["sdk-a", "sdk-b"]
    assert sdk.status()["invalid"] == 0


def test_without_a_limit_hit_nothing_is_reported(tmp_path, isolated_env):
    proc = run_script(tmp_path, COUNT_SCRIPT, {})
    assert proc.returncode == 0, proc.stderr
    assert " over " not in proc.stderr and "invalid" not in proc.stderr
    assert {r["id"] for r in archived(by_name(isolated_env)["counted"])} == ALL


def raw_run_with_cut_records(provider, episodes: list[dict]) -> None:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        for i, episode in enumerate(episodes):
            attributes = {"prime.record": json.dumps(episode)}
            with tracer.start_as_current_span("episode", attributes=attributes) as span:
                span.set_attribute("app.step", i)
                if i < 2:
                    span.set_attribute("app.extra", i)  # evicts prime.record
    provider.force_flush()


def test_span_limits_cut_is_reported_and_the_rest_delivered_online(
    prime_env: StandInPlatform, episodes, caplog
):
    provider, _ = provider_with(pr.sampler(), span_limits=SpanLimits(max_span_attributes=2))
    pr.configure_exporter(provider)
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        raw_run_with_cut_records(provider, episodes[:5])
    (said,) = [r.getMessage() for r in caplog.records if "ended without its" in r.getMessage()]
    assert "SpanLimits(max_span_attributes=2)" in said and "pr.log_episodes()" in said
    assert set(prime_env.episode_writes) == {e["id"] for e in episodes[2:5]}
    archive = only_archive(Path(os.environ["PRIME_RUNS_DIR"]))
    status = archive.status()
    assert (status["logged"], status["invalid"], status["status"]) == (3, 2, "completed")
    assert evaluation_of(prime_env, archive.path.name)["finalize_count"] == 1


def test_record_events_over_the_event_count_limit_are_counted(episodes, isolated_env, caplog):
    provider, _ = provider_with(pr.sampler(), span_limits=SpanLimits(max_events=2))
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        with tracer.start_as_current_span("run", attributes=RUN_ATTRS) as run_span:
            for episode in episodes[:5]:
                run_span.add_event("episode", {"prime.record": json.dumps(episode)})
            with tracer.start_as_current_span("rollout") as rollout:
                for step in range(4):  # not records: reported, not counted
                    rollout.add_event("progress", {"step": step})
        provider.force_flush()
    messages = [r.getMessage() for r in caplog.records]
    (counted,) = [m for m in messages if "up to 3, counted as invalid" in m]
    assert "SpanLimits(max_events=2)" in counted
    assert any("dropped 2 events" in m and "if any, are lost" in m for m in messages)
    archive = only_archive(isolated_env)
    assert [r["id"] for r in archived(archive)] == [e["id"] for e in episodes[3:5]]  # the newest
    assert (archive.status()["logged"], archive.status()["invalid"]) == (2, 3)


def test_a_genai_episode_span_over_the_limit_is_recorded_not_counted_lost(isolated_env, caplog):
    provider, _ = provider_with(pr.sampler(), span_limits=SpanLimits(max_span_attributes=1))
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
            attributes = {"prime.task.id": "t-1", "prime.env.id": "gsm8k"}
            with tracer.start_as_current_span("episode", attributes=attributes):
                pass
        provider.force_flush()
    (said,) = [r.getMessage() for r in caplog.records if "ended without its" in r.getMessage()]
    assert "recorded from the GenAI spans under it" in said
    status = only_archive(isolated_env).status()
    assert (status["logged"], status["invalid"]) == (1, 0)

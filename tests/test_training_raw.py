"""A training run opened by a raw ``run`` span (no ``pr.init``), against the stand-in over
HTTP with a real provider and processor: registered off the thread that starts the span,
its ``step`` spans become metrics rows (sent under the platform's id once it exists), and
ending the span finalizes it, or fails it on an ERROR status. Offline, `prime-runs sync`
registers and closes it once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

import prime_runs as pr
from _otel import archive_of
from _support import run_cli
from prime_runs import semconv
from prime_runs.testing import StandInPlatform

TRAIN_ATTRS = {
    semconv.RUN_TYPE: "train",
    semconv.RUN_NAME: "rl-raw",
    semconv.RUN_MODEL: "Qwen/Qwen3-4B",
    semconv.RUN_ENVIRONMENTS: ["gsm8k"],
    semconv.RUN_TEAM_ID: "team-1",
    semconv.RUN_CONFIG: json.dumps({"lr": 1e-5}),
    "prime.train.max_steps": 3,
    "prime.train.batch_size": 8,
}


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    provider = TracerProvider()  # the application's own
    yield provider
    provider.shutdown()


def _steps(tracer: trace.Tracer, steps: range) -> float:
    """``step`` spans under the current span; the longest any one took."""
    slowest = 0.0
    for step in steps:
        started = time.monotonic()
        attributes = {semconv.TRAIN_STEP: step, "prime.train.metrics.loss": 1.0 / (step + 1)}
        with tracer.start_as_current_span("step", attributes=attributes):
            pass
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def _episode(tracer: trace.Tracer, record: dict[str, Any]) -> None:
    with tracer.start_as_current_span("episode", attributes={semconv.RECORD: json.dumps(record)}):
        pass


def test_a_raw_run_span_training_loop_streams_rows_and_finalizes_once(
    prime_env: StandInPlatform, provider: TracerProvider, episodes: list[dict[str, Any]]
) -> None:
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("trainer")
    record = dict(episodes[0], run={"work": {"type": "train", "step": 1}})
    with tracer.start_as_current_span("run", attributes=TRAIN_ATTRS) as run_span:
        _steps(tracer, range(3))
        _episode(tracer, record)
        with tracer.start_as_current_span("rollouts") as span:
            span.add_event("step", {semconv.TRAIN_STEP: 3, "prime.train.metrics.reward": 0.5})
    assert provider.force_flush(60_000)

    ((run_id, stored),) = prime_env.training_runs.items()  # registered once
    assert (stored["base_model"], stored["team_id"], stored["name"]) == (
        "Qwen/Qwen3-4B",
        "team-1",
        "rl-raw",
    )
    assert (stored["max_steps"], stored["batch_size"], stored["run_config"]) == (3, 8, {"lr": 1e-5})
    rows = prime_env.training_metrics(run_id)
    assert sorted(r["step"] for r in rows) == [0, 1, 2, 3]  # one row per step, sent once
    assert rows[0]["loss"] == 1.0 and prime_env.training_steps(run_id)[3]["reward"] == 0.5
    assert (stored["status"], stored["finalize_count"]) == ("completed", 1)
    assert prime_env.requests_for("rft_status") == [] and "eval_create" not in [
        r.route for r in prime_env.requests
    ]
    stamped = prime_env.episodes[record["id"]]["run"]
    assert (stamped["id"], stamped["type"], stamped["work"]) == (
        run_id,
        "train",
        record["run"]["work"],
    )
    assert run_span.attributes[semconv.RUN_TYPE] == "train"
    status = archive_of(run_id).status()
    assert (status["status"], status["closed"]) == ("completed", True)


def test_starting_the_span_never_waits_for_a_stalled_register(
    prime_env: StandInPlatform, provider: TracerProvider
) -> None:
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("trainer")
    prime_env.stall("rft_register", 60.0)  # until unstall()
    try:
        started = time.monotonic()
        run_span = tracer.start_span("run", attributes=TRAIN_ATTRS)
        took = time.monotonic() - started
        with trace.use_span(run_span):
            slowest = _steps(tracer, range(3))  # logged while the register waits
        assert prime_env.training_runs == {}
    finally:
        prime_env.unstall()
    assert took < 1.0, took  # a register that waits 60 s does not hold start_span
    assert slowest < 1.0, slowest
    run_span.end()
    assert provider.force_flush(60_000)
    ((run_id, stored),) = prime_env.training_runs.items()
    # Rows journaled under the local id went out once, under the platform's id.
    assert sorted(r["step"] for r in prime_env.training_metrics(run_id)) == [0, 1, 2]
    assert stored["finalize_count"] == 1


def test_a_span_ended_with_an_error_status_fails_the_run(
    prime_env: StandInPlatform, provider: TracerProvider
) -> None:
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("trainer")
    run_span = tracer.start_span("run", attributes=TRAIN_ATTRS)
    with trace.use_span(run_span):
        _steps(tracer, range(2))
    run_span.set_status(Status(StatusCode.ERROR, "loss diverged"))
    run_span.end()
    assert provider.force_flush(60_000)
    ((run_id, stored),) = prime_env.training_runs.items()
    assert (stored["status"], stored["error_message"]) == ("failed", "loss diverged")
    assert stored["finalize_count"] == 0
    assert sorted(r["step"] for r in prime_env.training_metrics(run_id)) == [0, 1]


def _offline_loop(provider: TracerProvider, episodes: list[dict[str, Any]]) -> str:
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("trainer")
    with tracer.start_as_current_span("run", attributes=TRAIN_ATTRS) as run_span:
        _steps(tracer, range(3))
        _episode(tracer, dict(episodes[0], run={"work": {"type": "train", "step": 0}}))
    assert provider.force_flush(60_000)
    return str(run_span.attributes[semconv.RUN_ID])


def test_an_offline_raw_training_run_is_synced_once(
    prime_env: StandInPlatform, provider: TracerProvider, episodes: list[dict[str, Any]]
) -> None:
    local_id = _offline_loop(provider, episodes)
    archive = archive_of(local_id)
    assert archive.description()["kind"] == "train" and prime_env.training_runs == {}

    done = run_cli("sync", local_id)

    assert done.returncode == 0, done.stdout + done.stderr
    ((run_id, stored),) = prime_env.training_runs.items()
    assert (stored["name"], stored["max_steps"], stored["team_id"]) == ("rl-raw", 3, "team-1")
    assert sorted(r["step"] for r in prime_env.training_metrics(run_id)) == [0, 1, 2]
    assert (stored["status"], stored["finalize_count"]) == ("completed", 1)
    assert prime_env.episodes[episodes[0]["id"]]["run"]["id"] == run_id
    again = run_cli("sync", local_id)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(prime_env.training_metrics(run_id)) == 3 and len(prime_env.training_runs) == 1


def test_a_refused_register_leaves_the_run_offline_for_sync(
    prime_env: StandInPlatform, provider: TracerProvider
) -> None:
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("trainer")
    prime_env.fail("rft_register", 403)  # once: not retried, certainly not registered
    with tracer.start_as_current_span("run", attributes=TRAIN_ATTRS) as run_span:
        _steps(tracer, range(2))
    assert provider.force_flush(60_000)
    local_id = str(run_span.attributes[semconv.RUN_ID])
    description = archive_of(local_id).description()
    assert description["mode"] == "offline" and "403" in description["offline_because"]
    assert prime_env.training_runs == {}

    done = run_cli("sync", local_id)

    assert done.returncode == 0, done.stdout + done.stderr
    ((run_id, stored),) = prime_env.training_runs.items()
    assert sorted(r["step"] for r in prime_env.training_metrics(run_id)) == [0, 1]
    assert stored["finalize_count"] == 1


def test_a_training_span_the_platform_could_not_register_is_not_tracked(
    prime_env: StandInPlatform, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("trainer")
    attributes = {k: v for k, v in TRAIN_ATTRS.items() if k != semconv.RUN_TEAM_ID}
    with tracer.start_as_current_span("run", attributes=attributes) as run_span:
        _steps(tracer, range(1))
    assert semconv.RUN_ID not in (run_span.attributes or {})
    assert "needs a team" in caplog.text
    assert prime_env.requests_for("rft_register") == []

"""A training loop end to end against the stand-in: init(kind="train") registers, each
log_metrics call is one row, finish() finalizes; failures, crashes, attach, hosted runs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.platform import retry

SPEC = pr.TrainingSpec(max_steps=4, batch_size=8, rollouts_per_example=4)


def train(**kw):
    kw.setdefault("kind", "train")
    kw.setdefault("model", "Qwen/Qwen3-4B")
    kw.setdefault("environments", ["gsm8k"])
    kw.setdefault("team_id", "team-1")
    kw.setdefault("training", SPEC)
    return pr.init(**kw)


def test_a_training_loop_registers_streams_rows_and_finalizes(prime_env, episodes):
    run = train(name="rl-1", config={"lr": 1e-5})
    assert (run.kind, run.mode) == ("train", "online")
    stored = prime_env.training_runs[run.id]
    assert stored["base_model"] == "Qwen/Qwen3-4B" and stored["team_id"] == "team-1"
    assert (stored["max_steps"], stored["batch_size"], stored["rollouts_per_example"]) == (4, 8, 4)
    assert stored["environments"] == [{"id": "gsm8k"}] and stored["run_config"] == {"lr": 1e-5}
    assert run.url.endswith(f"/dashboard/training/{run.id}")
    record = dict(episodes[0], run={"work": {"type": "train", "step": 2}})
    for step in range(4):
        run.log_metrics({"loss": 1 / (step + 1), "bad": float("inf")}, step=step)
    run.log_episodes([record])
    run.finish()
    rows = prime_env.training_metrics(run.id)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]  # one row per call, in order
    assert all("bad" not in r and isinstance(r["_timestamp"], float) for r in rows)
    assert prime_env.training_runs[run.id]["status"] == "completed"
    routes = [r.route for r in prime_env.requests]
    assert routes.index("rft_finalize") > max(i for i, r in enumerate(routes) if r == "rft_metrics")
    assert "eval_create" not in routes and "samples_append" not in routes
    episode = prime_env.episodes[record["id"]]
    assert episode["run"]["id"] == run.id and episode["run"]["type"] == "train"
    assert episode["run"]["work"] == {"type": "train", "step": 2}  # the dispatch step, kept
    assert run.acknowledged_records == {"traces": 1, "train_metrics": 4}
    assert run.errors == []


def test_rows_leave_off_the_callers_thread(prime_env):
    run = train()
    prime_env.stall("rft_metrics", 5)
    started = time.monotonic()
    for step in range(20):
        run.log_metrics({"loss": 0.1}, step=step)
    assert time.monotonic() - started < 1.0  # the producer never waits for the platform
    prime_env.unstall()
    assert run.flush(30)
    assert sorted(prime_env.training_steps(run.id)) == list(range(20))
    run.finish()


def test_rows_are_journaled_and_acknowledged(prime_env):
    run = train()
    for step in range(3):
        run.log_metrics({"loss": 0.5}, step=step)
    run.finish()
    assert run.archive_path is not None
    folder = Path(run.archive_path)
    rows = next(folder.glob("train_metrics-*.jsonl")).read_text().splitlines()
    acks = next(folder.glob("train_metrics-*.acks")).read_text().split()
    assert [json.loads(r)["metrics"]["step"] for r in rows] == [0, 1, 2]
    assert sorted(int(a) for a in acks) == [0, 1, 2]


def test_a_transient_outage_pauses_and_resumes_without_loss(prime_env, monkeypatch):
    monkeypatch.setattr(retry, "RESEND_FIRST", 0.05)
    run = train()
    prime_env.fail("rft_metrics", 500)  # a plain 500 pauses a training sink too
    prime_env.outage(503, routes=["rft_metrics"])
    for step in range(5):
        run.log_metrics({"loss": 0.5}, step=step)
    time.sleep(0.5)
    prime_env.recover()
    run.finish(timeout=60)
    steps = prime_env.training_steps(run.id)
    assert sorted(steps) == [0, 1, 2, 3, 4]  # paused, not retired: nothing lost
    assert prime_env.training_runs[run.id]["status"] == "completed"


def test_a_rejected_row_is_counted_and_the_rest_go_on(prime_env):
    run = train()
    prime_env.fail("rft_metrics", 422)
    run.log_metrics({"loss": 1.0}, step=0)
    run.log_metrics({"loss": 0.5}, step=1)
    run.finish()
    assert sorted(prime_env.training_steps(run.id)) == [1]
    assert run.failed_records == {"train_metrics": 1}
    assert any("train_metrics" in e for e in run.errors)


def test_a_failed_run_is_closed_failed(prime_env):
    with pytest.raises(RuntimeError), train() as run:
        run.log_metrics({"loss": 1.0}, step=0)
        raise RuntimeError("diverged")
    stored = prime_env.training_runs[run.id]
    assert stored["status"] == "failed" and stored["error_message"] == "RuntimeError: diverged"
    assert prime_env.requests_for("rft_finalize") == []


def test_a_crash_is_closed_failed(prime_env, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "import prime_runs as pr\n"
        "run = pr.init(kind='train', model='m', team_id='t', environments=['gsm8k'],"
        " training=pr.TrainingSpec(max_steps=2))\n"
        "run.log_metrics({'loss': 1.0}, step=0)\n"
        "print(run.id, flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    run_id = done.stdout.split()[0]
    stored = prime_env.training_runs[run_id]
    assert stored["status"] == "failed"
    assert stored["error_message"].startswith("crashed: ")
    assert [r["step"] for r in prime_env.training_metrics(run_id)] == [0]


def test_attach_to_a_launcher_run(prime_env):
    prime_env.add_training_run("launched-7")
    run = train(id="launched-7", team_id=None, model=None, environments=None)
    assert run.id == "launched-7" and run.kind == "train"
    run.log_metrics({"reward": 0.25}, step=0)
    run.finish()
    assert prime_env.requests_for("rft_register") == []
    assert prime_env.training_steps("launched-7")[0]["reward"] == 0.25
    assert prime_env.training_runs["launched-7"]["status"] == "completed"


def test_a_hosted_run_through_the_internal_root(prime_env):
    prime_env.add_training_run("hosted-3", hosted=True)
    run = train(id="hosted-3", base_url=prime_env.base_url + "/api/internal/rft")
    run.log_metrics({"reward": 0.5}, step=0)
    run.finish()
    (row,) = prime_env.requests_for("internal_rft_metrics")
    assert row.headers["x-api-key"] == prime_env.api_key
    assert prime_env.training_runs["hosted-3"]["status"] == "completed"
    assert prime_env.requests_for("rft_metrics") == []


def test_registration_errors_propagate(prime_env):
    prime_env.train_teams = ["other"]
    with pytest.raises(pr.ForbiddenError):
        train()
    with pytest.raises(pr.ConfigurationError, match="team"):
        train(team_id=None)
    with pytest.raises(pr.ConfigurationError, match="kind="):
        pr.init(kind="pretrain")
    with pytest.raises(pr.ConfigurationError, match="TrainingSpec"):
        pr.init(kind="train", training={"max_steps": 3})
    assert prime_env.training_runs == {}


def test_bad_metrics_input_is_a_typed_error(prime_env):
    strict = train(on_error="raise")
    with pytest.raises(pr.RecordError, match="mapping"):
        strict.log_metrics([1, 2])
    with pytest.raises(pr.RecordError, match="not JSON"):
        strict.log_metrics({"loss": object()})
    with pytest.raises(ValueError, match="step"):
        strict.log_metrics({"loss": 1.0}, step=-1)
    strict.finish()
    with pytest.raises(pr.RunFinishedError):
        strict.log_metrics({"loss": 1.0}, step=9)
    run = train()  # on_error="warn": reported and counted, never raised
    run.log_metrics([1, 2])
    run.log_metrics({"loss": 1.0}, step=0)
    run.log_metrics({"loss": 2.0, "blob": object()}, step=1)  # refused whole, not half sent
    run.finish()
    run.log_metrics({"loss": 1.0}, step=9)
    assert run.dropped_records == 3  # two refused as bad input, one logged after finish()
    assert any("metrics must be a mapping" in e for e in run.errors)
    assert any("metrics are not JSON" in e for e in run.errors)
    assert sorted(prime_env.training_steps(run.id)) == [0]
    (journal,) = Path(str(run.archive_path)).glob("train_metrics-*.jsonl")
    assert [json.loads(line)["metrics"]["step"] for line in journal.read_text().splitlines()] == [0]


class Scalar:
    """An array library's scalar (numpy, torch): ``item()`` is its number."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


def test_scalars_become_numbers_and_non_finite_values_are_dropped(prime_env):
    run = train()
    values = {
        "loss": Scalar(0.5),
        "nan": Scalar(float("nan")),
        "nested": {"a": float("inf"), "b": 1},
    }
    run.log_metrics(values, step=0)
    run.finish()
    (row,) = prime_env.training_metrics(run.id)
    assert row["loss"] == 0.5 and "nan" not in row and row["nested"] == {"b": 1}
    assert isinstance(values["loss"], Scalar)  # the caller's mapping is untouched


def test_disabled_and_eval_runs_accept_log_metrics(prime_env):
    disabled = pr.init(kind="train", mode="disabled", training=SPEC)
    disabled.log_metrics({"loss": 1.0}, step=0)
    assert disabled.kind == "train"
    disabled.finish()
    evaluation = pr.init(environments=["gsm8k"])
    evaluation.log_metrics({"loss": 1.0}, step=0)
    evaluation.finish()
    assert prime_env.requests_for("rft_metrics") == []


def test_log_metrics_from_many_threads(prime_env):
    run = train()

    def log(base: int) -> None:
        for i in range(25):
            run.log_metrics({"loss": 0.1}, step=base + i)

    threads = [threading.Thread(target=log, args=(k * 25,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.finish()
    assert sorted(prime_env.training_steps(run.id)) == list(range(100))
    assert len(prime_env.training_metrics(run.id)) == 100  # no duplicates


def test_step_spans_and_events_are_metrics_rows(prime_env):
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()  # the application's own provider
    run = train(tracer_provider=provider)
    tracer = provider.get_tracer("trainer")
    with run:
        for step in range(3):
            attributes = {"prime.train.step": step, "prime.train.metrics.loss": 1.0 / (step + 1)}
            with tracer.start_as_current_span("step", attributes=attributes):
                pass
        with tracer.start_as_current_span("rollouts") as span:
            span.add_event("step", {"prime.train.step": 3, "prime.train.metrics.reward": 0.5})
        with tracer.start_as_current_span("step", attributes={"other": 1}):
            pass  # no prime.train.step: not a row
    steps = prime_env.training_steps(run.id)
    assert sorted(steps) == [0, 1, 2, 3]
    assert steps[1]["loss"] == 0.5 and steps[3]["reward"] == 0.5
    assert len(prime_env.training_metrics(run.id)) == 4

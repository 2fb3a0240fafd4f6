"""``init()`` under a slow platform (issue 32): it waits at most ``register_timeout`` (15 s by
default, ``PRIME_RUNS_REGISTER_TIMEOUT``) for the platform to register the run, then goes on
under a local id, says so, and registers when the platform answers: the records logged
meanwhile reach the run stamped with the platform's id, and ``finish()`` closes it. Before,
``init()`` waited as long as the create took (60.4 s for a 60 s stall).

Real components: the stand-in over HTTP with stalled and failing routes, the CLI and a
producer killed mid-registration as processes of their own.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest

import prime_runs as pr
from _otel import archive_of
from _support import load_jsonl, run_cli, run_script
from prime_runs import settings
from prime_runs.testing import StandInPlatform

REGISTER_TIMEOUT_ENV = "PRIME_RUNS_REGISTER_TIMEOUT"
MARGIN = 3.0  # seconds over the bound: init()'s own work on a loaded machine
SPEC = pr.TrainingSpec(max_steps=4, batch_size=8, rollouts_per_example=4)


def _late_init(platform: StandInPlatform, bound: float | None, **init: object) -> tuple:
    """``init()`` with the create stalled; the run and how long init() took."""
    platform.stall("eval_create", 60)  # until unstall()
    started = time.monotonic()
    run = pr.init(name="late", environments=["gsm8k"], register_timeout=bound, **init)
    return run, time.monotonic() - started


def test_init_returns_within_its_bound_and_the_run_registers_once_the_platform_answers(
    prime_env: StandInPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    episodes = load_jsonl("episodes.jsonl")
    try:
        with caplog.at_level(logging.WARNING, logger="prime_runs"):
            run, took = _late_init(prime_env, 1.0)
        local_id = run.id
        assert 1.0 <= took < 1.0 + MARGIN, took
        assert (local_id.startswith("run-"), run.url, run.mode) == (True, None, "online")
        (warning,) = [
            r.getMessage() for r in caplog.records if "register_timeout" in r.getMessage()
        ]
        assert "after 1 s" in warning and local_id in warning
        assert "kept and sent" in warning and "once it is" in warning
        run.log_episodes(episodes)  # before the evaluation exists
        assert prime_env.evaluations == {}
    finally:
        prime_env.unstall()
    assert run.flush(timeout=30)  # waits for the registration, then the uploads
    (eval_id,) = prime_env.evaluations
    assert run.id == eval_id and str(run.url).endswith(f"/dashboard/evaluations/{eval_id}")
    # Every record logged before the evaluation existed was stored once, under its id.
    assert {doc["run"]["id"] for doc in prime_env.traces.values()} == {eval_id}
    assert set(prime_env.episode_writes.values()) == {1}
    assert len(prime_env.samples(eval_id)) == len(episodes)

    run.finish()
    assert prime_env.evaluations[eval_id]["finalize_count"] == 1
    archive = archive_of(local_id)
    assert (archive.status()["status"], archive.status()["closed"]) == ("completed", True)
    assert archive.description()["platform"]["id"] == eval_id  # what sync would use
    assert json.loads((archive.path / "sync.json").read_text())["platform"]["id"] == eval_id
    assert run.errors == []


def test_a_healthy_platform_registers_within_the_bound_as_before(
    prime_env: StandInPlatform,
) -> None:
    run = pr.init(name="healthy", environments=["gsm8k"], register_timeout=30)
    assert run.id in prime_env.evaluations and run.url is not None
    assert Path(str(run.archive_path)).name == run.id  # named by the evaluation, as before
    assert not (Path(str(run.archive_path)) / "sync.json").exists()
    run.finish()


def test_the_bound_comes_from_the_environment_and_bad_values_are_refused(
    prime_env: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings.register_timeout(None) == settings.DEFAULT_REGISTER_TIMEOUT == 15.0
    assert settings.REGISTER_TIMEOUT_ENV == REGISTER_TIMEOUT_ENV
    monkeypatch.setenv(REGISTER_TIMEOUT_ENV, "0.5")
    try:
        run, took = _late_init(prime_env, None)
        assert took < 0.5 + MARGIN and run.id.startswith("run-")
    finally:
        prime_env.unstall()
    run.finish(timeout=30)
    assert run.id in prime_env.evaluations
    assert prime_env.evaluations[run.id]["finalize_count"] == 1

    monkeypatch.setenv(REGISTER_TIMEOUT_ENV, "soon")
    with pytest.raises(pr.ConfigurationError, match=f"{REGISTER_TIMEOUT_ENV}= 'soon'"):
        pr.init(name="bad", environments=["gsm8k"])
    with pytest.raises(pr.ConfigurationError, match=REGISTER_TIMEOUT_ENV):
        pr.init(kind="train", model="m", environments=["gsm8k"], team_id="t", training=SPEC)
    monkeypatch.delenv(REGISTER_TIMEOUT_ENV)
    for bad in (float("nan"), -1, "15", True):
        with pytest.raises(pr.ConfigurationError, match="register_timeout="):
            pr.init(name="bad", environments=["gsm8k"], register_timeout=bad)  # type: ignore[arg-type]
    pr.init(name="good", environments=["gsm8k"]).finish()
    # Refused before any request: only the two good runs resolved their environment.
    assert len(prime_env.requests_for("env_resolve")) == 2
    assert len(prime_env.evaluations) == 2 and prime_env.training_runs == {}


def test_a_registration_refused_after_the_bound_leaves_the_run_offline(
    prime_env: StandInPlatform,
) -> None:
    prime_env.fail("eval_create", 401, delay=1.5)  # refused, after the bound
    run = pr.init(name="refused", environments=["gsm8k"], register_timeout=0.5, on_error="raise")
    run.log_episodes(load_jsonl("episodes.jsonl")[:2])
    with pytest.raises(pr.UnauthorizedError):  # raised where the caller is, once init returned
        run.flush(timeout=30)
    assert run.mode == "offline" and run.id.startswith("run-")
    assert any("could not register the run" in e for e in run.errors)
    run.finish()
    archive = archive_of(run.id)
    assert archive.description()["mode"] == "offline"  # `prime-runs sync` uploads it
    assert prime_env.evaluations == {}


def test_finish_before_the_platform_answers_leaves_the_run_to_sync(
    prime_env: StandInPlatform,
) -> None:
    episodes = load_jsonl("episodes.jsonl")
    try:
        run, _ = _late_init(prime_env, 0.5)
        run.log_episodes(episodes)
        started = time.monotonic()
        run.finish(timeout=3)
        assert time.monotonic() - started < 3 + MARGIN
        assert any(
            "not registered on the platform before the finish deadline" in e for e in run.errors
        )
    finally:
        prime_env.unstall()  # the create lands now, after finish() stopped waiting for it
    local_id = run.id
    done = run_cli("sync", local_id)
    assert done.returncode == 0, done.stdout + done.stderr
    (eval_id,) = prime_env.evaluations  # the create that landed late, not a second one
    assert prime_env.evaluations[eval_id]["finalize_count"] == 1
    assert {doc["run"]["id"] for doc in prime_env.traces.values()} == {eval_id}
    assert len(prime_env.samples(eval_id)) == len(episodes)


PRODUCER = """
import os, sys
import prime_runs as pr
run = pr.init(name="killed", environments=["gsm8k"], config={"lr": 0.1}, register_timeout=0.5)
run.log_episodes({"id": "ep-1", "env": {"id": "gsm8k"},
                  "traces": [{"id": "tr-1", "timing": {"start": 1.0}}]})
print(run.id, flush=True)
os._exit(0)  # killed before the platform answered
"""


def test_a_producer_killed_before_the_platform_answered_is_registered_once_by_sync(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.stall("eval_create", 60)
    try:
        done = run_script(tmp_path, PRODUCER)
        assert done.returncode == 0, done.stderr
        local_id = done.stdout.split()[-1]
    finally:
        prime_env.unstall()  # the create the producer sent is served now
    until = time.monotonic() + 20
    while not prime_env.evaluations and time.monotonic() < until:
        time.sleep(0.05)  # the stand-in serves the stalled create once released
    assert len(prime_env.evaluations) == 1
    synced = run_cli("sync", local_id)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    (eval_id,) = prime_env.evaluations  # sync found that one: no second evaluation
    assert prime_env.episodes["ep-1"]["run"]["id"] == eval_id
    assert prime_env.evaluations[eval_id]["status"] == "FAILED"  # it crashed


def test_a_training_run_is_bounded_the_same_way(prime_env: StandInPlatform) -> None:
    episodes = load_jsonl("episodes.jsonl")
    prime_env.stall("rft_register", 60)
    try:
        started = time.monotonic()
        run = pr.init(
            kind="train",
            name="late-rl",
            model="Qwen/Qwen3-4B",
            environments=["gsm8k"],
            team_id="team-1",
            training=SPEC,
            register_timeout=1,
        )
        took = time.monotonic() - started
        local_id = run.id
        for step in range(3):
            run.log_metrics({"loss": 1 / (step + 1)}, step=step)
        run.log_episodes(episodes[:2])
        assert prime_env.training_runs == {}
    finally:
        prime_env.unstall()
    assert 1 <= took < 1 + MARGIN, took
    assert local_id.startswith("run-") and run.kind == "train"
    assert run.flush(timeout=30)
    (run_id,) = prime_env.training_runs
    assert run.id == run_id and run.url is not None
    run.finish()
    assert [r["step"] for r in prime_env.training_metrics(run_id)] == [0, 1, 2]
    assert {prime_env.episodes[e["id"]]["run"]["id"] for e in episodes[:2]} == {run_id}
    assert prime_env.training_runs[run_id]["status"] == "completed"
    assert archive_of(local_id).status()["closed"] is True


def test_a_training_run_refused_after_the_bound_is_left_for_sync_to_register(
    prime_env: StandInPlatform,
) -> None:
    prime_env.fail("rft_register", 403, delay=1.5)  # certainly not registered, after the bound
    run = pr.init(
        kind="train",
        name="refused-rl",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=SPEC,
        register_timeout=0.5,
    )
    run.log_metrics({"loss": 0.5}, step=0)
    run.flush(timeout=30)
    assert run.mode == "offline" and any("ForbiddenError" in e for e in run.errors)
    run.finish()
    done = run_cli("sync", run.id)  # no intent left to stop it: the platform now accepts
    assert done.returncode == 0, done.stdout + done.stderr
    (run_id,) = prime_env.training_runs
    assert [r["step"] for r in prime_env.training_metrics(run_id)] == [0]


def test_run_context_waits_for_a_registration_under_way(prime_env: StandInPlatform) -> None:
    try:
        run, _ = _late_init(prime_env, 0.5)
        carriers: list[dict[str, str]] = []
        waiting = threading.Thread(target=lambda: carriers.append(run.context()))
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive()  # a carrier must name the platform's id: not there yet
    finally:
        prime_env.unstall()
    waiting.join(30)
    (eval_id,) = prime_env.evaluations
    assert f"prime.run.id={eval_id}" in carriers[0]["baggage"]
    run.finish()

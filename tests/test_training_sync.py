"""`prime-runs sync` for training runs, as a real process against the stand-in: an offline
run is registered once, its metrics rows and episodes sent once, and it is finalized; a
crashed online run's unsent rows go and it is closed as crashed; a second sync sends
nothing; an earlier registration that may have landed is never made twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import _archives
import prime_runs as pr
from prime_runs.testing import StandInPlatform

RFT_ROUTES = ("rft_register", "rft_metrics", "rft_finalize", "rft_status")


def _sync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "sync", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _counts(platform: StandInPlatform) -> dict[str, int]:
    return {route: len(platform.requests_for(route)) for route in RFT_ROUTES}


def _offline_training_run(episodes: list[dict], **finish: object) -> pr.Run:
    run = pr.init(
        kind="train",
        name="rl-offline",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        config={"lr": 1e-5},
        training=pr.TrainingSpec(max_steps=3, batch_size=8),
        mode="offline",
    )
    for step in range(3):
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    run.log_episodes(episodes[:2])
    run.finish(**finish)  # type: ignore[arg-type]
    return run


def test_an_offline_training_run_is_registered_sent_and_finalized_once(
    prime_env: StandInPlatform, episodes: list[dict]
) -> None:
    run = _offline_training_run(episodes)
    assert run.mode == "offline" and prime_env.training_runs == {}

    result = _sync()

    assert result.returncode == 0, result.stdout + result.stderr
    ((run_id, stored),) = prime_env.training_runs.items()
    assert f"{run.id}: ok: {run_id}" in result.stdout
    assert (stored["base_model"], stored["team_id"], stored["max_steps"]) == (
        "Qwen/Qwen3-4B",
        "team-1",
        3,
    )
    assert stored["name"] == "rl-offline" and stored["run_config"] == {"lr": 1e-5}
    assert stored["status"] == "completed" and stored["finalize_count"] == 1
    rows = prime_env.training_metrics(run_id)  # replays kept: a resend would show
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[2]["loss"] == 1 / 3
    for record in episodes[:2]:
        stamped = prime_env.episodes[record["id"]]["run"]
        assert (stamped["id"], stamped["type"]) == (run_id, "train")
    assert "eval_create" not in [r.route for r in prime_env.requests]
    archive = _archives.Archive(Path(str(run.archive_path)))
    assert archive.description()["platform"]["id"] == run_id
    assert archive.status()["closed"] is True

    before = _counts(prime_env), dict(prime_env.episode_writes)
    again = _sync(run.id)  # named explicitly: looked at, nothing sent
    assert again.returncode == 0, again.stdout + again.stderr
    assert (_counts(prime_env), dict(prime_env.episode_writes)) == before
    assert _sync().returncode == 0
    assert (_counts(prime_env), dict(prime_env.episode_writes)) == before


def test_a_failed_offline_run_gets_its_status(prime_env: StandInPlatform, episodes) -> None:
    _offline_training_run(episodes, status="failed", error="diverged")
    result = _sync()
    assert result.returncode == 0, result.stdout + result.stderr
    ((run_id, stored),) = prime_env.training_runs.items()
    assert stored["status"] == "failed" and "diverged" in (stored["error_message"] or "")
    assert stored["finalize_count"] == 0
    assert len(prime_env.training_metrics(run_id)) == 3


CRASHING = r"""
import os, sys
import prime_runs as pr
run = pr.init(kind="train", model="m", team_id="t", environments=["gsm8k"],
              training=pr.TrainingSpec(max_steps=4))
for step in range(4):
    run.log_metrics({"loss": float(step)}, step=step)
run.flush(2)  # the platform refuses every row meanwhile: nothing lands
print(run.id, run.archive_path, flush=True)
os._exit(1)  # killed: no finish, no close
"""


def test_a_crashed_online_run_sends_its_rows_and_is_closed_as_crashed(
    prime_env: StandInPlatform,
) -> None:
    prime_env.outage(503, routes=["rft_metrics"])
    child = subprocess.run(
        [sys.executable, "-c", CRASHING], capture_output=True, text=True, timeout=120
    )
    run_id, folder = child.stdout.split()
    prime_env.recover()
    assert prime_env.training_metrics(run_id) == []

    result = _sync()

    assert result.returncode == 0, result.stdout + result.stderr
    assert len(prime_env.requests_for("rft_register")) == 1  # the child's; none by sync
    assert Counter(r["step"] for r in prime_env.training_metrics(run_id)) == {
        0: 1,
        1: 1,
        2: 1,
        3: 1,
    }
    stored = prime_env.training_runs[run_id]
    assert stored["status"] == "failed" and stored["error_message"].startswith("crashed:")
    (journal,) = Path(folder).glob("train_metrics-*.jsonl")
    acks = journal.with_suffix(".acks").read_text().split()
    assert sorted(map(int, acks)) == [0, 1, 2, 3]


def test_an_earlier_registration_that_may_have_landed_is_not_made_again(
    prime_env: StandInPlatform, episodes: list[dict]
) -> None:
    run = _offline_training_run(episodes)
    archive = _archives.Archive(Path(str(run.archive_path)))
    archive.write_sync_state({"intent": {"at": "2026-01-01T00:00:00+00:00"}})

    result = _sync()

    assert result.returncode != 0
    assert "may have registered" in result.stdout + result.stderr
    assert prime_env.requests_for("rft_register") == []
    # The user says it did not land: the next sync registers it.
    state = archive.sync_state()
    state.pop("intent")
    archive.write_sync_state(state)
    assert _sync().returncode == 0
    assert len(prime_env.requests_for("rft_register")) == 1


def test_ls_counts_a_training_runs_pending_rows(prime_env: StandInPlatform, episodes) -> None:
    run = _offline_training_run(episodes)
    listing = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "show", run.id],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert "3 metrics rows" in listing.stdout, listing.stdout
    assert json.dumps(run.id)  # the run id is a plain string

"""Records that reach a run after its evaluation was finalized are stored, counted and said
(the worker's errors, `prime-runs sync`), and the evaluation's metrics are brought up to
date; sync says what it uploaded apart from what it found already stored. Workers are
processes of their own against the stand-in over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import prime_runs as pr
from _workers import WORKER, cli, episode, run_worker
from prime_runs.testing import StandInPlatform


def worker(env: dict[str, str], carrier: dict[str, str], tag: str, rewards: list[float]) -> list:
    return run_worker(carrier, tag, rewards, env=env)


def test_a_worker_that_lands_after_finalize_says_so_and_fixes_the_numbers(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="early-finish", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0) for i in range(3)])
    carrier = owner.context()
    owner.finish()  # the driver did not wait for its actor
    evaluation = prime_env.evaluations[owner.id]
    assert evaluation["metrics"]["avg_reward"] == 1.0

    env = {**os.environ, "PRIME_RUNS_DIR": str(tmp_path / "node")}
    errors = worker(env, carrier, "late", [0.0] * 5)

    (message,) = errors
    assert f"5 records reached run {owner.id} after it was finalized" in message
    assert "covered 3 of 8" in message and "brought up to date" in message
    assert len(prime_env.samples(owner.id)) == 8  # stored, not refused
    metrics = prime_env.evaluations[owner.id]["metrics"]
    assert metrics["avg_reward"] == 3 / 8
    assert metrics["prime_runs"]["records_summarized"] == 8
    assert evaluation["finalize_count"] == 1


def test_a_worker_that_lands_in_time_says_nothing(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="in-time", environments=["gsm8k"])
    env = {**os.environ, "PRIME_RUNS_DIR": str(tmp_path / "node")}
    assert worker(env, owner.context(), "w", [1.0, 0.0]) == []
    owner.finish()
    assert prime_env.evaluations[owner.id]["metrics"]["avg_reward"] == 0.5


def test_sync_of_a_node_local_archive_after_finalize_reports_late_records(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="synced-late", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0) for i in range(2)])
    carrier = owner.context()
    # A node without an API key: its records wait in its own archive for sync.
    node = tmp_path / "node"
    keyless = {k: v for k, v in os.environ.items() if k != "PRIME_API_KEY"}
    worker({**keyless, "PRIME_RUNS_DIR": str(node)}, carrier, "node", [0.0, 0.0])
    owner.finish()
    assert prime_env.evaluations[owner.id]["metrics"]["avg_reward"] == 1.0

    env = {**os.environ, "PRIME_RUNS_DIR": str(node)}
    first = cli(env, "sync")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "uploaded 2 traces, 2 samples" in first.stdout
    assert f"2 records reached run {owner.id} after it was finalized" in first.stdout
    assert prime_env.evaluations[owner.id]["metrics"]["avg_reward"] == 0.5
    assert len(prime_env.samples(owner.id)) == 4


def test_sync_of_a_delivered_node_folder_says_the_numbers_missed_it(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="killed-actor", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0) for i in range(2)])
    carrier = owner.context()
    owner.finish()
    # An actor that delivered its records after the finalize and was killed before its
    # join ended: nothing was said yet.
    killed = (
        WORKER.replace("print(json.dumps(run.errors))", "").replace(
            "with pr.init(join=carrier) as run:", "if True:\n    run = pr.init(join=carrier)"
        )
        + "\nrun.flush()\nimport os; os._exit(0)\n"
    )
    node = tmp_path / "node"
    env = {**os.environ, "PRIME_RUNS_DIR": str(node)}
    shard = json.dumps([episode("actor", i, 0.0) for i in range(2)])
    proc = subprocess.run(
        [sys.executable, "-c", killed, json.dumps(carrier), shard],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    assert prime_env.evaluations[owner.id]["metrics"]["avg_reward"] == 1.0  # stale

    synced = cli(env, "sync", owner.id)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "nothing to upload" in synced.stdout
    assert f"2 records reached run {owner.id} after it was finalized" in synced.stdout
    assert prime_env.evaluations[owner.id]["metrics"]["avg_reward"] == 0.5


def test_late_records_leave_an_explicit_summary_alone_and_say_so(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="explicit", environments=["gsm8k"])
    carrier = owner.context()
    owner.finish(summary={"avg_reward": 0.9})
    env = {**os.environ, "PRIME_RUNS_DIR": str(tmp_path / "node")}
    (message,) = worker(env, carrier, "late", [0.0])
    assert "was already processing on the platform" in message
    assert "left as they are" in message
    assert prime_env.evaluations[owner.id]["metrics"]["avg_reward"] == 0.9
    assert len(prime_env.samples(owner.id)) == 1

"""A task re-run after a crash logs the same record ids: on the same host and archive
root, the retry does not send what the crashed attempt already stored (the record id is
the idempotency key). Attempts are processes of their own; the stand-in is real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import prime_runs as pr
from prime_runs.testing import StandInPlatform

ATTEMPT = r"""
import json, os, sys
import prime_runs as pr

carrier, crash = json.loads(sys.argv[1]), sys.argv[2] == "crash"
with pr.init(join=carrier) as run:
    for i in range(10):
        if crash and i == 6:
            run.flush()
            os._exit(1)  # killed mid-task, after six records were stored
        run.log_episodes({"id": f"ep-task-{i}", "env": {"id": "gsm8k"}, "ok": True,
                          "errors": [], "traces": [{"id": f"tr-task-{i}",
                          "rewards": {"correct": {"score": float(i % 2)}},
                          "timing": {"start": 1.0}}]})
print(json.dumps(run.errors))
"""


def attempt(run: pr.Run, root: Path, crash: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ATTEMPT, json.dumps(run.context()), "crash" if crash else "ok"],
        env={**os.environ, "PRIME_RUNS_DIR": str(root)},
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_a_retry_on_the_same_host_does_not_resend(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = pr.init(name="retried", environments=["gsm8k"], join=False)
    node = tmp_path / "node"
    assert attempt(run, node, crash=True).returncode == 1
    assert len(prime_env.samples(run.id)) == 6
    retry = attempt(run, node, crash=False)
    assert retry.returncode == 0, retry.stderr
    (said,) = json.loads(retry.stdout.splitlines()[-1])
    assert said.startswith("6 records logged into run") and "earlier attempt" in said
    run.finish()
    rows = Counter(row["sample_id"] for row in prime_env.samples(run.id))
    assert rows == Counter({f"ep-task-{i}": 1 for i in range(10)})
    assert {prime_env.episode_writes[f"ep-task-{i}"] for i in range(10)} == {1}
    assert prime_env.evaluations[run.id]["metrics"]["avg_reward"] == 0.5


def test_a_retry_on_another_host_is_counted_once_in_the_numbers(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = pr.init(name="moved", environments=["gsm8k"], join=False)
    assert attempt(run, tmp_path / "node-a", crash=True).returncode == 1
    assert attempt(run, tmp_path / "node-b", crash=False).returncode == 0
    run.finish()
    # The sample table appends (docs/distributed.md#retries); the numbers count ids once.
    rows = Counter(row["sample_id"] for row in prime_env.samples(run.id))
    assert sum(rows.values()) == 16 and set(rows) == {f"ep-task-{i}" for i in range(10)}
    metrics = prime_env.evaluations[run.id]["metrics"]
    assert metrics["avg_reward"] == 0.5
    assert metrics["prime_runs"]["records_summarized"] == 10

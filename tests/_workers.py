"""Workers of a distributed run, for the tests: the episodes they log and a worker process
that joins the run through its carrier, logs them and leaves (as a Ray task would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _support import run_cli

# The episodes come in as JSON, so the worker logs exactly what the test built.
WORKER = r"""
import json, sys
import prime_runs as pr

carrier, episodes = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with pr.init(join=carrier) as run:
    run.log_episodes(episodes)
print(json.dumps(run.errors))
"""


def episode(tag: str, i: int, reward: float, *, length: bool = False) -> dict[str, Any]:
    """A small verifiers-shaped episode with one trace of ``reward`` (and a ``len`` metric
    of twice the reward when ``length``)."""
    trace: dict[str, Any] = {
        "id": f"tr-{tag}-{i}",
        "rewards": {"correct": {"score": reward}},
        "timing": {"start": 1.0},
    }
    if length:
        trace["metrics"] = {"len": 2 * reward}
    return {
        "id": f"ep-{tag}-{i}",
        "env": {"id": "gsm8k"},
        "ok": True,
        "errors": [],
        "traces": [trace],
    }


def run_worker(
    carrier: dict[str, str],
    tag: str,
    rewards: list[float],
    *,
    env: dict[str, str] | None = None,
    root: Path | None = None,
    length: bool = False,
) -> list[str]:
    """Run a worker process on the run; ``root`` is its own archive root (another disk or
    host). Returns the worker's ``run.errors``."""
    env = dict(os.environ if env is None else env)
    if root is not None:
        env["PRIME_RUNS_DIR"] = str(root)
    episodes = [episode(tag, i, r, length=length) for i, r in enumerate(rewards)]
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps(carrier), json.dumps(episodes)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``prime-runs`` as a user runs it, in a process of its own, with ``env``."""
    return run_cli(*args, env=env)

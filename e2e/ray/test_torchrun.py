"""A torchrun-style launch against the stand-in: a launcher owns the run and starts ranks
as processes of their own with RANK/WORLD_SIZE/LOCAL_RANK and the run's carrier in their
environment, each rank journaling on a disk of its own (examples/torchrun_ranks.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import prime_runs as pr
from conftest import HERE, check_run
from prime_runs.testing import StandInPlatform

EXAMPLE = HERE.parents[1] / "examples" / "torchrun_ranks.py"
WORLD, PER_RANK = 4, 5


def test_ranks_join_from_their_own_disks(platform: StandInPlatform, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEPARENT", "BAGGAGE")}
    env.update(platform.env())
    run = pr.init(
        name="torchrun-style",
        environments=["gsm8k"],
        dir=tmp_path / "launcher",
        join=False,
        api_key=platform.api_key,
        base_url=platform.base_url,
    )
    base = {**env, **run.context(env=True), "WORLD_SIZE": str(WORLD)}
    ranks = [
        subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--rank"],
            env={
                **base,
                "RANK": str(r),
                "LOCAL_RANK": str(r),
                "PRIME_RUNS_DIR": str(tmp_path / f"node-{r}"),
            },
        )
        for r in range(WORLD)
    ]
    assert [p.wait(timeout=120) for p in ranks] == [0] * WORLD
    run.finish()
    truth = {f"ep-rank{r}-{i}": float((r + i) % 2) for r in range(WORLD) for i in range(PER_RANK)}
    check_run(platform, run.id, truth)
    for r in range(WORLD):  # each rank journaled on its own disk
        assert (tmp_path / f"node-{r}" / run.id).is_dir()

"""``with pr.join(carrier) as run:``: a worker joins for a block of work and leaves cleanly;
records go to the right run from threads and asyncio tasks serving two runs at once, and
sixty joins cost what one does. Workers are processes of their own; the platform is the
stand-in over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.testing import StandInPlatform

WORKER = r"""
import asyncio, json, os, sys, threading
import prime_runs as pr

a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])

def ep(tag):
    return {"id": f"ep-{tag}", "env": {"id": "gsm8k"},
            "traces": [{"id": f"tr-{tag}", "timing": {"start": 1.0}}]}

def usage():
    return threading.active_count(), len(os.listdir("/proc/self/fd"))

# Sixty joins of one run, one per "task", each left through `with`.
for i in range(60):
    with pr.join(a) as run:
        run.log_episodes(ep(f"a-loop-{i}"))
    if i == 0:
        first = usage()
last = usage()

# A threaded actor serving two runs at once: both joins open together, each thread logs
# through the module-level pr.log_episodes() inside its own block.
both = threading.Barrier(2)
def serve(carrier, tag):
    with pr.join(carrier):
        both.wait(timeout=30)
        for i in range(20):
            pr.log_episodes(ep(f"{tag}-thread-{i}"))
        both.wait(timeout=30)
threads = [threading.Thread(target=serve, args=(c, t)) for c, t in ((a, "a"), (b, "b"))]
for t in threads: t.start()
for t in threads: t.join()

# An async actor: two tasks, two runs, interleaved at every await.
async def task(carrier, tag):
    with pr.join(carrier) as run:
        for i in range(10):
            pr.log_episodes(ep(f"{tag}-task-{i}"))
            await asyncio.sleep(0)
            run.log_episodes(ep(f"{tag}-own-{i}"))
            await asyncio.sleep(0)
async def main():
    await asyncio.gather(task(a, "a"), task(b, "b"))
asyncio.run(main())
print(json.dumps({"first": first, "last": last, "after": usage()}))
"""


def test_join_blocks_route_and_release(prime_env: StandInPlatform) -> None:
    run_a = pr.init(name="a", environments=["gsm8k"], join=False)
    run_b = pr.init(name="b", environments=["gsm8k"], join=False)
    args = [json.dumps(run_a.context()), json.dumps(run_b.context())]
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "none is in the current" not in proc.stderr  # no record guessed its run
    usage = json.loads(proc.stdout.splitlines()[-1])
    # Sixty joins: no more threads or descriptors than the first left.
    assert usage["last"][0] <= usage["first"][0]
    assert usage["last"][1] <= usage["first"][1] + 1
    run_a.finish()
    run_b.finish()

    def ids(run: pr.Run) -> set[str]:
        return {row["sample_id"] for row in prime_env.samples(run.id)}

    loop = {f"ep-a-loop-{i}" for i in range(60)}
    for run, tag in ((run_a, "a"), (run_b, "b")):
        expected = {f"ep-{tag}-thread-{i}" for i in range(20)}
        expected |= {f"ep-{tag}-{kind}-{i}" for kind in ("task", "own") for i in range(10)}
        if tag == "a":
            expected |= loop
        assert ids(run) == expected
        assert len(prime_env.samples(run.id)) == len(expected)  # each once
        assert prime_env.evaluations[run.id]["finalize_count"] == 1
    assert len(prime_env.requests_for("eval_create")) == 2


def test_join_needs_something_to_join(isolated_env: object) -> None:
    with pytest.raises(pr.ConfigurationError, match="no run to join"):
        pr.join()
    with pytest.raises(pr.ConfigurationError, match=r"carrier from run\.context"):
        pr.join({"traceparent": "nonsense"})
    with pr.join({}) as run:  # the owner's run is disabled: nothing is recorded
        run.log_episodes({"id": "ep-x", "traces": []})
        assert run.mode == "disabled"


def test_leaving_the_block_drains_and_never_closes_the_run(isolated_env: object) -> None:
    owner = pr.init(name="owner")
    with pr.join(owner.context()) as worker:
        worker.log_episodes({"id": "ep-w", "traces": [{"id": "tr-w", "timing": {"start": 1.0}}]})
    assert worker.finished
    assert not owner.finished and owner.status == pr.RunStatus.RUNNING
    owner.finish()


def test_torchrun_style_example_covers_every_rank(isolated_env: object) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "torchrun_ranks.py"
    proc = subprocess.run(
        [sys.executable, str(example), "--stand-in"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "20 episodes stored" in proc.stdout
    assert "avg_reward 0.5 over {'traces_episodes_written': 20, 'records_summarized': 20}" in (
        proc.stdout
    )

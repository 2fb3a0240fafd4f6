"""A torchrun-style launch: a launcher owns the run, N ranks join it, each from its own disk.

The launcher starts the run, starts the ranks with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``
(what ``torchrun`` sets) plus ``run.context(env=True)`` in their environment, waits for
them, and finishes the run. Each rank joins with ``pr.join()`` for its block of work and
journals into an archive root of its own (``PRIME_RUNS_DIR``, as a node-local disk would
be). The finalized numbers still cover every rank: at ``finish()`` the launcher reads back
what the platform stored for the evaluation.

    python examples/torchrun_ranks.py --stand-in       # against a local stand-in platform
    PRIME_API_KEY=... python examples/torchrun_ranks.py

With ``torchrun`` itself: start the run in the launcher as here, then
``subprocess.run(["torchrun", "--nproc-per-node", "4", "rank.py"], env=env)``, with
``rank()`` below as rank.py's body.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import prime_runs as pr

WORLD_SIZE = 4
PER_RANK = 5


def episode(rank: int, i: int) -> dict[str, object]:
    reward = float((rank + i) % 2)  # half the episodes score 1.0: the true mean is 0.5
    return {
        "id": f"ep-rank{rank}-{i}",
        "env": {"id": "gsm8k"},
        "ok": True,
        "errors": [],
        "traces": [
            {
                "id": f"tr-rank{rank}-{i}",
                "rewards": {"correct": {"score": reward, "weight": 1.0}},
                "timing": {"start": time.time()},
            }
        ],
    }


def rank() -> None:
    """One rank: join through TRACEPARENT/BAGGAGE, log its shard, leave (never finish the
    run: the launcher does)."""
    me = int(os.environ["RANK"])
    with pr.join() as run:
        run.log_episodes([episode(me, i) for i in range(PER_RANK)])
    # Leaving the block drained this rank's uploads; anything unsent is in its journal.


def launch(extra_env: dict[str, str]) -> pr.Run:
    run = pr.init(name="torchrun-eval", environments=["gsm8k"], join=False)
    base = {**os.environ, **extra_env, **run.context(env=True), "WORLD_SIZE": str(WORLD_SIZE)}
    with tempfile.TemporaryDirectory() as disks:
        ranks = [
            subprocess.Popen(
                [sys.executable, __file__, "--rank"],
                env={
                    **base,
                    "RANK": str(r),
                    "LOCAL_RANK": str(r),
                    "PRIME_RUNS_DIR": os.path.join(disks, f"node-{r}"),
                },
            )
            for r in range(WORLD_SIZE)
        ]
        codes = [p.wait() for p in ranks]
    failed = [c for c in codes if c != 0]
    if failed:
        run.finish(status="failed", error=f"{len(failed)} ranks exited non-zero")
    else:
        run.finish()
    return run


def main() -> None:
    if "--rank" in sys.argv:
        rank()
        return
    if "--stand-in" not in sys.argv:
        run = launch({})
        print(f"run {run.id}: {run.status.value}")
        return
    from prime_runs.testing import StandInPlatform

    with StandInPlatform() as platform, tempfile.TemporaryDirectory() as home:
        env = {**platform.env(), "PRIME_RUNS_DIR": os.path.join(home, "launcher")}
        os.environ.update(env)
        run = launch(env)
        (finalize,) = platform.requests_for("eval_finalize")
        metrics = finalize.json["metrics"]
        stored = len(platform.episodes)
        print(f"run {run.id}: {stored} episodes stored, finalize count 1")
        print(f"avg_reward {metrics['avg_reward']} over {metrics['prime_runs']}")


if __name__ == "__main__":
    main()

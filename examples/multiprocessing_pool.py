"""Log into one run from a multiprocessing pool, with any start method.

A ``fork`` worker inherits the run, but ``spawn`` and ``forkserver`` workers
start empty, so the portable recipe is the same for all three: hand
``run.context()`` to the pool's initializer and join there. Each record is
written once, by the process that logged it.

    python examples/multiprocessing_pool.py [fork|forkserver|spawn]
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

import prime_runs as pr

_run: pr.Run | None = None


def join_run(carrier: dict[str, str]) -> None:
    """Pool initializer: join the owner's run (never creates an evaluation)."""
    global _run
    _run = pr.init(join=carrier)


def evaluate(example: int) -> float:
    reward = float(example % 2)
    assert _run is not None
    _run.log_episodes(
        {
            "id": f"ep-{example}",
            "env": {"id": "gsm8k"},
            "ok": True,
            "errors": [],
            "traces": [
                {
                    "id": f"tr-{example}",
                    "ok": True,
                    "errors": [],
                    "rewards": {"correct": {"score": reward, "weight": 1.0}},
                    "timing": {"start": time.time()},
                }
            ],
        }
    )
    return reward


def main(method: str) -> None:
    run = pr.init(name=f"pool-example-{method}", environments=["gsm8k"])
    ctx = multiprocessing.get_context(method)
    pool = ctx.Pool(2, initializer=join_run, initargs=(run.context(),))
    rewards = pool.map(evaluate, range(8))
    # close() + join() lets each worker exit normally, which drains its uploads.
    # (Leaving a `with Pool()` block terminates the workers instead: their unsent
    # records stay in the local archive for `prime-runs sync`.)
    pool.close()
    pool.join()
    run.finish({"avg_reward": sum(rewards) / len(rewards)})
    print(f"run {run.id} ({os.getpid()}) finished: {run.status.value}, {len(rewards)} episodes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "spawn")

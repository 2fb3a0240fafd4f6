"""An eval on Ray: tasks, an actor and a threaded actor log into one run the driver owns.

    pip install ray
    python examples/ray_eval.py --stand-in     # a local Ray cluster and stand-in platform
    PRIME_API_KEY=... python examples/ray_eval.py

The driver starts the run and hands ``run.context()`` to every task and actor. Each task
joins for its block of work (``with pr.join(carrier) as run:``); the actor joins once and
is drained before it is killed; the threaded actor serves two runs at once, each call
logging through its own handle. Records carry deterministic ids, so a retried task does
not store them twice. The driver finishes once every worker is done, and the finalized
numbers cover every record, on whichever node it was logged (docs/distributed.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

import prime_runs as pr
import ray


def episode(shard: str, i: int) -> dict[str, Any]:
    reward = float(i % 2)  # the true mean reward is 0.5
    return {
        "id": f"ep-{shard}-{i}",  # deterministic: the idempotency key of a retry
        "env": {"id": "gsm8k"},
        "ok": True,
        "errors": [],
        "traces": [
            {
                "id": f"tr-{shard}-{i}",
                "rewards": {"correct": {"score": reward, "weight": 1.0}},
                "timing": {"start": time.time()},
            }
        ],
    }


@ray.remote
def evaluate_shard(carrier: dict[str, str], shard: str, n: int) -> int:
    with pr.join(carrier) as run:
        run.log_episodes([episode(shard, i) for i in range(n)])
    return n


@ray.remote
class Evaluator:
    def __init__(self, carrier: dict[str, str]) -> None:
        self.run = pr.join(carrier)  # once per actor

    def evaluate(self, shard: str, n: int) -> int:
        self.run.log_episodes([episode(shard, i) for i in range(n)])
        return n

    def drain(self) -> list[str]:
        self.run.finish()  # drains this actor's uploads; call it before ray.kill
        return self.run.errors


@ray.remote(max_concurrency=2)
class SharedEvaluator:
    def evaluate(self, carrier: dict[str, str], shard: str, n: int) -> int:
        with pr.join(carrier) as run:  # per call: concurrent calls may serve other runs
            run.log_episodes([episode(shard, i) for i in range(n)])
        return n


def main() -> None:
    run = pr.init(name="ray-eval", environments=["gsm8k"], join=False)
    carrier = run.context()
    total = sum(ray.get([evaluate_shard.remote(carrier, f"task{k}", 10) for k in range(4)]))

    actor = Evaluator.remote(carrier)
    total += sum(ray.get([actor.evaluate.remote(f"actor{k}", 10) for k in range(2)]))
    errors = ray.get(actor.drain.remote())
    ray.kill(actor)

    shared = SharedEvaluator.remote()
    total += sum(ray.get([shared.evaluate.remote(carrier, f"shared{k}", 10) for k in range(2)]))
    ray.kill(shared)

    run.finish()
    print(f"run {run.id}: {total} episodes from 8 workers; actor errors {errors}")
    print(f"errors: {run.errors}")


if __name__ == "__main__":
    if "--stand-in" in sys.argv:
        from prime_runs.testing import StandInPlatform

        with StandInPlatform() as platform, tempfile.TemporaryDirectory() as home:
            os.environ.update(platform.env(), PRIME_RUNS_DIR=home)
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                main()
            finally:
                ray.shutdown()
            (finalize,) = platform.requests_for("eval_finalize")
            print(f"stored {len(platform.episodes)} episodes; finalized {finalize.json}")
    else:
        ray.init()
        main()

"""What the Ray workers run (the job's working_dir carries this module to them)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import prime_runs as pr
import ray


def episode(tag: str, i: int, reward: float) -> dict[str, Any]:
    return {
        "id": f"ep-{tag}-{i}",
        "env": {"id": "gsm8k"},
        "ok": True,
        "errors": [],
        "traces": [
            {
                "id": f"tr-{tag}-{i}",
                "rewards": {"correct": {"score": reward, "weight": 1.0}},
                "timing": {"start": 1.0},
            }
        ],
    }


@ray.remote
def shard(carrier: dict[str, str], tag: str, rewards: list[float]) -> dict[str, Any]:
    """A task: join for its block of work, log its shard, leave (never finish the run)."""
    with pr.join(carrier) as run:
        run.log_episodes([episode(tag, i, r) for i, r in enumerate(rewards)])
    archive = os.path.abspath(run.archive_path or "")
    return {"cwd": os.getcwd(), "archive": archive, "errors": run.errors}


@ray.remote(max_retries=1)
def crashes_once(carrier: dict[str, str], marker: str, rewards: list[float]) -> list[str]:
    """Killed mid-run on its first attempt, after half its records were stored; Ray runs it
    again, and the retry logs every record, the same ids."""
    first = not Path(marker).exists()
    Path(marker).touch()
    with pr.join(carrier) as run:
        for i, r in enumerate(rewards):
            if first and i == len(rewards) // 2:
                run.flush()
                os._exit(1)  # the worker process dies: Ray retries the task elsewhere
            run.log_episodes(episode("retried", i, r))
    return run.errors


@ray.remote
class Evaluator:
    """An actor that joins once, logs over many calls, and is drained before ray.kill."""

    def __init__(self, carrier: dict[str, str]) -> None:
        self.run = pr.join(carrier)

    def evaluate(self, tag: str, rewards: list[float]) -> int:
        self.run.log_episodes([episode(tag, i, r) for i, r in enumerate(rewards)])
        return len(rewards)

    def drain(self) -> list[str]:
        self.run.finish()  # drains this actor's uploads; the owner still closes the run
        return self.run.errors


@ray.remote(max_concurrency=2)
class TwoRuns:
    """A threaded actor serving two runs at once: each call joins its own run and logs
    through the module-level pr.log_episodes() inside its block."""

    def __init__(self) -> None:
        self.both = threading.Barrier(2)

    def serve(self, carrier: dict[str, str], tag: str, rewards: list[float]) -> list[str]:
        with pr.join(carrier) as run:
            self.both.wait(timeout=60)  # both runs' joins are open together
            for i, r in enumerate(rewards):
                pr.log_episodes(episode(tag, i, r))
                time.sleep(0)
            self.both.wait(timeout=60)
        return run.errors


@ray.remote
def usage_after_joins(carrier: dict[str, str], joins: int) -> list[tuple[int, int]]:
    """Threads and descriptors after the first join and after the last, in one worker."""
    out = []
    for i in range(joins):
        with pr.join(carrier) as run:
            run.log_episodes(episode("loop", i, 1.0))
        if i in (0, joins - 1):
            out.append((threading.active_count(), len(os.listdir("/proc/self/fd"))))
    return out

"""Log into one run from a subprocess: the worker joins through TRACEPARENT/BAGGAGE.

The owner starts the run and hands ``run.context(env=True)`` to the child's
environment; ``prime_runs.init()`` in the child finds it there and joins the
run instead of creating a second one. Only the owner finishes the run.

    python examples/subprocess_worker.py          # offline: into ./prime-runs
    PRIME_API_KEY=... python examples/subprocess_worker.py   # online
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import prime_runs as pr


def episode(name: str, reward: float) -> dict[str, object]:
    return {
        "id": f"ep-{name}",
        "env": {"id": "gsm8k"},
        "ok": True,
        "errors": [],
        "traces": [
            {
                "id": f"tr-{name}",
                "ok": True,
                "errors": [],
                "rewards": {"correct": {"score": reward, "weight": 1.0}},
                "timing": {"start": time.time()},
            }
        ],
    }


def worker() -> None:
    # TRACEPARENT/BAGGAGE in the environment name the run: this joins it.
    run = pr.init()
    run.log_episodes([episode(f"worker-{os.getpid()}-{i}", 1.0) for i in range(3)])
    print(f"worker {os.getpid()} logged into {run.id}")
    # No finish(): the owner closes the run. Exiting drains this process's uploads;
    # anything not sent stays in the local archive for `prime-runs sync`.


def main() -> None:
    run = pr.init(name="subprocess-worker-example", environments=["gsm8k"])
    # Pass the carrier to the child only: setting it in os.environ would make a
    # later init() in this process join this run too.
    env = {**os.environ, **run.context(env=True)}
    subprocess.run([sys.executable, os.path.abspath(__file__), "--worker"], env=env, check=True)
    run.log_episodes([episode(f"owner-{i}", 0.0) for i in range(2)])
    run.finish()
    print(f"run {run.id} finished: {run.status.value}")


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main()

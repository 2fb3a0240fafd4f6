"""Training metrics rows (issue 31), side by side with the peer: what does one
``log_metrics`` call cost the loop, how long is ``finish()`` left with, and how long does
the whole run take from its first step to ``finish()`` returning?

One fresh child per run and side, each against a stand-in platform started here (loopback;
its collector paused, as in ``harness``). The child registers a training run, logs
``--steps`` metrics rows, each after ``--pace`` ms of the loop's own work (0: a burst), then
calls ``finish()``. It prints the log call's p50, p99 and max, the loop's and ``finish()``'s
wall time, and the child's CPU from ``init()`` to the end; this process adds the stand-in's
CPU meanwhile (it shares the cores: a request costs both sides) and the steps the platform
holds afterwards (every one must be there).

The contract sends one ``POST /rft/metrics`` per step (App. A), so a burst faster than one
request per step leaves the rest to ``finish()``, unless the log call waits: the peer's
blocks once its queue is full, this SDK's does not. Compare the whole run, not
``finish()`` alone.

    .venv/bin/python bench/training.py                      # 10,000 steps, burst, both sides
    .venv/bin/python bench/training.py --pace 1             # 1 ms of work per step
    .venv/bin/python bench/training.py --pace 1 --sleep     # 1 ms asleep per step
    .venv/bin/python bench/training.py --sides ours --runs 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import harness

from prime_runs.testing import StandInPlatform

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import prime_runs as pr

    steps, pace, sleep = int(sys.argv[1]), float(sys.argv[2]) / 1000, sys.argv[3] == "1"
    cpu0 = time.process_time()
    run = pr.init(kind="train", model="m", environments=["gsm8k"], team_id="team-1",
                  training=pr.TrainingSpec(max_steps=steps))
    calls = []
    start = time.perf_counter()
    for step in range(steps):
        if pace and sleep:  # work that gives up the GIL (a GPU step, I/O)
            time.sleep(pace)
        elif pace:
            end = time.perf_counter() + pace
            while time.perf_counter() < end:  # the loop's own work, holding the GIL
                pass
        t = time.perf_counter()
        run.log_metrics({"loss": 1.0 / (step + 1), "reward": 0.5}, step=step)
        calls.append(time.perf_counter() - t)
    t = time.perf_counter()
    loop = t - start
    run.finish()
    finish = time.perf_counter() - t
    calls.sort()
    print(json.dumps({"run_id": run.id, "p50_us": calls[len(calls) // 2] * 1e6,
                      "p99_us": calls[int(len(calls) * 0.99)] * 1e6,
                      "max_ms": calls[-1] * 1e3, "loop_s": loop, "finish_s": finish,
                      "total_s": loop + finish, "cpu_s": time.process_time() - cpu0}))
    """
)


def measure(side: str, steps: int, pace: float, sleep: bool) -> dict[str, Any]:
    python = harness.peer_python() if side == "peer" else harness.ours_python()
    # This checkout's source for ours, whatever its interpreter has installed.
    own = {} if side == "peer" else {"PYTHONPATH": str(harness.ROOT / "src")}
    with tempfile.TemporaryDirectory(prefix="prime-runs-bench-") as tmp:
        with StandInPlatform() as platform, harness.no_gc_pauses():
            env = harness.child_env(Path(tmp), {**platform.env(), **own})
            standin0 = time.process_time()  # this process only waits: its CPU is the stand-in's
            done = subprocess.run(
                [str(python), "-c", _CHILD, str(steps), str(pace), "1" if sleep else "0"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
                cwd=tmp,
            )
            standin = time.process_time() - standin0
            result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
            result["standin_cpu_s"] = standin
            result["steps_stored"] = len(platform.training_steps(result["run_id"]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--pace", type=float, default=0.0, help="ms of loop work per step")
    parser.add_argument("--sleep", action="store_true", help="the work sleeps (GIL released)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--sides", default="ours,peer", help="ours, peer or both")
    args = parser.parse_args()
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    if "peer" in sides:
        harness.ensure_peer_venv(print)
    work = f"{'asleep' if args.sleep else 'busy'} {args.pace} ms"
    for _ in range(args.runs):
        for side in sides:  # alternately, so both meet the same noise
            r = measure(side, args.steps, args.pace, args.sleep)
            print(
                f"{side}: {args.steps} steps, {work}: log_metrics p50 {r['p50_us']:.1f} us, "
                f"p99 {r['p99_us']:.1f} us, max {r['max_ms']:.1f} ms; loop {r['loop_s']:.2f} s, "
                f"finish() {r['finish_s']:.2f} s, whole run {r['total_s']:.2f} s; "
                f"CPU {r['cpu_s']:.2f} s; stand-in CPU {r['standin_cpu_s']:.2f} s; "
                f"steps stored {r['steps_stored']:,}"
            )


if __name__ == "__main__":
    main()

"""Training metrics rows (issue 31): are rows sent while the loop logs, so that ``finish()``
has little left, and what does one ``log_metrics`` call cost the loop?

One fresh child per run, against a stand-in platform started here (loopback). The child
registers a training run, logs ``--steps`` metrics rows, each after ``--pace`` ms of the
loop's own work (0: a burst), then calls ``finish()``. It prints the log call's p50 and
p99, the time ``finish()`` took, the child's CPU from ``init()`` to the end, and the
stand-in's CPU meanwhile (it shares the cores: a request costs both sides).

The contract sends one ``POST /rft/metrics`` per step (App. A), so a burst faster than one
request per step leaves the rest to ``finish()``; a loop slower than a request does not.

    .venv/bin/python bench/training.py                      # 10,000 steps, burst
    .venv/bin/python bench/training.py --pace 1             # 1 ms of work per step
    .venv/bin/python bench/training.py --pace 1 --sleep     # 1 ms asleep per step
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

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
    run.finish()
    finish = time.perf_counter() - t
    calls.sort()
    print(json.dumps({"p50_us": calls[len(calls) // 2] * 1e6,
                      "p99_us": calls[int(len(calls) * 0.99)] * 1e6,
                      "finish_s": finish, "cpu_s": time.process_time() - cpu0}))
    """
)


def measure(steps: int, pace: float, sleep: bool) -> dict[str, float]:
    with StandInPlatform() as platform:
        env = dict(
            os.environ,
            **platform.env(),
            HOME=tempfile.mkdtemp(),
            PRIME_RUNS_DIR=tempfile.mkdtemp(),
        )
        standin0 = time.process_time()  # this process only waits: its CPU is the stand-in's
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(steps), str(pace), "1" if sleep else "0"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        standin = time.process_time() - standin0
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    result["standin_cpu_s"] = standin
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--pace", type=float, default=0.0, help="ms of loop work per step")
    parser.add_argument("--sleep", action="store_true", help="the work sleeps (GIL released)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.runs):
        r = measure(args.steps, args.pace, args.sleep)
        work = f"{'asleep' if args.sleep else 'busy'} {args.pace} ms"
        print(
            f"{args.steps} steps, {work}: log_metrics p50 {r['p50_us']:.1f} us, "
            f"p99 {r['p99_us']:.1f} us; finish() {r['finish_s']:.2f} s; CPU {r['cpu_s']:.2f} s; "
            f"stand-in CPU {r['standin_cpu_s']:.2f} s"
        )


if __name__ == "__main__":
    main()

"""What confirming an ambiguous sample append costs, as an evaluation grows.

Workers of one run (processes of their own, joined through the owner's carrier) log
episodes in batches against a stand-in whose sample table already holds ``--seed-rows``
rows; ``--faults`` appends are stored and then answered 502, so the worker that sent each
must find out what landed before it sends anything again. Each worker reports the CPU its
threads spent confirming (``SampleWriter.settle``, or ``SampleWriter.missing`` in versions
that read the whole listing) and the process's CPU in all.

    PYTHONPATH=src python bench/reconcile.py --workers 16 --seed-rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from prime_runs.testing import StandInPlatform

WORKER = r"""
import json, resource, sys, time
import prime_runs as pr
from prime_runs.platform import samples as S

spent, calls = [0.0], [0]
name = "settle" if hasattr(S.SampleWriter, "settle") else "missing"
inner = getattr(S.SampleWriter, name)
def timed(*args, **kwargs):
    start = time.thread_time()
    try:
        return inner(*args, **kwargs)
    finally:
        spent[0] += time.thread_time() - start
        calls[0] += 1
setattr(S.SampleWriter, name, timed)

carrier, tag, n, batch = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def episode(i):
    trace = {"id": f"tr-{tag}-{i}", "rewards": {"correct": {"score": 1.0}},
             "timing": {"start": 1.0}, "messages": [{"role": "user", "content": "x" * 400}]}
    return {"id": f"ep-{tag}-{i}", "env": {"id": "gsm8k"}, "ok": True, "errors": [],
            "traces": [trace]}
with pr.init(join=carrier) as run:
    for start in range(0, n, batch):
        run.log_episodes([episode(i) for i in range(start, min(n, start + batch))])
        time.sleep(0.05)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"confirm_cpu": spent[0], "confirms": calls[0],
                  "cpu": usage.ru_utime + usage.ru_stime}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--episodes", type=int, default=400, help="per worker")
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--seed-rows", type=int, default=20_000)
    parser.add_argument("--faults", type=int, default=32)
    args = parser.parse_args()
    with StandInPlatform() as platform, tempfile.TemporaryDirectory() as root:
        env = {**os.environ, **platform.env(), "PRIME_RUNS_DIR": root}
        os.environ.update(env)
        import prime_runs as pr

        owner = pr.init(name="reconcile", environments=["gsm8k"], traces=False)
        seed = [{"sample_id": f"seed-{i}", "reward": 0.0} for i in range(args.seed_rows)]
        _seed(platform, owner.id, seed)
        platform.fail("samples_append", 502, after_processing=True, times=args.faults)
        carrier = json.dumps(owner.context())
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WORKER,
                    carrier,
                    f"w{k}",
                    str(args.episodes),
                    str(args.batch),
                ],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(args.workers)
        ]
        reports = [json.loads(p.communicate(timeout=900)[0].splitlines()[-1]) for p in procs]
        wall = time.monotonic() - started
        listed = platform.requests_for("samples_list")  # the workers' (finish reads more)
        owner.finish(timeout=120)
        rows = platform.samples(owner.id)
    confirm = sorted(r["confirm_cpu"] for r in reports)
    cpu = [r["cpu"] for r in reports]
    logged = args.workers * args.episodes
    ids = [r["sample_id"] for r in rows if not str(r["sample_id"]).startswith("seed-")]
    print(
        json.dumps(
            {
                "workers": args.workers,
                "seed_rows": args.seed_rows,
                "episodes": logged,
                "rows_stored": len(ids),
                "duplicates": len(ids) - len(set(ids)),
                "missing": logged - len(set(ids)),
                "confirms": sum(r["confirms"] for r in reports),
                "confirm_cpu_s": {
                    "max": round(confirm[-1], 3),
                    "median": round(statistics.median(confirm), 3),
                    "sum": round(sum(confirm), 3),
                },
                "worker_cpu_s_per_1000_episodes": round(1000 * sum(cpu) / logged, 3),
                "workers_listing_requests": len(listed),
                "wall_s": round(wall, 1),
            },
            indent=1,
        )
    )


def _seed(platform: StandInPlatform, eval_id: str, rows: list[dict]) -> None:
    import httpx

    url = f"{platform.base_url}/api/v1/evaluations/{eval_id}/samples"
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    for start in range(0, len(rows), 5000):
        httpx.post(url, json={"samples": rows[start : start + 5000]}, headers=headers, timeout=60)


if __name__ == "__main__":
    main()

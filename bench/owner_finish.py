"""What the owner's ``finish()`` pays for the records its workers journaled beside it.

With no ``summary=`` given, the owner's ``finish()`` computes the run summary over every
record of its archive folder, reading back the segments of the workers that joined it
through the carrier (``_journal/journal.computed_summary``). Workers (processes of their
own) each log ``--records`` verifiers-sized ``dicts`` records (``workload.py``) into an
offline run, so nothing but that read-back is measured; the owner then finishes, and the
script prints the owner's ``finish()`` wall time and CPU, and both per 1,000 records.

    PYTHONPATH=src python bench/owner_finish.py --workers 16 --records 2000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
import prime_runs as pr
from workload import Generator
carrier, salt, count = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
records = [e.payload for e in Generator(salt=salt).workload("dicts", count)]
with pr.init(join=carrier) as run:
    for record in records:
        run.log_episodes([record])
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--records", type=int, default=500, help="per worker")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent)
    with tempfile.TemporaryDirectory() as root:
        os.environ["PRIME_RUNS_DIR"] = root
        import prime_runs as pr

        owner = pr.init(name="owner-finish", environments=["bench"], mode="offline")
        carrier = json.dumps(owner.context())
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, carrier, str(k), str(args.records), here],
                env=env,
            )
            for k in range(args.workers)
        ]
        for worker in workers:
            if worker.wait(timeout=900) != 0:
                raise SystemExit(f"a worker exited with {worker.returncode}")
        cpu, wall = time.process_time(), time.perf_counter()
        owner.finish(timeout=300)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    records = args.workers * args.records
    print(
        json.dumps(
            {
                "workers": args.workers,
                "records": records,
                "finish_s": round(wall, 3),
                "finish_cpu_s": round(cpu, 3),
                "finish_s_per_1000_records": round(1000 * wall / records, 4),
                "summarized": owner.summary.get("metrics", owner.summary),
            }
        )
    )


if __name__ == "__main__":
    main()

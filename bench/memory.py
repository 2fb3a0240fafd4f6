"""Memory with large records (issue 20): what a run holds while it logs records of many
megabytes against a stalled Prime Traces, and while ``finish()`` delivers them.

One fresh child per run, against a stand-in platform started here (loopback). The child
logs ``--records`` episodes whose assistant message is ``--mib`` MiB while every Prime
Traces upload waits, then the stall ends and the child calls ``finish()``. It reports,
against the record's size:

* peak RSS growth while logging and during ``finish()`` (``VmHWM`` reset before each
  phase, minus the RSS at its start; what the C allocator has not handed back counts);
* Python's own peak during ``finish()`` (``tracemalloc``), which is what the SDK holds;
* with ``--where``, the allocation sites alive at that peak (a snapshot each time the
  traced peak grows by a record's size), to find what holds it.

The issue's target: no step holds more than a fixed budget (4 MiB, or one larger record)
plus about two records, whatever the run's size. The ratios printed are peak / record.

    .venv/bin/python bench/memory.py                  # 25 records of 19 MiB
    .venv/bin/python bench/memory.py --records 100 --mib 20
    .venv/bin/python bench/memory.py --records 8 --mib 4 --where
    .venv/bin/python bench/memory.py --records 20 --mib 15 --healthy   # no stall

``--healthy`` leaves Prime Traces answering: the records go live, and ``finish()`` has
what the live path left plus its coverage step (which reads nothing back when this host
stored every sample row).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "tests" / "data" / "episodes.jsonl"

_CHILD = textwrap.dedent(
    """
    import copy, json, os, sys, threading, time, tracemalloc
    import prime_runs as pr

    records, size, where = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    page = os.sysconf("SC_PAGE_SIZE")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    def hwm():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def reset_hwm():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    template = json.loads(open(sys.argv[4]).readline())
    run = pr.init(name="big", environments=["gsm8k"], model="m", framework="f")
    reset_hwm()
    log_before = rss()
    for i in range(records):
        record = copy.deepcopy(template)
        record["id"] = f"big-{i}"
        for n, member in enumerate(record["traces"]):
            member["id"] = f"big-{i}-{n}"
        record["traces"][0]["completion"] = [
            {"role": "assistant", "content": str(i % 10) * size}
        ]
        run.log_episodes(record)
        del record
    log_peak = hwm() - log_before
    print("logged", flush=True)
    sys.stdin.readline()
    tracemalloc.start(12 if where else 1)
    done, top = threading.Event(), [0, None]

    def watch():
        while not done.wait(0.002):
            _, peak = tracemalloc.get_traced_memory()
            if peak > top[0] + size:
                top[0], top[1] = peak, tracemalloc.take_snapshot()

    watcher = threading.Thread(target=watch, daemon=True)
    if where:
        watcher.start()
    reset_hwm()
    before = rss()
    started = time.perf_counter()
    run.finish(timeout=600)
    took = time.perf_counter() - started
    finish_peak = hwm() - before
    done.set()
    _, held_peak = tracemalloc.get_traced_memory()
    sites = []
    if where and top[1] is not None:
        for stat in top[1].statistics("traceback")[:12]:
            frames = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in stat.traceback]
            frames.reverse()  # the allocation first
            sites.append({"mib": round(stat.size / 2**20, 1), "count": stat.count,
                          "at": frames[:8]})
    print(json.dumps({"log_peak": log_peak, "finish_peak": finish_peak,
                      "held_peak": held_peak, "finish_s": took,
                      "acked": run.acknowledged_records, "sites": sites}), flush=True)
    """
)


def measure(records: int, size: int, where: bool = False, healthy: bool = False) -> dict[str, Any]:
    """One child: ``records`` episodes of ``size`` bytes of message; the figures in bytes."""
    from prime_runs.testing import StandInPlatform

    with tempfile.TemporaryDirectory() as home, StandInPlatform() as stand_in:
        env = {key: os.environ[key] for key in ("PATH", "LANG") if key in os.environ}
        env.update(stand_in.env())
        env.update(
            {
                "HOME": home,
                "PRIME_RUNS_DIR": str(Path(home) / "runs"),
                "PYTHONPATH": str(ROOT / "src"),
            }
        )
        if not healthy:
            stand_in.stall("traces_upload", 3600)
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(records), str(size), str(int(where)), str(TEMPLATE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "logged":
                raise RuntimeError("the child did not log its records")
            stand_in.unstall()
            out, _ = child.communicate("go\n", timeout=1800)
        finally:
            stand_in.unstall()
            if child.poll() is None:
                child.kill()
                child.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=25)
    parser.add_argument("--mib", type=float, default=19.0, help="message size per record")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--where", action="store_true", help="allocation sites at the peak")
    parser.add_argument("--healthy", action="store_true", help="no stall: records go live")
    args = parser.parse_args()
    size = int(args.mib * 2**20)
    for _ in range(args.runs):
        result = measure(args.records, size, args.where, args.healthy)
        mib = {k: result[k] / 2**20 for k in ("log_peak", "finish_peak", "held_peak")}
        print(
            f"{args.records} records of {args.mib:g} MiB: acked {result['acked']}, "
            f"finish() {result['finish_s']:.1f} s"
        )
        for key, label in (
            ("log_peak", "peak RSS growth while logging"),
            ("finish_peak", "peak RSS growth during finish()"),
            ("held_peak", "Python's peak during finish()"),
        ):
            print(f"  {label}: {mib[key]:.0f} MiB ({mib[key] / args.mib:.1f} records)")
        for site in result["sites"]:
            print(f"  {site['mib']:>8.1f} MiB x{site['count']:<5} " + " <- ".join(site["at"]))


if __name__ == "__main__":
    main()

"""Benchmark: this project vs prime-runs 0.1.4 vs two floors, side by side.

    python bench/run.py            # full run (about 15 minutes on 2 cores)
    python bench/run.py --quick    # smoke run (about a minute)
    python bench/run.py --report .bench/results.json   # re-print a saved run

Run it with the project's virtualenv (``make bench``). It creates the peer's
virtualenv in ``.bench/peer-venv`` on first use, starts a stand-in platform on
loopback for every measured run, runs each side in its own process, and
writes every raw measurement plus the medians to ``.bench/results.json``.
Method and figures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import figures
import harness
import report
from sides import NETWORKED

SCENARIOS = ("throughput", "producer", "outage", "burst")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small workload, one run each")
    parser.add_argument("--runs", type=int, help="runs per figure (median); default 3, quick 1")
    parser.add_argument("--episodes", type=int, help="workload size; default 2000, quick 200")
    parser.add_argument("--bursts", help="comma-separated burst sizes; default 25000,50000,100000")
    parser.add_argument("--work-ms", type=float, default=2.0, help="producer work per episode")
    parser.add_argument("--timebox", type=float, help="seconds a burst may take; default 30")
    parser.add_argument("--sides", default=",".join(figures.SIDES))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--out", type=Path, default=harness.BENCH_DIR / "results.json")
    parser.add_argument(
        "--ours-init",
        type=json.loads,
        help="extra pr.init keyword arguments for our sides, as JSON (e.g. '{\"journal\": false}')",
    )
    parser.add_argument("--report", type=Path, help="print the tables of a saved results file")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run each chosen side/scenario once under py-spy and summarise where time goes "
        "(.bench/profiles/); timings of a profiled run are not comparable",
    )
    return parser.parse_args(argv)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _plan(args: argparse.Namespace) -> tuple[list[tuple[int, str, str, dict[str, Any]]], dict]:
    runs = args.runs or (1 if args.quick else 3)
    episodes = args.episodes or (200 if args.quick else 2000)
    bursts_arg = args.bursts or ("2000,5000" if args.quick else "25000,50000,100000")
    bursts = [int(size) for size in bursts_arg.split(",") if size]
    timebox = args.timebox or (15.0 if args.quick else 30.0)
    work_iters = harness.calibrate(args.work_ms)
    sides = [side for side in args.sides.split(",") if side]
    scenarios = [scenario for scenario in args.scenarios.split(",") if scenario]
    for name in sides:
        if name not in figures.SIDES:
            raise SystemExit(f"unknown side {name!r}; expected some of {figures.SIDES}")
    plan = []
    salt = int(time.time()) & 0xFFFFFF
    for rep in range(runs):
        for scenario in scenarios:
            if scenario == "burst":
                continue
            for side in sides:
                if scenario == "outage" and side not in NETWORKED:
                    continue  # a floor has no network to lose
                salt += 1
                params = {"count": episodes, "work_iters": work_iters, "salt": salt}
                if args.ours_init:
                    params["ours_init"] = args.ours_init
                plan.append((rep, scenario, side, params))
    if "burst" in scenarios:
        # Memory is not noisy the way time is: one run per burst size.
        for size in bursts:
            for side in sides:
                salt += 1
                params = {"burst": size, "timebox": timebox, "salt": salt}
                if args.ours_init:
                    params["ours_init"] = args.ours_init
                plan.append((0, "burst", side, params))
    settings = {
        "runs": runs,
        "episodes": episodes,
        "bursts": bursts,
        "timebox": timebox,
        "work_ms": args.work_ms,
        "work_iters": work_iters,
        "sides": sides,
        "scenarios": scenarios,
        "quick": args.quick,
        "ours_init": args.ours_init,
    }
    return plan, settings


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.report:
        print(report.render(json.loads(args.report.read_text(encoding="utf-8"))), end="")
        return 0
    if args.profile:
        args.runs = 1
    plan, settings = _plan(args)
    if args.profile:
        return _profile(plan)
    if "peer" in settings["sides"]:
        settings["peer_version"] = harness.ensure_peer_venv(_say)
    log_dir = harness.BENCH_DIR / "logs"
    raw: list[dict[str, Any]] = []
    started = time.monotonic()
    for number, (rep, scenario, side, params) in enumerate(plan, 1):
        t0 = time.monotonic()
        result = harness.run_child(side, scenario, params, log_dir)
        raw.append({"rep": rep, "scenario": scenario, "side": side, "result": result})
        status = f"error: {result['error']}" if "error" in result else "ok"
        _say(
            f"[{number}/{len(plan)}] {scenario:<10} {side:<15} "
            f"{time.monotonic() - t0:6.1f}s  {status}"
        )
    sized = next((r["result"]["bytes"] for r in raw if "bytes" in r["result"]), 0)
    settings["workload_mb"] = sized / 1e6
    medians = figures.aggregate(raw)
    results = {
        "machine": harness.machine(),
        "params": settings,
        "elapsed_s": time.monotonic() - started,
        "figures": medians,
        "targets": figures.targets(medians),
        "raw": raw,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(report.render(results), end="")
    _say(f"raw results: {args.out} ({results['elapsed_s']:.0f}s)")
    return 1 if any("error" in entry["result"] for entry in raw) else 0


def _profile(plan: list[tuple[int, str, str, dict[str, Any]]]) -> int:
    import profile_summary

    if any(side == "peer" for _, _, side, _ in plan):
        harness.ensure_peer_venv(_say)
    for _, scenario, side, params in plan:
        path = harness.BENCH_DIR / "profiles" / f"{scenario}-{side}.txt"
        result = harness.run_child(side, scenario, params, harness.BENCH_DIR / "logs", path)
        if "error" in result or not path.exists():
            _say(f"{scenario} {side}: {result.get('error', 'no profile written')}")
            continue
        print(profile_summary.summarise(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

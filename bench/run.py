"""Benchmark: this project vs prime-runs 0.1.4 vs two floors, side by side.

    python bench/run.py            # full run, both workloads (see docs/benchmarks.md)
    python bench/run.py --quick    # smoke run (a few minutes)
    python bench/run.py --scale    # growth runs only: 2,000 / 20,000 / 100,000 episodes
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
import growth
import harness
import imports
import report
from sides import NETWORKED
from workload import DEFAULT_WORKLOADS, WORKLOADS

SCENARIOS = ("throughput", "producer", "outage", "burst", "import")
#: Version of the results file: 2 groups figures by workload and adds the import
#: figure; a version 1 file (no ``version``) is re-read from its raw runs.
RESULTS_VERSION = 2


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small workload, one run each")
    parser.add_argument("--runs", type=int, help="runs per figure (median); default 3, quick 1")
    parser.add_argument("--episodes", type=int, help="workload size; default 2000, quick 200")
    parser.add_argument("--bursts", help="comma-separated burst sizes; default 25000,50000,100000")
    parser.add_argument("--work-ms", type=float, default=2.0, help="producer work per episode")
    parser.add_argument(
        "--work-asleep",
        action="store_true",
        help="the producer's work waits (GIL released, as an awaited model call) instead of "
        "computing in Python",
    )
    parser.add_argument("--timebox", type=float, help="seconds a burst may take; default 30")
    parser.add_argument("--sides", help=f"default {','.join(figures.SIDES)}")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    parser.add_argument(
        "--import-runs", type=int, help="fresh interpreters per import figure; default 15"
    )
    parser.add_argument(
        "--scale",
        nargs="?",
        const=",".join(str(size) for size in growth.DEFAULT_SIZES),
        help="run only the growth figure (7) at these run sizes; default "
        + ",".join(f"{size}" for size in growth.DEFAULT_SIZES),
    )
    parser.add_argument(
        "--no-flush",
        action="store_true",
        help="with --scale: finish() right after the burst (no flush() first), so the "
        "finish figure is what finish() pays to deliver the whole run",
    )
    parser.add_argument("--out", type=Path, help="default .bench/results.json (or results-scale)")
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


Plan = list[tuple[int, str, str, dict[str, Any]]]


def _names(text: str, known: tuple[str, ...], what: str) -> list[str]:
    names = [name for name in text.split(",") if name]
    for name in names:
        if name not in known:
            raise SystemExit(f"unknown {what} {name!r}; expected some of {known}")
    return names


def _plan(args: argparse.Namespace) -> tuple[Plan, dict]:
    runs = args.runs or (1 if args.quick else 3)
    episodes = args.episodes or (200 if args.quick else 2000)
    bursts_arg = args.bursts or ("2000,5000" if args.quick else "25000,50000,100000")
    bursts = [int(size) for size in bursts_arg.split(",") if size]
    timebox = args.timebox or (15.0 if args.quick else 30.0)
    work_iters = harness.calibrate(args.work_ms)
    sides = _names(args.sides or ",".join(figures.SIDES), figures.SIDES, "side")
    scenarios = _names(args.scenarios, SCENARIOS, "scenario")
    workloads = _names(args.workloads, WORKLOADS, "workload")
    extra = {"ours_init": args.ours_init} if args.ours_init else {}
    plan: Plan = []
    salt = int(time.time()) & 0xFFFFFF
    for rep in range(runs):
        for workload in workloads:
            for scenario in scenarios:
                if scenario in ("burst", "import"):
                    continue
                for side in sides:
                    if scenario == "outage" and side not in NETWORKED:
                        continue  # a floor has no network to lose
                    if scenario == "outage" and side == "peer" and rep > 0:
                        # Its producer blocks 5 s a call once its queue is full (about a
                        # minute a run) and no target reads its figure: one run each.
                        continue
                    salt += 1
                    params = {"count": episodes, "work_iters": work_iters, "salt": salt}
                    if args.work_asleep:
                        params["work_asleep_s"] = args.work_ms / 1000.0
                    plan.append((rep, scenario, side, {**params, "workload": workload, **extra}))
    if "burst" in scenarios:
        # Memory is not noisy the way time is: one run per burst size.
        for size in bursts:
            for side in sides:
                salt += 1
                params = {"burst": size, "timebox": timebox, "salt": salt}
                plan.append((0, "burst", side, {**params, **extra}))
    settings = {
        "runs": runs,
        "episodes": episodes,
        "workloads": workloads,
        "bursts": bursts,
        "timebox": timebox,
        "work_ms": args.work_ms,
        "work_iters": work_iters,
        "work_asleep": args.work_asleep,
        "sides": sides,
        "scenarios": scenarios,
        "quick": args.quick,
        "ours_init": args.ours_init,
        "import_runs": args.import_runs or (5 if args.quick else 15),
    }
    return plan, settings


def _execute(plan: Plan, after: harness.After | None = None) -> list[dict[str, Any]]:
    """Every planned child, one at a time, with its raw result."""
    log_dir = harness.BENCH_DIR / "logs"
    raw: list[dict[str, Any]] = []
    for number, (rep, scenario, side, params) in enumerate(plan, 1):
        t0 = time.monotonic()
        hook = after if side == "ours-offline" else None
        result = harness.run_child(side, scenario, params, log_dir, after=hook)
        elapsed = time.monotonic() - t0
        entry = {"rep": rep, "scenario": scenario, "side": side, "params": params}
        if "workload" in params:
            entry["workload"] = params["workload"]
        raw.append({**entry, "result": result, "elapsed_s": elapsed})
        status = f"error: {result['error']}" if "error" in result else "ok"
        size = params.get("burst") or params.get("count")
        label = f"{scenario} {params.get('workload', '')}".strip()
        _say(f"[{number}/{len(plan)}] {label:<20} {side:<15} {size:>7} {elapsed:6.1f}s  {status}")
    return raw


def _workload_mb(raw: list[dict[str, Any]]) -> dict[str, float]:
    sized: dict[str, float] = {}
    for entry in raw:
        if "workload" in entry and "bytes" in entry["result"]:
            sized.setdefault(entry["workload"], entry["result"]["bytes"] / 1e6)
    return sized


def _write(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(report.render(results), end="")
    _say(f"raw results: {out} ({results['elapsed_s']:.0f}s)")


def _scale(args: argparse.Namespace) -> int:
    sizes = [int(size) for size in args.scale.split(",") if size]
    sides = _names(args.sides or ",".join(growth.SIDES), growth.SIDES, "side")
    peer_version = harness.ensure_peer_venv(_say) if "peer" in sides else None
    started = time.monotonic()
    runs = args.runs or growth.DEFAULT_RUNS
    salt = int(time.time()) & 0xFFFFFF
    flush = not args.no_flush
    raw = _execute(growth.plan(sizes, sides, salt, runs, flush=flush), growth.sync_after)
    figures_by_side = growth.aggregate(raw)
    results = {
        "version": RESULTS_VERSION,
        "kind": "growth",
        "machine": harness.machine(),
        "params": {
            "sizes": sizes,
            "sides": sides,
            "peer_version": peer_version,
            "runs": runs,
            "flush": flush,
        },
        "elapsed_s": time.monotonic() - started,
        "growth": figures_by_side,
        "targets": growth.targets(figures_by_side),
        "raw": raw,
    }
    _write(args.out or harness.BENCH_DIR / "results-scale.json", results)
    return 1 if any("error" in entry["result"] for entry in raw) else 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.report:
        print(report.render(json.loads(args.report.read_text(encoding="utf-8"))), end="")
        return 0
    if args.scale:
        return _scale(args)
    if args.profile:
        args.runs = 1
    plan, settings = _plan(args)
    if args.profile:
        return _profile(plan)
    if "peer" in settings["sides"] or "import" in settings["scenarios"]:
        settings["peer_version"] = harness.ensure_peer_venv(_say)
    started = time.monotonic()
    raw = _execute(plan)
    settings["workload_mb"] = _workload_mb(raw)
    medians = figures.aggregate(raw)
    if "import" in settings["scenarios"]:
        medians["import"] = imports.measure(settings["import_runs"], _say)
    results = {
        "version": RESULTS_VERSION,
        "machine": harness.machine(),
        "params": settings,
        "elapsed_s": time.monotonic() - started,
        "figures": medians,
        "targets": figures.targets(medians),
        "raw": raw,
    }
    _write(args.out or harness.BENCH_DIR / "results.json", results)
    failed = any("error" in entry["result"] for entry in raw)
    failed = failed or any("error" in side for side in medians.get("import", {}).values())
    return 1 if failed else 0


def _profile(plan: Plan) -> int:
    import profile_summary

    if any(side == "peer" for _, _, side, _ in plan):
        harness.ensure_peer_venv(_say)
    for _, scenario, side, params in plan:
        name = "-".join(part for part in (scenario, params.get("workload"), side) if part)
        path = harness.BENCH_DIR / "profiles" / f"{name}.txt"
        result = harness.run_child(side, scenario, params, harness.BENCH_DIR / "logs", path)
        if "error" in result or not path.exists():
            _say(f"{scenario} {side}: {result.get('error', 'no profile written')}")
            continue
        print(profile_summary.summarise(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

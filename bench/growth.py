"""Figure 7: how the costs grow with the run (``bench/run.py --scale``).

For each run size (2,000 / 20,000 / 100,000 ~5 KB episodes by default), one
fresh child per side:

* ``ours`` (default configuration) and ``peer``: log the run, ``flush()``,
  ``finish()``; CPU per 1,000 episodes (first log -> finish returned, the
  cost of building the episodes measured apart and subtracted) and
  ``finish()`` after the drain;
* ``ours-offline``: the same run made offline (``mode="offline"``), then
  ``prime-runs sync`` as a subprocess with the stand-in's environment: its
  wall and CPU time per 1,000 episodes, and what the stand-in holds afterwards.
  The stand-in runs in this process, on the same two cores, and the sync's wall
  time includes its work: its CPU during the sync is measured too. So is the
  command's fixed cost (a sync with no runs to sync: interpreter, imports, the
  CLI), which a small run cannot amortize. The flatness target reads the sync's
  own CPU per 1,000 episodes beyond that cost.

Sizes up to ``REPEATED_UP_TO`` run ``runs`` times (medians); a single run of a
few seconds moves by more than the 20% band on a shared machine.

The peer has no offline mode, so it has no sync figure.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import tempfile
import time
from typing import Any

import harness

SIDES = ("ours", "peer", "ours-offline")
DEFAULT_SIZES = (2000, 20000, 100000)
DEFAULT_RUNS = 3
REPEATED_UP_TO = 20_000
#: Flat means no larger run's figure is above the smallest run's by more than this factor.
#: A figure that falls as the run grows (fixed costs spread over more episodes) is flat.
FLAT = 1.2
#: Slack for finish(), a figure of milliseconds on loopback where noise is absolute.
FINISH_SLACK_S = 0.05


def _cli() -> list[str]:
    script = harness.ours_python().parent / "prime-runs"
    if script.exists():
        return [str(script)]
    return [str(harness.ours_python()), "-c", "from prime_runs.cli import main; main()"]


def _timed_sync(env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    """``prime-runs sync`` with ``env``: its wall and CPU time, and this process's CPU
    meanwhile (the stand-in's: the harness only waits)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = time.process_time()
    start = time.perf_counter()
    done = subprocess.run(
        [*_cli(), "sync"],
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
        timeout=harness.CHILD_TIMEOUT_S,
        check=False,
    )
    wall = time.perf_counter() - start
    standin = time.process_time() - own
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return done, {"wall": wall, "cpu": cpu, "standin": standin}


def sync_after(stand_in: Any, env: dict[str, str]) -> dict[str, Any]:
    """Run ``prime-runs sync`` over the child's archive and time it (wall, CPU); then once
    in an empty home, for the command's fixed cost."""
    done, times = _timed_sync(env)
    with tempfile.TemporaryDirectory(prefix="prime-runs-bench-empty-") as empty:
        _, fixed = _timed_sync({**env, "HOME": empty, "PRIME_RUNS_DIR": f"{empty}/prime-runs"})
    evaluations = list(stand_in.evaluations)
    # A fresh stand-in per child: the one evaluation there is the synced run.
    run_id = evaluations[0] if len(evaluations) == 1 else None
    return {
        "sync_wall_s": times["wall"],
        "sync_cpu_s": times["cpu"],
        "sync_standin_cpu_s": times["standin"],
        "sync_fixed_wall_s": fixed["wall"],
        "sync_fixed_cpu_s": fixed["cpu"],
        "sync_returncode": done.returncode,
        "sync_output": (done.stdout + done.stderr)[-2000:],
        "sync_evaluations": len(evaluations),
        "sync_platform": harness.platform_counts(stand_in, run_id),
    }


def plan(
    sizes: list[int], sides: list[str], salt: int, runs: int = DEFAULT_RUNS, flush: bool = True
) -> list[tuple[int, str, str, dict]]:
    entries = []
    for rep in range(runs):
        for size in sizes:
            if rep and size > REPEATED_UP_TO:
                continue
            for side in sides:
                salt += 1
                params = {"count": size, "salt": salt, "flush": flush}
                entries.append((rep, "growth", side, params))
    return entries


def per_run(side: str, result: dict[str, Any]) -> dict[str, float]:
    if "error" in result:
        return {}
    count = result["episodes"]
    figures = {"cpu_per_1k": 1000.0 * result["cpu_s"] / count, "finish_s": result["finish_s"]}
    if side != "ours-offline":
        acked = (result.get("platform") or {}).get("episodes") or 0
        return figures | {"acked_pct": 100.0 * acked / count, "eps_per_s": acked / result["wall_s"]}
    synced = result.get("sync_platform") or {}
    fixed = result.get("sync_fixed_wall_s", 0.0)
    return figures | {
        "sync_wall_per_1k": 1000.0 * result["sync_wall_s"] / count,
        "sync_fixed_s": fixed,
        "sync_cpu_per_1k": 1000.0 * result["sync_cpu_s"] / count,
        "sync_cpu_beyond_fixed_per_1k": 1000.0
        * max(0.0, result["sync_cpu_s"] - result.get("sync_fixed_cpu_s", 0.0))
        / count,
        "sync_standin_cpu_per_1k": 1000.0 * result.get("sync_standin_cpu_s", 0.0) / count,
        "synced_pct": 100.0 * (synced.get("episodes") or 0) / count,
        "synced_samples_pct": 100.0 * (synced.get("samples") or 0) / count,
        "sync_returncode": float(result["sync_returncode"]),
    }


def aggregate(raw: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """side -> run size (as a string, for JSON) -> figures (medians of its runs)."""
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    for entry in raw:
        size = str(entry["params"]["count"])
        figures = per_run(entry["side"], entry["result"])
        if figures:
            runs.setdefault(entry["side"], {}).setdefault(size, []).append(figures)
    return {
        side: {
            size: {
                key: statistics.median(f[key] for f in found if key in f)
                for key in {key for f in found for key in f}
            }
            for size, found in by_size.items()
        }
        for side, by_size in runs.items()
    }


def _series(growth: dict[str, Any], side: str, key: str) -> list[float]:
    by_size = growth.get(side) or {}
    return [by_size[size][key] for size in sorted(by_size, key=int) if key in by_size[size]]


def spread(growth: dict[str, Any], side: str, key: str) -> float | None:
    """Largest run's figure over the smallest's."""
    values = _series(growth, side, key)
    if len(values) < 2 or values[0] <= 0:
        return None
    return values[-1] / values[0]


def _flat(growth: dict[str, Any], side: str, key: str) -> bool | None:
    values = _series(growth, side, key)
    if len(values) < 2 or values[0] <= 0:
        return None
    return max(values[1:]) <= FLAT * values[0]


def _finish_flat(growth: dict[str, Any], side: str) -> bool | None:
    values = _series(growth, side, "finish_s")
    if len(values) < 2:
        return None
    return values[-1] <= max(FLAT * values[0], values[0] + FINISH_SLACK_S)


def _all_synced(growth: dict[str, Any]) -> bool | None:
    values = _series(growth, "ours-offline", "synced_pct")
    return None if not values else all(value >= 100.0 for value in values)


def targets(growth: dict[str, Any]) -> list[dict[str, Any]]:
    checks = (
        (
            f"CPU per 1k episodes does not grow (within {FLAT - 1:.0%})",
            _flat(growth, "ours", "cpu_per_1k"),
        ),
        ("finish() after the drain does not grow", _finish_flat(growth, "ours")),
        (
            f"sync CPU per 1k episodes beyond its start-up does not grow (within {FLAT - 1:.0%})",
            _flat(growth, "ours-offline", "sync_cpu_beyond_fixed_per_1k"),
        ),
        ("sync: the stand-in holds every episode", _all_synced(growth)),
    )
    scope = "5 KB growth"
    return [
        {"figure": "7", "target": text, "workload": scope, "ours": ok, "ours-nosamples": None}
        for text, ok in checks
    ]

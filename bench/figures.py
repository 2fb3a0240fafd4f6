"""From raw child results to figures: medians over runs, ratios, targets.

Figures are grouped: ``{"workloads": {workload: {side: {key: median}}},
"burst": {side: {key: median}}}``; ``run.py`` adds ``"import"`` (``imports.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SIDES = ("ours", "ours-nosamples", "peer", "json", "otel")
LABELS = {
    "ours": "ours (default: traces + samples)",
    "ours-nosamples": "ours (sample table off)",
    "peer": "peer 0.1.4 (traces only)",
    "json": "floor: JSON once",
    "otel": "floor: OTel BSP no-op",
}
MB = 1024 * 1024
#: Target 4's ceiling on a burst's peak RSS above baseline.
BURST_MB = 100.0

Figures = dict[str, dict[str, float]]  # side -> figure -> median


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    unit: str
    lower_is_better: bool = True


def _acked(result: dict[str, Any]) -> int:
    """Episodes the platform holds for the run; a floor 'acknowledges' everything."""
    counts = result.get("platform")
    if counts is None:
        return int(result.get("episodes") or 0)
    return int(counts.get("episodes") or 0)


_PER_1K = {"producer_thread_cpu_s": "producer_cpu_per_1k", "standin_cpu_s": "standin_cpu_per_1k"}


def _per_run(scenario: str, result: dict[str, Any]) -> dict[str, float]:
    """The figures one child result gives."""
    if "error" in result:
        return {}
    if scenario == "throughput":
        episodes = result["episodes"]
        figures = {
            "cpu_per_1k": 1000.0 * result["cpu_s"] / episodes,
            "eps_per_s": _acked(result) / result["wall_s"],
            "acked_pct": 100.0 * _acked(result) / episodes,
            "finish_s": result["finish_s"],
            "wall_s": result["wall_s"],
        }
        if "init_s" in result:
            figures["init_ms"] = 1000.0 * result["init_s"]
        # CPU seconds a child may report besides its own total, each per 1,000 episodes.
        for key, figure in _PER_1K.items():
            if key in result:
                figures[figure] = 1000.0 * result[key] / episodes
        return figures
    if scenario in ("producer", "outage"):
        prefix = "" if scenario == "producer" else "outage_"
        latency = result["latency"]
        figures = {
            f"{prefix}slowdown_pct": result["slowdown_pct"],
            f"{prefix}p50_ms": 1000.0 * latency["p50"],
            f"{prefix}p99_ms": 1000.0 * latency["p99"],
            f"{prefix}max_ms": 1000.0 * latency["max"],
            f"{prefix}p99_over_encode": latency["p99"] / max(result["encode"]["p99"], 1e-9),
            f"{prefix}acked_pct": 100.0 * _acked(result) / result["episodes"],
        }
        if "sdk_cpu_s" in result:
            figures[f"{prefix}sdk_cpu_per_1k"] = 1000.0 * result["sdk_cpu_s"] / result["episodes"]
        requests = (result.get("platform") or {}).get("requests")
        if requests is not None:
            figures[f"{prefix}requests_per_1k"] = 1000.0 * requests / result["episodes"]
        return figures
    if scenario == "burst":
        size = result["burst"]
        return {
            f"burst_{size}_peak_mb": result["peak_above_baseline"] / MB,
            f"burst_{size}_logged_pct": 100.0 * result["logged"] / size,
            f"burst_{size}_slowest_s": result["slowest_call_s"],
        }
    return {}


def medians(raw: list[dict[str, Any]]) -> Figures:
    """side -> figure -> median over runs."""
    samples: dict[str, dict[str, list[float]]] = {}
    for entry in raw:
        for key, value in _per_run(entry["scenario"], entry["result"]).items():
            samples.setdefault(entry["side"], {}).setdefault(key, []).append(value)
    return {
        side: {key: statistics.median(values) for key, values in figures.items()}
        for side, figures in samples.items()
    }


def aggregate(raw: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians of each workload (an entry without one, from a version 1 results
    file, is the mixed workload) and of the bursts."""
    workloads: dict[str, list[dict[str, Any]]] = {}
    for entry in raw:
        if entry["scenario"] != "burst":
            workloads.setdefault(entry.get("workload", "mixed"), []).append(entry)
    return {
        "workloads": {name: medians(entries) for name, entries in workloads.items()},
        "burst": medians([entry for entry in raw if entry["scenario"] == "burst"]),
    }


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``; None when either is missing or negative, or the denominator is
    (next to) zero, like a floor's finish time, where a ratio says nothing."""
    if num is None or den is None or den <= 0 or num < 0 or num > 1000 * den:
        return None
    return num / den


@dataclass(frozen=True)
class Target:
    figure: str
    text: str
    check: Callable[[Figures, str], bool | None]


def _get(figures: Figures, side: str, key: str) -> float | None:
    return figures.get(side, {}).get(key)


def _le(value: float | None, bound: float | None) -> bool | None:
    return None if value is None or bound is None else value <= bound


def _burst_sizes(figures: Figures, side: str) -> list[int]:
    return sorted(
        int(key.split("_")[1])
        for key in figures.get(side, {})
        if key.startswith("burst_") and key.endswith("_peak_mb")
    )


def _burst_ok(figures: Figures, side: str) -> bool | None:
    sizes = _burst_sizes(figures, side)
    if not sizes:
        return None
    peaks = [_get(figures, side, f"burst_{size}_peak_mb") or 0.0 for size in sizes]
    completed = all(
        (_get(figures, side, f"burst_{size}_logged_pct") or 0.0) >= 100.0 for size in sizes
    )
    # Flat: the largest burst costs at most 16 MB or 25% more than the smallest.
    flat = peaks[-1] <= max(peaks[0] * 1.25, peaks[0] + 16.0)
    return completed and flat and max(peaks) <= BURST_MB


def _slowdown_ratio(figures: Figures, side: str) -> bool | None:
    ours = _get(figures, side, "slowdown_pct")
    peer = _get(figures, "peer", "slowdown_pct")
    if ours is None or peer is None:
        return None
    # A slowdown at or under zero is as good as it gets, whatever the peer's.
    return ours <= 0 or (peer > 0 and ours <= 0.5 * peer)


#: Targets checked on each workload's figures.
WORKLOAD_TARGETS = (
    Target(
        "1",
        "CPU per 1k episodes <= 0.5x peer",
        lambda f, s: _le(_get(f, s, "cpu_per_1k"), _mul(_get(f, "peer", "cpu_per_1k"), 0.5)),
    ),
    Target("2", "slowdown <= 0.5x peer's", _slowdown_ratio),
    Target(
        "2",
        "p99 log call <= 3x encoding the record once",
        lambda f, s: _le(_get(f, s, "p99_over_encode"), 3.0),
    ),
    Target(
        "3",
        "503 outage: slowdown <= 1.5x unstalled (or <= 0)",
        lambda f, s: _outage_ok(f, s, "slowdown_pct"),
    ),
    Target(
        "3",
        "503 outage: p99 <= 1.5x unstalled",
        lambda f, s: _le(_get(f, s, "outage_p99_ms"), _mul(_get(f, s, "p99_ms"), 1.5)),
    ),
    Target(
        "3",
        "503 outage: 100% delivered after recovery",
        lambda f, s: _le(100.0, _get(f, s, "outage_acked_pct")),
    ),
    Target(
        "5",
        "episodes/s >= 2x peer",
        lambda f, s: _le(_mul(_get(f, "peer", "eps_per_s"), 2.0), _get(f, s, "eps_per_s")),
    ),
    Target("8", "finish -> finalized <= 1 s", lambda f, s: _le(_get(f, s, "finish_s"), 1.0)),
)
BURST_TARGET = Target("4", f"burst: all logged, flat, <= {BURST_MB:.0f} MB", _burst_ok)


def _mul(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _outage_ok(figures: Figures, side: str, key: str) -> bool | None:
    stalled = _get(figures, side, f"outage_{key}")
    base = _get(figures, side, key)
    if stalled is None or base is None:
        return None
    return stalled <= 0 or stalled <= 1.5 * max(base, 0.0)


def _import_ok(figures: dict[str, Any]) -> bool | None:
    """Target 6: ours <= 0.5x 0.2.0's import and no slower than the peer's."""
    net = {side: (figures.get(side) or {}).get("net_ms") for side in ("ours", "peer", "v020")}
    if net["ours"] is None or net["v020"] is None or net["peer"] is None:
        return None
    return net["ours"] <= 0.5 * net["v020"] and net["ours"] <= net["peer"]


def _row(figure: str, text: str, scope: str, ours: bool | None, nosamples: bool | None) -> dict:
    return {
        "figure": figure,
        "target": text,
        "workload": scope,
        "ours": ours,
        "ours-nosamples": nosamples,
    }


def targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target and workload (bursts and the import are one each)."""
    rows = []
    for target in WORKLOAD_TARGETS:
        for name, by_side in figures.get("workloads", {}).items():
            rows.append(
                _row(
                    target.figure,
                    target.text,
                    name,
                    target.check(by_side, "ours"),
                    target.check(by_side, "ours-nosamples"),
                )
            )
    burst = figures.get("burst") or {}
    if burst:
        rows.append(
            _row(
                BURST_TARGET.figure,
                BURST_TARGET.text,
                "5 KB bursts",
                BURST_TARGET.check(burst, "ours"),
                BURST_TARGET.check(burst, "ours-nosamples"),
            )
        )
    if figures.get("import"):
        # One package, whatever the run's configuration: the same verdict for both.
        verdict = _import_ok(figures["import"])
        rows.append(_row("6", "import <= 0.5x 0.2.0's and <= the peer's", "-", verdict, verdict))
    return sorted(rows, key=lambda row: row["figure"])

"""Tables of figures and ratios, as Markdown (the same text reads fine in a terminal)."""

from __future__ import annotations

from typing import Any

import figures as figs
import growth
import imports
from figures import LABELS, SIDES, ratio

#: (figure number, key, title): the rows of the main table, in order.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("1", "cpu_per_1k", "CPU s per 1,000 episodes (first log -> finish returned)"),
    ("1", "producer_cpu_per_1k", "of which on the producer's thread, s per 1,000 episodes"),
    ("2", "slowdown_pct", "producer slowdown, % (2 ms of work per episode)"),
    ("2", "p50_ms", "log call p50, ms"),
    ("2", "p99_ms", "log call p99, ms"),
    ("2", "max_ms", "log call max, ms"),
    ("2", "p99_over_encode", "log call p99 / encode-once p99"),
    ("2", "requests_per_1k", "HTTP requests per 1,000 episodes in that loop"),
    ("2", "sdk_cpu_per_1k", "CPU s per 1,000 episodes in that loop, beyond the loop's own"),
    ("3", "outage_slowdown_pct", "slowdown during a 503 outage, %"),
    ("3", "outage_p99_ms", "log call p99 during a 503 outage, ms"),
    ("3", "outage_max_ms", "log call max during a 503 outage, ms"),
    ("3", "outage_acked_pct", "acknowledged after recovery + finish, % of logged"),
    ("5", "eps_per_s", "episodes acknowledged per second"),
    ("5", "acked_pct", "episodes acknowledged, % of logged"),
    ("8", "finish_s", "finish() after the drain -> finalized, s"),
    ("-", "init_ms", "init() (online: registered) -> returned, ms"),
    ("-", "standin_cpu_per_1k", "stand-in platform's CPU s per 1,000 episodes (not in 1)"),
)
_RATIO_COLUMNS = (
    ("ours", "peer", "ours/peer"),
    ("ours-nosamples", "peer", "ours (no samples)/peer"),
    ("ours", "json", "ours/JSON"),
    ("ours", "otel", "ours/OTel"),
)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def figures_table(figures: dict[str, dict[str, float]], bursts: bool = False) -> list[str]:
    """The workload rows (``ROWS``), or with ``bursts`` the burst rows (figure 4)."""
    header = ["#", "figure"] + [LABELS[side] for side in SIDES]
    header += [title for _, _, title in _RATIO_COLUMNS]
    rows = []
    keys = [] if bursts else list(ROWS)
    for size in _burst_sizes(figures) if bursts else []:
        keys.append(("4", f"burst_{size}_peak_mb", f"peak RSS above baseline, MB ({size:,} burst)"))
        keys.append(
            ("4", f"burst_{size}_logged_pct", f"burst of {size:,} logged within the time box, %")
        )
    for number, key, title in keys:
        values = {side: figures.get(side, {}).get(key) for side in SIDES}
        if all(value is None for value in values.values()):
            continue
        row = [number, title] + [_fmt(values[side]) for side in SIDES]
        row += [_ratio(ratio(values[num], values[den])) for num, den, _ in _RATIO_COLUMNS]
        rows.append(row)
    return _table(header, rows)


def targets_table(rows: list[dict[str, Any]]) -> list[str]:
    def mark(value: bool | None) -> str:
        return "n/a" if value is None else ("met" if value else "NOT met")

    nosamples = "ours-nosamples"
    return _table(
        ["#", "target", "workload", "ours (default)", "ours (sample table off)"],
        [
            [r["figure"], r["target"], r.get("workload", "-"), mark(r["ours"]), mark(r[nosamples])]
            for r in rows
        ],
    )


def import_table(by_side: dict[str, dict[str, Any]]) -> list[str]:
    """Figure 6: one row per package, then the two ratios."""
    rows = []
    for side in imports.SIDES:
        entry = by_side.get(side) or {}
        if "error" in entry:
            rows.append([imports.LABELS[side], "-", "-", "-", entry["error"][:80]])
            continue
        rows.append(
            [imports.LABELS[side]]
            + [_fmt(entry.get(key)) for key in ("import_ms", "bare_ms", "net_ms")]
            + [str(entry.get("version", "-"))]
        )
    net = {side: (by_side.get(side) or {}).get("net_ms") for side in imports.SIDES}
    lines = _table(["package", "import, ms", "bare interpreter, ms", "net, ms", "version"], rows)
    summary = (
        f"ours/0.2.0: {_ratio(ratio(net['ours'], net['v020']))}, "
        f"ours/peer: {_ratio(ratio(net['ours'], net['peer']))} (net import times)"
    )
    return [*lines, "", summary]


_GROWTH_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("ours", "cpu_per_1k", "ours CPU s/1k"),
    ("ours", "finish_s", "ours finish(), s"),
    ("ours", "acked_pct", "ours acked %"),
    ("peer", "cpu_per_1k", "peer CPU s/1k"),
    ("peer", "finish_s", "peer finish(), s"),
    ("peer", "acked_pct", "peer acked %"),
    ("ours-offline", "cpu_per_1k", "offline run CPU s/1k"),
    ("ours-offline", "sync_wall_per_1k", "sync wall s/1k"),
    ("ours-offline", "sync_fixed_s", "sync start-up, s"),
    ("ours-offline", "sync_cpu_per_1k", "sync CPU s/1k"),
    ("ours-offline", "sync_cpu_beyond_fixed_per_1k", "sync CPU beyond start-up, s/1k"),
    ("ours-offline", "sync_standin_cpu_per_1k", "stand-in CPU during sync, s/1k"),
    ("ours-offline", "synced_pct", "synced %"),
)


def growth_table(by_side: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """Figure 7: one row per run size, then largest/smallest."""
    columns = [c for c in _GROWTH_COLUMNS if c[0] in by_side]
    sizes = sorted({size for runs in by_side.values() for size in runs}, key=int)
    rows = [
        [f"{int(size):,}"]
        + [_fmt((by_side[side].get(size) or {}).get(key)) for side, key, _ in columns]
        for size in sizes
    ]
    rows.append(
        ["largest/smallest"]
        + [_ratio(growth.spread(by_side, side, key)) for side, key, _ in columns]
    )
    return _table(["episodes"] + [title for _, _, title in columns], rows)


def _machine(host: dict[str, Any]) -> str:
    return (
        f"Machine: {host['cpu']}, {host['cores']} cores, {host['memory_gb']} GB, "
        f"{host['os']}, Python {host['python']}"
    )


def _render_growth(results: dict[str, Any]) -> str:
    params = results["params"]
    runs = params.get("runs", 1)  # files written before --scale repeated runs: one each
    repeated = [s for s in params["sizes"] if s <= growth.REPEATED_UP_TO]
    how = "one run each"
    if runs > 1 and repeated:
        upto = f"{max(repeated):,}"
        how = f"medians of {runs} runs up to {upto} episodes, one run above"
    lines = [
        _machine(results["machine"]),
        f"Growth (figure 7): runs of {', '.join(f'{s:,}' for s in params['sizes'])} "
        f"~5 KB episodes, {how}, {results['elapsed_s'] / 60:.1f} min in all",
        "",
        *growth_table(results["growth"]),
        "",
        *targets_table(growth.targets(results["growth"])),  # read by the current criteria
    ]
    return "\n".join(lines) + "\n"


def _burst_sizes(figures: dict[str, dict[str, float]]) -> list[int]:
    sizes = {
        int(key.split("_")[1])
        for side in figures.values()
        for key in side
        if key.startswith("burst_") and key.endswith("_peak_mb")
    }
    return sorted(sizes)


def _workload_line(params: dict[str, Any]) -> str:
    sized = params.get("workload_mb")
    if not isinstance(sized, dict):  # version 1: one (mixed) workload
        sized = {"mixed": sized or 0.0}
    return ", ".join(f"{name} {mb:.0f} MB of JSON" for name, mb in sized.items()) or "none run"


def _work_line(params: dict[str, Any]) -> str:
    if params.get("work_asleep"):
        return "asleep: the GIL released, as an awaited model call"
    return f"{params['work_iters']:,} iterations of Python"


def render(results: dict[str, Any]) -> str:
    """The tables of a results file (version 1 figures are recomputed from its raw runs)."""
    if results.get("kind") == "growth":
        return _render_growth(results)
    params = results["params"]
    found = results["figures"] if results.get("version", 1) >= 2 else figs.aggregate(results["raw"])
    lines = [
        _machine(results["machine"]),
        f"Workloads: {params['episodes']:,} episodes each ({_workload_line(params)}), "
        f"{params['runs']} run(s) per figure (median), producer work {params['work_ms']} ms "
        f"per episode ({_work_line(params)}), bursts "
        f"{', '.join(f'{b:,}' for b in params['bursts'])} ~5 KB episodes "
        f"(time box {params['timebox']:.0f} s)",
    ]
    for name, by_side in found.get("workloads", {}).items():
        lines += ["", f"Workload: {name}", "", *figures_table(by_side)]
    if found.get("burst"):
        lines += ["", "Bursts (figure 4)", "", *figures_table(found["burst"], bursts=True)]
    if found.get("import"):
        lines += ["", "Import (figure 6)", "", *import_table(found["import"])]
    lines += ["", *targets_table(figs.targets(found))]
    if "elapsed_s" in results:
        lines += ["", f"Elapsed: {results['elapsed_s'] / 60:.1f} min"]
    return "\n".join(lines) + "\n"

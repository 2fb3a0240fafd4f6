"""Tables of figures and ratios, as Markdown (the same text reads fine in a terminal)."""

from __future__ import annotations

from typing import Any

from figures import LABELS, SIDES, ratio

#: (figure number, key, title): the rows of the main table, in order.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("1", "cpu_per_1k", "CPU s per 1,000 episodes (first log -> finish returned)"),
    ("2", "slowdown_pct", "producer slowdown, % (2 ms of work per episode)"),
    ("2", "p50_ms", "log call p50, ms"),
    ("2", "p99_ms", "log call p99, ms"),
    ("2", "max_ms", "log call max, ms"),
    ("2", "p99_over_encode", "log call p99 / encode-once p99"),
    ("2", "requests_per_1k", "HTTP requests per 1,000 episodes in that loop"),
    ("3", "outage_slowdown_pct", "slowdown during a 503 outage, %"),
    ("3", "outage_p99_ms", "log call p99 during a 503 outage, ms"),
    ("3", "outage_max_ms", "log call max during a 503 outage, ms"),
    ("3", "outage_acked_pct", "acknowledged after recovery + finish, % of logged"),
    ("5", "eps_per_s", "episodes acknowledged per second"),
    ("5", "acked_pct", "episodes acknowledged, % of logged"),
    ("6", "finish_s", "finish() after the drain -> finalized, s"),
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


def figures_table(figures: dict[str, dict[str, float]]) -> list[str]:
    header = ["#", "figure"] + [LABELS[side] for side in SIDES]
    header += [title for _, _, title in _RATIO_COLUMNS]
    rows = []
    keys = list(ROWS)
    for size in _burst_sizes(figures):
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

    return _table(
        ["#", "target", "ours (default)", "ours (sample table off)"],
        [[r["figure"], r["target"], mark(r["ours"]), mark(r["ours-nosamples"])] for r in rows],
    )


def _burst_sizes(figures: dict[str, dict[str, float]]) -> list[int]:
    sizes = {
        int(key.split("_")[1])
        for side in figures.values()
        for key in side
        if key.startswith("burst_") and key.endswith("_peak_mb")
    }
    return sorted(sizes)


def render(results: dict[str, Any]) -> str:
    params = results["params"]
    host = results["machine"]
    lines = [
        f"Machine: {host['cpu']}, {host['cores']} cores, {host['memory_gb']} GB, "
        f"{host['os']}, Python {host['python']}",
        f"Workload: {params['episodes']:,} episodes ({params['workload_mb']:.0f} MB of JSON), "
        f"{params['runs']} run(s) per figure (median), producer work {params['work_ms']} ms "
        f"per episode ({params['work_iters']:,} iterations), bursts "
        f"{', '.join(f'{b:,}' for b in params['bursts'])} (time box {params['timebox']:.0f} s)",
        "",
    ]
    lines += figures_table(results["figures"])
    lines += ["", *targets_table(results["targets"])]
    return "\n".join(lines) + "\n"

"""Text for ``prime-runs ls`` and ``prime-runs show``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import prime_runs._show_training as _training
from prime_runs._configview import text_lines
from prime_runs._journal.archive import RecordKey
from prime_runs._journal.runinfo import (
    SINK_LABELS,
    RunInfo,
    closing_text,
    format_time,
    owed_were,
)
from prime_runs._plural import quantity
from prime_runs._records.access import reward, summary_trace_index
from prime_runs._records.lines import NOT_JSON, parse_record

HISTOGRAM_WIDTH = 30
HISTOGRAM_BINS = 5


def render_ls(infos: Sequence[RunInfo]) -> str:
    """A table: id, name, mode, status, records, mean reward, kind (eval or train), what
    is pending upload (the sample table's as an upper bound: see ``RunInfo.estimated``)."""
    header = ("ID", "NAME", "MODE", "STATUS", "EPISODES", "REWARD", "KIND", "PENDING")
    rows = [header]
    for info in infos:
        rows.append(
            (
                info.run_id,
                _cut(info.name, 32),
                info.mode,
                info.status_label,
                str(info.total_records),
                _number(info.mean_reward),
                _training.kind_label(info),
                info.pending_text(),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)


Observer = Callable[[RecordKey, dict[str, Any]], None]


class Rewards(NamedTuple):
    """Per readable record its summary reward; per reason, the lines that are not records."""

    values: list[float]
    unreadable: dict[str, int]


def episode_rewards(info: RunInfo, observe: Observer | None = None) -> Rewards:
    """Per record: the summary trace's reward for an episode (first trainable trace, else the
    first), the trace's own for a bare trace. Lines that are not records are counted by
    reason; records whose reward cannot be computed are left out. ``observe`` sees every
    record read (a training run's episodes by step), so none is decoded twice."""
    values: list[float] = []
    unreadable: dict[str, int] = {}
    for key, _kind, data in info.archive.iter_records():
        record, problem = parse_record(data)
        if record is None:
            unreadable[problem or NOT_JSON] = unreadable.get(problem or NOT_JSON, 0) + 1
            continue
        if observe is not None:
            observe(key, record)
        try:
            traces = record.get("traces")
            trace = traces[summary_trace_index(traces)] if traces else record
            value = float(reward(trace))
        except (ArithmeticError, ValueError, AttributeError, TypeError, KeyError, IndexError):
            continue
        if math.isfinite(value):  # 1e400 reads as inf: too large for a float, left out
            values.append(value)
    return Rewards(values, unreadable)


def render_show(info: RunInfo, rewards: Rewards, training: Sequence[str] = ()) -> str:
    """``training``: the lines ``_show_training`` adds for a training run."""
    lines = [f"run {info.run_id}"]

    def add(label: str, value: object) -> None:
        lines.append(f"  {label + ':':<14}{value}")

    _add_identity(info, add, lines)
    _add_delivery(info, rewards, add)
    lines.extend(training)
    add("report", f"prime-runs report {info.run_id}  (HTML: charts, examples, episodes)")
    summary = info.status_doc.get("summary")
    if isinstance(summary, dict) and summary:
        add("summary", _summary_line(summary))
    lines.extend(reward_lines(rewards.values))
    return "\n".join(lines)


def _add_identity(info: RunInfo, add: Callable[[str, object], None], lines: list[str]) -> None:
    """What the run is: its names, where it lives, what it evaluates or trains."""
    d = info.description
    platform = info.platform
    add("name", info.name)
    add("mode", info.mode + (" (joined from another process)" if d.get("joined") else ""))
    if platform:
        add("platform id", platform.get("id"))
        if platform.get("url"):
            add("url", platform["url"])
    elif info.mode == "offline":
        add("platform id", "- (not synced yet)")
    add("environments", ", ".join(str(e) for e in d.get("environments") or []) or "-")
    add("model", d.get("model") or "-")
    add("framework", d.get("framework") or "-")
    add("kind", "training" if _training.is_training(info) else "evaluation")
    if _training.is_training(info):
        add("training", _training.spec_line(d))
    if d.get("description"):
        add("description", d["description"])
    if d.get("tags"):
        add("tags", ", ".join(str(t) for t in d["tags"]))
    first, *rest = text_lines(d.get("config"))
    add("config", first)
    lines.extend(f"  {'':<14}{line}" for line in rest)
    add("created", format_time(d.get("created_at")))


def _add_delivery(info: RunInfo, rewards: Rewards, add: Callable[[str, object], None]) -> None:
    """Where the run is: its status, its records and what each sink holds of them."""
    status = info.status_doc
    add("status", _status_line(info))
    if status.get("error"):
        add("error", status["error"])
    if status.get("finished_at"):
        add("finished", format_time(status["finished_at"]))
    add("records", _records_line(info))
    if rewards.unreadable:
        add(
            "unreadable",
            "; ".join(f"{quantity(n, 'line')}: {why}" for why, n in rewards.unreadable.items())
            + " (`prime-runs sync` rejects and counts them)",
        )
    if info.links:
        add("links", _links_line(info.links))
    for sink in info.sinks:
        settled = info.settled.get(sink, {})
        extra = "".join(f", {n} {how}" for how, n in settled.items() if n)
        add(
            SINK_LABELS[sink],
            f"{info.acked.get(sink, 0)}/{info.total_records} acknowledged{extra}, "
            f"{info.pending.get(sink, 0)} pending",
        )
    add("pending", info.pending_text())


def _links_line(links: Sequence[str]) -> str:
    shown = ", ".join(links[:5]) + (f", ... ({len(links)} in all)" if len(links) > 5 else "")
    return (
        f"{quantity(len(links), 'symbolic link')} in the run folder, not "
        f"read by any command: {shown} (replace a link with the file it stands for)"
    )


def _status_line(info: RunInfo) -> str:
    label = info.status_label
    if info.status_problem:
        then = (
            "its process may still be running, so sync leaves it alone"
            if info.running
            else "`prime-runs sync` uploads it and closes it as crashed"
        )
        return f"invalid ({info.status_problem}; {then})"
    if label == "running":
        return f"running (pid {info.status_doc.get('pid')})"
    if label == "crashed?":
        return (
            f"crashed? (recorded as running, but process {info.status_doc.get('pid')} is gone; "
            "`prime-runs sync` closes it as crashed)"
        )
    if not info.status_doc:
        return label
    if info.left_open:
        return (
            f"{label} (left open by finish(): {owed_were(info.left_open)} not stored in "
            f"time; `prime-runs sync` delivers them, then {closing_text(label)})"
        )
    closed = "closed on the platform" if info.closed else "not closed on the platform yet"
    return f"{label} ({closed})"


def _records_line(info: RunInfo) -> str:
    kinds = ", ".join(quantity(n, kind) for kind, n in sorted(info.records.items()) if n)
    return f"{info.total_records}" + (f" ({kinds})" if kinds else "")


def _summary_line(summary: dict[str, Any]) -> str:
    parts = []
    for key, value in summary.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k}={_number(v)}" for k, v in value.items())
            parts.append(f"{key}={{{inner}}}")
        else:
            parts.append(f"{key}={_number(value)}")
    return " ".join(parts)


def reward_lines(rewards: Sequence[float]) -> list[str]:
    if not rewards:
        return ["  rewards:      - (no scored records)"]
    lines = [
        f"  rewards:      n={len(rewards)} mean={_number(statistics.fmean(rewards))} "
        f"min={_number(min(rewards))} median={_number(statistics.median(rewards))} "
        f"max={_number(max(rewards))}"
    ]
    for label, count in _histogram(rewards):
        bar = "#" * max(1, round(HISTOGRAM_WIDTH * count / len(rewards)))
        lines.append(f"    {label:>15}  {bar} {count}")
    return lines


def _histogram(values: Sequence[float]) -> Iterable[tuple[str, int]]:
    distinct = sorted(set(values))
    if len(distinct) <= HISTOGRAM_BINS:
        return [(_number(v), values.count(v)) for v in distinct]
    low, high = distinct[0], distinct[-1]
    step = (high - low) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for value in values:
        counts[min(HISTOGRAM_BINS - 1, int((value - low) / step))] += 1
    labels = []
    for i in range(HISTOGRAM_BINS):
        close = "]" if i == HISTOGRAM_BINS - 1 else ")"
        labels.append(f"[{_number(low + i * step)}, {_number(low + (i + 1) * step)}{close}")
    return list(zip(labels, counts, strict=True))


def _number(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"

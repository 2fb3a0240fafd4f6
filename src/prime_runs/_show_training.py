"""What ``prime-runs show`` adds for a training run: its ``TrainingSpec``, the steps and
metrics its ``log_metrics`` rows logged (last value, min, max and a small trend per
metric), its episodes by dispatch step and policy, and how many of the episodes still
pending for the sample table get a row there.

Episodes are seen one by one as ``show`` reads the records for their rewards
(:class:`EpisodeTally`), so a training run's records are decoded once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from prime_runs._journal.archive import REJECTED, SKIPPED, RecordKey, settled_name
from prime_runs._journal.metrics_series import MetricsSeries, Series
from prime_runs._journal.runinfo import EPISODES, TRAIN_SAMPLES, RunInfo
from prime_runs._plural import quantity
from prime_runs._records.trainwork import has_messages, work_of
from prime_runs.exporters.train_samples import STEP_INTERVAL, table_step

SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 24
METRICS_SHOWN = 20  # more are counted, not listed (the report charts them all)
SPEC_FIELDS = (
    "max_steps", "batch_size", "rollouts_per_example", "seq_len",
    "wandb_project", "wandb_entity", "wandb_run_name",
)  # fmt: skip


def is_training(info: RunInfo) -> bool:
    return info.description.get("kind") == "train"


def kind_label(info: RunInfo) -> str:
    return "train" if is_training(info) else "eval"


def spec_line(description: Mapping[str, Any]) -> str:
    """``max_steps=500 batch_size=512 ...`` of the fields set (``max_steps`` 0: unknown)."""
    spec = description.get("training")
    spec = spec if isinstance(spec, Mapping) else {}
    parts = []
    for name in SPEC_FIELDS:
        value = spec.get(name)
        if name == "max_steps" and value == 0:
            value = "unknown"
        if value is not None:
            parts.append(f"{name}={value}")
    return " ".join(parts) or "-"


class EpisodeTally:
    """Per record read by ``show``: its training work and, while the sample table still
    owes it, whether it gets a row there. Call it with each record's key and record."""

    def __init__(self, info: RunInfo) -> None:
        acks = info.archive.acknowledged()
        names = [TRAIN_SAMPLES, *(settled_name(TRAIN_SAMPLES, h) for h in (REJECTED, SKIPPED))]
        self._settled: set[RecordKey] = {k for n in names for k in acks.get(n, ())}
        self._owes = TRAIN_SAMPLES in (info.description.get("sinks") or ())
        self.steps: set[int] = set()
        self.policy: Counter[str] = Counter()
        self.lags: Counter[int] = Counter()
        self.table: Counter[str] = Counter()  # pending episodes: "row", "cadence", "empty"

    def __call__(self, key: RecordKey, record: Mapping[str, Any]) -> None:
        if not key.segment.startswith(EPISODES):
            return
        work = work_of(record)
        if work is not None and work.step is not None:
            self.steps.add(work.step)
            self.policy[work.policy] += 1
            if work.lag is not None and work.lag > 0:
                self.lags[work.lag] += 1
        if self._owes and key not in self._settled:
            if table_step(record) is None:
                self.table["cadence"] += 1
            else:
                self.table["row" if has_messages(record) else "empty"] += 1

    def refine(self, info: RunInfo) -> None:
        """The sample table's pending count, now known exactly (``ls`` gives a bound)."""
        if self._owes:
            info.pending[TRAIN_SAMPLES] = self.table["row"]
            info.estimated.discard(TRAIN_SAMPLES)


def sparkline(series: Series, width: int = SPARK_WIDTH) -> str:
    """The series' trend: ``width`` buckets of its steps, each the mean of its values."""
    values = series.values
    if not values:
        return ""
    buckets = min(width, len(values))
    means = []
    for i in range(buckets):
        chunk = values[i * len(values) // buckets : (i + 1) * len(values) // buckets]
        means.append(sum(chunk) / len(chunk))
    low, high = min(means), max(means)
    if high == low:
        return SPARK[len(SPARK) // 2] * buckets
    top = len(SPARK) - 1
    return "".join(SPARK[round((v - low) / (high - low) * top)] for v in means)


def _num(value: float) -> str:
    return f"{value:.4g}"


def metric_lines(metrics: MetricsSeries) -> list[str]:
    """The ``steps`` line and one line per metric: last (at its step), min, max, trend."""
    if not metrics.rows:
        return ["  steps:        - (no log_metrics rows)"]
    first = min((s.steps[0] for s in metrics.series.values() if s.steps), default=None)
    span = f" (steps {first} to {metrics.last_step})" if first is not None else ""
    extra = f", {metrics.unstepped} without a step (not charted)" if metrics.unstepped else ""
    bad = f", {quantity(metrics.unreadable, 'unreadable line')}" if metrics.unreadable else ""
    lines = [
        f"  steps:        {metrics.steps} logged{span}; "
        f"{quantity(metrics.rows, 'metrics row')}{extra}{bad}"
    ]
    if not metrics.series:
        return lines
    names = list(metrics.series)[:METRICS_SHOWN]
    cells = []
    for name in names:
        one = metrics.series[name]
        last = f"last {_num(one.last)} (step {one.steps[-1]})"
        cells.append((name, last, f"min {_num(min(one.values))}", f"max {_num(max(one.values))}"))
    widths = [max(len(row[i]) for row in cells) for i in range(4)]
    lines.append("  metrics:")
    for row, name in zip(cells, names, strict=True):
        text = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        lines.append(f"    {text}  {sparkline(metrics.series[name])}")
    if len(metrics.series) > METRICS_SHOWN:
        lines.append(
            f"    ... and {len(metrics.series) - METRICS_SHOWN} more (the report charts all)"
        )
    return lines


def _lag_text(lags: list[int]) -> str:
    if not lags:
        return ""
    if lags[0] == lags[-1]:
        return f" (lag {quantity(lags[0], 'step')})"
    return f" (lag {lags[0]} to {lags[-1]} steps)"


def episode_lines(tally: EpisodeTally) -> list[str]:
    lines = []
    if tally.steps:
        kinds = ", ".join(f"{n} {kind}" for kind, n in tally.policy.most_common())
        kinds = kinds.replace("off-policy", f"off-policy{_lag_text(sorted(tally.lags))}", 1)
        lines.append(
            f"  by step:      episodes at {quantity(len(tally.steps), 'dispatch step')} "
            f"({min(tally.steps)} to {max(tally.steps)}): {kinds}"
        )
    table = tally.table
    if sum(table.values()):
        lines.append(
            "  sample table: "
            f"{quantity(table['row'], 'pending episode gets', 'pending episodes get')} a row; "
            "no row for "
            f"{table['cadence']} off the {STEP_INTERVAL}-step cadence or not training work "
            f"and {table['empty']} without a conversation (no trajectory)"
        )
    return lines

"""The report's training part of one run: its spec, each ``log_metrics`` metric by step,
its episodes by dispatch step (count, policy, mean reward) and what the sample table's
Parquet objects hold per step.

Charts stay light whatever the run's length: a series of more than ``POINTS`` steps is
cut into ``POINTS`` buckets of consecutive steps, each drawn at its mean step with its
mean, min and max (the page draws the mean as the line and min to max as a band), so a
100,000-step run embeds a few thousand numbers per metric, not 100,000.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prime_runs._journal.archive import REJECTED, SKIPPED, RecordKey, settled_name
from prime_runs._journal.metrics_series import Series
from prime_runs._journal.metrics_series import read as read_metrics
from prime_runs._journal.runinfo import TRAIN_SAMPLES
from prime_runs._records.trainwork import OFF_POLICY, ON_POLICY
from prime_runs._report._episode import EpisodeSummary
from prime_runs._report._load import LoadedRun
from prime_runs.exporters.train_samples import STEP_INTERVAL

POINTS = 1000  # per series and run, at most


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def bucketed(xs: Sequence[float], ys: Sequence[float], points: int = POINTS) -> dict[str, Any]:
    """``{"x", "y"}``, and ``"lo"``/``"hi"`` when more than ``points`` values were put in
    ``points`` buckets of consecutive ones (x and y their means, lo and hi the extremes)."""
    if len(xs) <= points:
        return {"x": list(xs), "y": [_round(y) for y in ys]}
    out: dict[str, list[float]] = {"x": [], "y": [], "lo": [], "hi": []}
    n = len(xs)
    for i in range(points):
        start, end = i * n // points, (i + 1) * n // points
        chunk = ys[start:end]
        out["x"].append(_round(sum(xs[start:end]) / (end - start)))
        out["y"].append(_round(sum(chunk) / len(chunk)))
        out["lo"].append(_round(min(chunk)))
        out["hi"].append(_round(max(chunk)))
    return out


def series_doc(series: Series) -> dict[str, Any]:
    doc = bucketed(series.steps, series.values)
    doc.update(
        n=len(series.steps),
        last=series.last,
        last_step=series.steps[-1],
        min=min(series.values),
        max=max(series.values),
    )
    return doc


def by_step(episodes: Sequence[EpisodeSummary]) -> dict[str, Any]:
    """Per dispatch step: episodes, on- and off-policy ones, and the mean reward."""
    steps: dict[int, list[float]] = {}  # step -> [episodes, on, off, reward sum, scored]
    for e in episodes:
        if e.work is None or e.work.step is None:
            continue
        row = steps.setdefault(e.work.step, [0, 0, 0, 0.0, 0])
        row[0] += 1
        row[1] += e.work.policy == ON_POLICY
        row[2] += e.work.policy == OFF_POLICY
        if e.reward is not None:
            row[3] += e.reward
            row[4] += 1
    ordered = sorted(steps)
    rewarded = [s for s in ordered if steps[s][4]]
    return {
        "steps": len(ordered),
        "episodes": sum(int(steps[s][0]) for s in ordered),
        "on_policy": sum(int(steps[s][1]) for s in ordered),
        "off_policy": sum(int(steps[s][2]) for s in ordered),
        "count": bucketed(ordered, [steps[s][0] for s in ordered]),
        "on": bucketed(ordered, [steps[s][1] for s in ordered]),
        "off": bucketed(ordered, [steps[s][2] for s in ordered]),
        "reward": bucketed(rewarded, [steps[s][3] / steps[s][4] for s in rewarded]),
    }


def table(run: LoadedRun) -> list[list[Any]]:
    """Per step on the table's cadence: ``[step, episodes, with a conversation, stored,
    pending, settled without a row]``; stored is what the platform acknowledged."""
    if TRAIN_SAMPLES not in (run.info.description.get("sinks") or ()):
        return []
    acks = run.archive.acknowledged()
    stored: set[RecordKey] = set(acks.get(TRAIN_SAMPLES, ()))
    settled = {k for h in (REJECTED, SKIPPED) for k in acks.get(settled_name(TRAIN_SAMPLES, h), ())}
    rows: dict[int, list[Any]] = {}
    for episode, key in zip(run.episodes, run.keys, strict=True):
        work = episode.work
        if work is None or work.type != "train" or work.step is None or work.step % STEP_INTERVAL:
            continue
        row = rows.setdefault(work.step, [work.step, 0, 0, 0, 0, 0])
        row[1] += 1
        row[2] += episode.messages
        if key in stored:
            row[3] += 1
        elif key in settled:
            row[5] += 1
        elif episode.messages:
            row[4] += 1
        else:
            row[5] += 1  # no conversation: sync settles it without a row
    return [rows[s] for s in sorted(rows)]


def training_doc(run: LoadedRun) -> dict[str, Any] | None:
    """The training part of the run's document; None for an evaluation."""
    description = run.info.description
    if description.get("kind") != "train":
        return None
    metrics = read_metrics(run.archive.path)
    spec = description.get("training")
    return {
        "spec": spec if isinstance(spec, dict) else {},
        "steps": metrics.steps,
        "rows": metrics.rows,
        "unstepped": metrics.unstepped,
        "unreadable": metrics.unreadable,
        "metrics": {name: series_doc(s) for name, s in metrics.series.items() if s.steps},
        "by_step": by_step(run.episodes),
        "table": table(run),
        "interval": STEP_INTERVAL,
    }

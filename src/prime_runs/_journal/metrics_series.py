"""A training run's ``log_metrics`` values read back from its metrics journals
(``metrics_rows``) as one series per metric, by step, for ``prime-runs show`` and the
report.

Every complete row counts, sent or not. The platform keeps one row per step, so here too
a step logged twice (or by two ranks) shows its last value, by the row's ``_timestamp``.
Nested mappings are flattened with ``/`` (``{"reward": {"mean": 1}}`` is ``reward/mean``);
values that are not numbers (text, lists, booleans) are not charted. A row without a
step (``log_metrics(values)`` with no ``step=``) has no place on a chart by step: it is
counted, not charted.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from prime_runs._journal.metrics_rows import journals, rows

RESERVED = ("step", "_timestamp")


@dataclass
class Series:
    """One metric: its steps in increasing order and the value at each."""

    steps: list[int]
    values: list[float]

    @property
    def last(self) -> float:
        return self.values[-1]


@dataclass
class MetricsSeries:
    series: dict[str, Series] = field(default_factory=dict)  # by name, first logged first
    rows: int = 0  # complete rows in the journals
    unstepped: int = 0  # rows without a step: counted, not charted
    unreadable: int = 0  # lines that are not a metrics row

    @property
    def steps(self) -> int:
        """Distinct steps with a value of any metric."""
        return len({s for one in self.series.values() for s in one.steps})

    @property
    def last_step(self) -> int | None:
        ends = [one.steps[-1] for one in self.series.values() if one.steps]
        return max(ends) if ends else None


def flatten(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """``(name, number)`` of every finite number in ``values``, nested names joined by /."""
    for key, value in values.items():
        name = f"{prefix}{key}"
        if not prefix and key in RESERVED:
            continue
        if isinstance(value, Mapping):
            yield from flatten(value, f"{name}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number):
                yield name, number


def _step(row: Mapping[str, Any]) -> int | None:
    step = row.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and step >= 0:
        return step
    return None


def _time(row: Mapping[str, Any]) -> float:
    value = row.get("_timestamp")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def read(run_dir: Path) -> MetricsSeries:
    """Every metrics journal of the run folder, as series by step."""
    out = MetricsSeries()
    latest: dict[str, dict[int, tuple[float, float]]] = {}  # name -> step -> (time, value)
    for journal in journals(run_dir):
        try:
            lines = list(rows(journal))
        except OSError:
            continue  # unreadable (a link put in its place)
        for _number, body in lines:
            try:
                doc = orjson.loads(body)
            except ValueError:
                out.unreadable += 1
                continue
            metrics = doc.get("metrics") if isinstance(doc, dict) else None
            if not isinstance(metrics, dict):
                out.unreadable += 1
                continue
            out.rows += 1
            step = _step(metrics)
            if step is None:
                out.unstepped += 1
                continue
            when = _time(metrics)
            for name, value in flatten(metrics):
                by_step = latest.setdefault(name, {})
                seen = by_step.get(step)
                if seen is None or when >= seen[0]:
                    by_step[step] = (when, value)
    for name, by_step in latest.items():
        ordered = sorted(by_step)
        out.series[name] = Series(ordered, [by_step[s][1] for s in ordered])
    return out

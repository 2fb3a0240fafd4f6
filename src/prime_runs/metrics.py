"""The run summary: run-level means over episodes, in the shape the eval dashboard reads
(``{"avg_reward", "avg_metrics", "avg_error"}``). This is the aggregation verifiers used, so
migrated runs keep their numbers. Pass the result to ``finish(summary=...)``.

Rules (platform contract, summary metrics):

* rewards and metrics are averaged over the *trainable* traces; only when no candidate trace
  is trainable are all of them used (a judge or simulated user would otherwise drag every mean
  down with structural zeros);
* ``avg_metrics[name]`` averages the non-null sub-reward scores (unweighted) and the non-null
  metrics of that name, each over the traces that have it; a trace with the name in both
  counts once, with its ``metrics`` value;
* ``avg_error`` is the share of episodes whose own ``ok`` is false, counting episodes without
  traces.

Inputs are verifiers objects or their JSON records. A bare trace (no ``traces``) given where
an episode is expected counts as a one-trace unit of work: its trace is a candidate and its own
``ok`` counts toward ``avg_error``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import Any, TypedDict

from . import _records

__all__ = ["RunSummary", "SummaryAccumulator", "from_encoded", "from_episodes"]


class RunSummary(TypedDict):
    avg_reward: float
    avg_metrics: dict[str, float]
    avg_error: float


class _Means:
    """Running sums for one set of scored traces: O(1) memory per metric name."""

    __slots__ = ("counts", "reward_sum", "sums", "traces")

    def __init__(self) -> None:
        self.traces = 0
        self.reward_sum: Any = 0  # int 0 like sum(), so sums match verifiers' bit for bit
        self.sums: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add(self, reward: Any, values: dict[str, Any]) -> None:
        self.traces += 1
        self.reward_sum += reward
        sums, counts = self.sums, self.counts
        for name, value in values.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1


# What one trace contributes: (trainable, reward, {metric name: value}).
_Scored = tuple[bool, Any, dict[str, Any]]


def _score(trace: Any) -> _Scored:
    values = dict(_records.reward_scores(trace))
    for name, value in _records.metrics(trace).items():
        if value is not None:
            values[name] = value  # a metric wins over a sub-reward of the same name
    return _records.is_trainable(trace), _records.reward(trace), values


def _read(record: Any) -> tuple[bool, list[_Scored]]:
    """One episode (or bare trace) as (failed, its traces' contributions), read in full
    before any state changes so a malformed record leaves the tally untouched."""
    members = _records.traces_of(record) if _records.is_episode(record) else (record,)
    return not _records.is_ok(record), [_score(trace) for trace in members]


class _Tally:
    """The state behind both :func:`from_episodes` and :class:`SummaryAccumulator`, so the
    two agree exactly when fed the same records in the same order."""

    __slots__ = ("all", "episodes", "failed", "trainable")

    def __init__(self) -> None:
        self.trainable = _Means()
        self.all = _Means()  # used only if no candidate trace is trainable
        self.episodes = 0
        self.failed = 0

    def add_unit(self, failed: bool) -> None:
        self.episodes += 1
        self.failed += failed

    def add_scored(self, scored: Iterable[_Scored]) -> None:
        for trainable, reward, values in scored:
            self.all.add(reward, values)
            if trainable:
                self.trainable.add(reward, values)

    def result(self) -> RunSummary:
        means = self.trainable if self.trainable.traces else self.all
        return {
            "avg_reward": means.reward_sum / means.traces if means.traces else 0.0,
            "avg_metrics": {name: total / means.counts[name] for name, total in means.sums.items()},
            "avg_error": self.failed / self.episodes if self.episodes else 0.0,
        }


def from_episodes(episodes: Iterable[Any], traces: Iterable[Any] | None = None) -> RunSummary:
    """The run summary over ``episodes`` (objects or record mappings).

    When ``traces`` is given, rewards and metrics are computed over those traces instead of
    the episodes' members, and the episodes only feed ``avg_error``. An empty run gives
    ``{"avg_reward": 0.0, "avg_metrics": {}, "avg_error": 0.0}``.
    """
    tally = _Tally()
    if traces is None:
        for record in episodes:
            failed, scored = _read(record)
            tally.add_unit(failed)
            tally.add_scored(scored)
    else:
        for record in episodes:
            tally.add_unit(not _records.is_ok(record))
        tally.add_scored(_score(trace) for trace in traces)
    return tally.result()


def from_encoded(records: Iterable[bytes]) -> RunSummary:
    """The summary of records stored as JSON (a run's journal); undecodable ones are skipped."""
    accumulator = SummaryAccumulator()
    for data in records:
        try:
            accumulator.add(json.loads(data))
        except (ValueError, AttributeError, TypeError):
            continue
    return accumulator.result()


class SummaryAccumulator:
    """Builds the run summary incrementally from the records a run logs, without keeping them.

    ``add`` takes an episode or a bare trace (record mapping or object); after any sequence of
    ``add`` calls, ``result()`` equals ``from_episodes`` over the same records in the same
    order. Thread-safe; memory grows only with the number of distinct metric names.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tally = _Tally()

    def add(self, record: Any) -> None:
        failed, scored = _read(record)  # outside the lock: reading is the slow part
        with self._lock:
            self._tally.add_unit(failed)
            self._tally.add_scored(scored)

    def result(self) -> RunSummary:
        with self._lock:
            return self._tally.result()

"""The figures the report shows, computed from episode summaries: per-example rollouts, mean
reward and pass@k, reward-function means, grouped errors and stop conditions, histograms
with bins shared by every run (so several runs overlay), and per-example comparisons.

Everything here is plain data in, plain data out, so it is tested without a browser.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean, median_low, stdev
from typing import Any

from prime_runs._report._episode import EpisodeSummary

DISCRETE_MAX = 12  # at most this many distinct values: one bar per value
BINS = 20
ERROR_SAMPLES = 5
SAME = 1e-9


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate for ``c`` passing out of ``n`` attempts (k <= n)."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def standard_error(values: Sequence[float]) -> float | None:
    """The standard error of the mean (sample standard deviation / sqrt(n)); None below two
    values, where the spread is unknown."""
    if len(values) < 2:
        return None
    return stdev(values) / math.sqrt(len(values))


def _binary(values: Sequence[float]) -> bool:
    return bool(values) and all(v in (0.0, 1.0) for v in values)


@dataclass(frozen=True)
class PassSignal:
    """What counts as a pass: the episode reward when it is 0/1, else the first reward
    function whose scores are all 0/1. ``label`` names it in the report."""

    label: str
    passed: Callable[[EpisodeSummary], bool | None]


def pass_signal(episodes: Sequence[EpisodeSummary]) -> PassSignal | None:
    rewards = [e.reward for e in episodes if e.reward is not None]
    if _binary(rewards):
        return PassSignal("reward", lambda e: None if e.reward is None else e.reward == 1.0)
    for name in function_names(episodes):
        scores = [e.scores[name] for e in episodes if name in e.scores]
        if _binary(scores):
            return PassSignal(name, _score_passed(name))
    return None


def _score_passed(name: str) -> Callable[[EpisodeSummary], bool | None]:
    return lambda e: None if name not in e.scores else e.scores[name] == 1.0


def function_names(episodes: Sequence[EpisodeSummary]) -> list[str]:
    names: dict[str, None] = {}
    for episode in episodes:
        names.update(dict.fromkeys(episode.scores))
    return list(names)


@dataclass
class ExampleStats:
    rollouts: int
    scored: int
    mean: float | None
    passes: int | None  # rollouts that passed, when there is a pass signal
    judged: int  # rollouts the pass signal could judge
    errors: int
    se: float | None = None  # standard error of ``mean`` over the scored rollouts

    def pass_at(self, k: int) -> float | None:
        if self.passes is None or not 0 < k <= self.judged:
            return None
        return pass_at_k(self.judged, self.passes, k)


def by_example(
    episodes: Sequence[EpisodeSummary], signal: PassSignal | None
) -> dict[str, ExampleStats]:
    groups: dict[str, list[EpisodeSummary]] = {}
    for episode in episodes:
        groups.setdefault(episode.example.key, []).append(episode)
    stats = {}
    for key, group in groups.items():
        rewards = [e.reward for e in group if e.reward is not None]
        verdicts = [v for e in group if (v := signal.passed(e)) is not None] if signal else []
        stats[key] = ExampleStats(
            rollouts=len(group),
            scored=len(rewards),
            mean=fmean(rewards) if rewards else None,
            passes=sum(verdicts) if signal else None,
            judged=len(verdicts),
            errors=sum(1 for e in group if not e.ok),
            se=standard_error(rewards),
        )
    return stats


def typical_k(stats: dict[str, ExampleStats]) -> int:
    """The k for pass@k: the median number of judged rollouts per example (lower median),
    so a few examples with fewer rollouts do not pull it down to 1. Examples with fewer
    than k judged rollouts have no pass@k."""
    judged = [s.judged for s in stats.values() if s.judged]
    return median_low(judged) if judged else 0


def run_pass_at(stats: dict[str, ExampleStats], k: int) -> float | None:
    values = [v for s in stats.values() if (v := s.pass_at(k)) is not None]
    return fmean(values) if values else None


def reward_functions(episodes: Sequence[EpisodeSummary]) -> list[dict[str, Any]]:
    """Per reward function of the summary traces: weight, mean raw score, how many scored."""
    rows = []
    for name in function_names(episodes):
        scores = [e.scores[name] for e in episodes if name in e.scores]
        weights = [e.weights[name] for e in episodes if name in e.weights]
        rows.append(
            {
                "name": name,
                "weight": weights[0] if weights and len(set(weights)) == 1 else None,
                "mean": fmean(scores),
                "se": standard_error(scores),
                "scored": len(scores),
                "binary": _binary(scores),
            }
        )
    return rows


def metric_means(episodes: Sequence[EpisodeSummary]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for episode in episodes:
        for name, value in episode.metrics.items():
            sums.setdefault(name, []).append(value)
    return {name: fmean(values) for name, values in sums.items()}


def metric_errors(episodes: Sequence[EpisodeSummary]) -> dict[str, float | None]:
    """The standard error beside each of :func:`metric_means`."""
    sums: dict[str, list[float]] = {}
    for episode in episodes:
        for name, value in episode.metrics.items():
            sums.setdefault(name, []).append(value)
    return {name: standard_error(values) for name, values in sums.items()}


def reward_mean(episodes: Sequence[EpisodeSummary]) -> dict[str, Any]:
    """The mean episode reward of a run, its standard error and how many were scored."""
    rewards = [e.reward for e in episodes if e.reward is not None]
    return {
        "mean": fmean(rewards) if rewards else None,
        "se": standard_error(rewards),
        "n": len(rewards),
    }


def error_groups(episodes: Sequence[EpisodeSummary]) -> list[dict[str, Any]]:
    """Errors grouped by type and first message line: how many episodes each hit, and the
    positions of the first few of them."""
    groups: dict[tuple[str, str], list[int]] = {}
    for position, episode in enumerate(episodes):
        for pair in episode.errors:
            groups.setdefault(pair, []).append(position)
    rows: list[dict[str, Any]] = [
        {"type": kind, "message": message, "episodes": len(hits), "samples": hits[:ERROR_SAMPLES]}
        for (kind, message), hits in groups.items()
    ]
    rows.sort(key=lambda row: (-row["episodes"], row["type"], row["message"]))
    return rows


def stop_conditions(episodes: Sequence[EpisodeSummary]) -> list[list[Any]]:
    counts = Counter(e.stop or "(none)" for e in episodes)
    return [[name, n] for name, n in counts.most_common()]


def histogram(
    series: Sequence[Sequence[float]], bins: int = BINS, *, discrete: bool = True
) -> dict[str, Any]:
    """Counts per series over bins shared by all series. With ``discrete``, few distinct
    values get one bar each (``labels``); otherwise ``edges`` are ``bins`` equal-width
    intervals (one interval when every value is the same)."""
    values = [v for s in series for v in s]
    if not values:
        return {"labels": [], "edges": [], "counts": [[] for _ in series]}
    distinct = sorted(set(values))
    if discrete and len(distinct) <= DISCRETE_MAX:
        position = {v: i for i, v in enumerate(distinct)}
        counts = [[0] * len(distinct) for _ in series]
        for row, s in zip(counts, series, strict=True):
            for v in s:
                row[position[v]] += 1
        return {"labels": distinct, "edges": [], "counts": counts}
    low, high = distinct[0], distinct[-1]
    if high == low:
        return {"labels": [], "edges": [low, high], "counts": [[len(s)] for s in series]}
    width = (high - low) / bins
    counts = [[0] * bins for _ in series]
    for row, s in zip(counts, series, strict=True):
        for v in s:
            row[min(bins - 1, int((v - low) / width))] += 1
    return {"labels": [], "edges": [low + i * width for i in range(bins + 1)], "counts": counts}


def verdict(base: float | None, other: float | None) -> str:
    """How an example's mean reward moved from the baseline run to another run."""
    if base is None and other is None:
        return "unscored"
    if base is None:
        return "new"
    if other is None:
        return "missing"
    if other > base + SAME:
        return "better"
    if other < base - SAME:
        return "worse"
    return "same"

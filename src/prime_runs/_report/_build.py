"""The report's data: one JSON document the page renders, built from loaded runs.

Episodes are embedded as compact rows (``fields`` names the columns) for the tables, lists
and filters; charts arrive as precomputed histograms with bins shared across runs; full
conversations are embedded for the episode browser only up to ``budget`` bytes per report
(split evenly between runs). Examples are one list for all runs, so rows refer to them by
index and several runs line up example by example.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import prime_runs._report._stats as _stats
from prime_runs._configview import view as config_view
from prime_runs._report._browse import browse_order, episode_doc
from prime_runs._report._episode import EpisodeSummary, Example
from prime_runs._report._labels import name_tags
from prime_runs._report._load import LoadedRun, read_record
from prime_runs._report._training import training_doc
from prime_runs._version import __version__

DEFAULT_BUDGET = 12 * 1024 * 1024
EPISODE_FIELDS = (
    "id", "example", "reward", "ok", "stop", "error", "tokens", "duration", "traces",
    "turns", "started", "browse", "step", "policy", "lag",
)  # fmt: skip


# Input, target and output of the examples, in characters: 10,000 single-rollout examples
# would otherwise add up to 6 MB; past this, later examples show none (their episodes do).
IO_BUDGET = 2_000_000


class _Examples:
    """Every example seen in any run, in first-seen order."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []
        self.io_left = IO_BUDGET

    def add(self, example: Example, io: dict[str, list[str | None]]) -> int:
        """``io``: the run's input, target and output per example key; the first run that
        has an example gives its row these."""
        position = self.index.get(example.key)
        if position is None:
            position = self.index[example.key] = len(self.rows)
            given, target, output = io.get(example.key) or (None, None, None)
            self.io_left -= sum(len(text) for text in (given, target, output) if text)
            if self.io_left < 0:
                given = target = output = None
            self.rows.append(
                {
                    "key": example.key,
                    "name": example.name,
                    "idx": example.idx,
                    "env": example.env,
                    "input": given,
                    "target": target,
                    "output": output,
                }
            )
        return position


def build(runs: Sequence[LoadedRun], budget: int = DEFAULT_BUDGET) -> dict[str, Any]:
    examples = _Examples()
    run_docs = []
    stats_per_run = []
    for run in runs:
        stats, signal = _run_stats(run.episodes)
        stats_per_run.append(stats)
        run_docs.append(_run_doc(run, examples, stats, signal, budget // max(1, len(runs))))
    for doc, tag in zip(run_docs, name_tags([(d["id"], d["name"]) for d in run_docs]), strict=True):
        doc["tag"] = tag  # the page names the run "name (tag)" when another shares its name
    return {
        "generator": f"prime-runs {__version__}",
        "generated_at": time.time(),
        "examples": examples.rows,
        "runs": run_docs,
        "charts": _charts(runs),
        "comparison": _comparison(stats_per_run, examples) if len(runs) > 1 else None,
    }


def _run_stats(
    episodes: Sequence[EpisodeSummary],
) -> tuple[dict[str, _stats.ExampleStats], _stats.PassSignal | None]:
    signal = _stats.pass_signal(episodes)
    return _stats.by_example(episodes, signal), signal


def _run_doc(
    run: LoadedRun,
    examples: _Examples,
    stats: dict[str, _stats.ExampleStats],
    signal: _stats.PassSignal | None,
    budget: int,
) -> dict[str, Any]:
    episodes = run.episodes
    browse, browse_index = _embed(run, budget)
    k = _stats.typical_k(stats)
    rows = [
        _episode_row(e, examples.add(e.example, run.io), browse_index.get(i, -1))
        for i, e in enumerate(episodes)
    ]
    doc = _header(run)
    doc.update(
        counts=_counts(run, len(browse)),
        tokens=_token_totals(episodes),
        passing=_passing(stats, signal, k),
        reward=_stats.reward_mean(episodes),
        functions=_stats.reward_functions(episodes),
        metrics=_stats.metric_means(episodes),
        metrics_se=_stats.metric_errors(episodes),
        examples=[
            [
                examples.index[key],
                s.rollouts,
                s.mean,
                s.pass_at(1),
                s.pass_at(k) if k > 1 else None,
                s.errors,
                s.se,
            ]
            for key, s in stats.items()
        ],
        errors=_stats.error_groups(episodes),
        stops=_stats.stop_conditions(episodes),
        episodes={"fields": list(EPISODE_FIELDS), "rows": rows},
        browse=browse,
        training=training_doc(run),
    )
    return doc


def _header(run: LoadedRun) -> dict[str, Any]:
    info = run.info
    d = info.description
    summary = info.status_doc.get("summary")
    return {
        "id": info.run_id,
        "name": info.name,
        "kind": "train" if d.get("kind") == "train" else "eval",
        "model": d.get("model"),
        "environments": [str(e) for e in d.get("environments") or []],
        "framework": d.get("framework"),
        "description": d.get("description"),
        "tags": [str(t) for t in d.get("tags") or []],
        "config": config_view(d.get("config")).to_json(),
        "mode": info.mode,
        "status": info.status_label,
        "error": info.status_doc.get("error"),
        "created_at": d.get("created_at"),
        "finished_at": info.status_doc.get("finished_at"),
        "platform": info.platform or None,
        "pending": info.pending_text(),
        "summary": summary if isinstance(summary, dict) and summary else None,
        "computed_summary": run.computed_summary,
    }


def _counts(run: LoadedRun, embedded: int) -> dict[str, int]:
    episodes = run.episodes
    return {
        "records": len(episodes),
        "traces": sum(e.traces for e in episodes),
        "failed": sum(1 for e in episodes if not e.ok),
        "truncated": sum(1 for e in episodes if e.truncated),
        "unscored": sum(1 for e in episodes if e.reward is None),
        "bad_lines": run.bad_lines,
        "torn_lines": run.torn_lines,
        "links": len(run.info.links),
        "embedded": embedded,
    }


def _token_totals(episodes: Sequence[EpisodeSummary]) -> dict[str, int]:
    return {
        "in": sum(e.tokens_in or 0 for e in episodes),
        "out": sum(e.tokens_out or 0 for e in episodes),
        "total": sum(e.tokens_total or 0 for e in episodes),
    }


def _passing(
    stats: dict[str, _stats.ExampleStats], signal: _stats.PassSignal | None, k: int
) -> dict[str, Any] | None:
    if signal is None or not k:
        return None
    return {
        "label": signal.label,
        "k": k,
        "pass1": _stats.run_pass_at(stats, 1),
        "passk": _stats.run_pass_at(stats, k) if k > 1 else None,
        "examples": sum(1 for s in stats.values() if s.judged),
        "examples_k": sum(1 for s in stats.values() if s.judged >= k),
    }


def _episode_row(e: EpisodeSummary, example: int, browse: int) -> list[Any]:
    duration = round(e.duration, 3) if e.duration is not None else None
    work = e.work
    return [
        e.id, example, e.reward, e.ok, e.stop, e.error, e.tokens_total, duration, e.traces,
        e.turns, e.started, browse, work.step if work else None, work.policy if work else None,
        work.lag if work else None,
    ]  # fmt: skip


def _embed(run: LoadedRun, budget: int) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Conversations for as many episodes as fit in ``budget`` bytes of JSON."""
    docs: list[dict[str, Any]] = []
    index: dict[int, int] = {}
    spent = 0
    for position in browse_order(run.episodes):
        record = read_record(run.archive, run.keys[position])
        if record is None:
            continue
        try:
            doc = episode_doc(record)
            size = len(json.dumps(doc, ensure_ascii=False))
        except RecursionError:  # a value nested deeper than Python walks: not embedded
            continue
        if spent + size > budget:
            break
        spent += size
        index[position] = len(docs)
        docs.append(doc)
    return docs, index


def _charts(runs: Sequence[LoadedRun]) -> dict[str, Any]:
    def series(values: Any) -> list[list[float]]:
        return [[v for v in values(run.episodes) if v is not None] for run in runs]

    return {
        "reward": _stats.histogram(series(lambda es: (e.reward for e in es))),
        "tokens": _stats.histogram(series(lambda es: (e.tokens_total for e in es)), discrete=False),
        "duration": _stats.histogram(series(lambda es: (e.duration for e in es)), discrete=False),
        "latency": _stats.histogram(
            series(lambda es: (v for e in es for v in e.call_latencies)), discrete=False
        ),
        "turns": _stats.histogram(series(lambda es: (e.turns for e in es if e.traces))),
    }


def _comparison(
    stats_per_run: Sequence[dict[str, _stats.ExampleStats]], examples: _Examples
) -> dict[str, Any]:
    """Each later run against the first: per example, better, worse or the same mean."""
    base = stats_per_run[0]
    rows = []
    counts: list[dict[str, int]] = [{} for _ in stats_per_run[1:]]
    for key, position in examples.index.items():
        first = base.get(key)
        verdicts = []
        for i, other in enumerate(stats_per_run[1:]):
            theirs = other.get(key)
            v = _stats.verdict(first.mean if first else None, theirs.mean if theirs else None)
            verdicts.append(v)
            counts[i][v] = counts[i].get(v, 0) + 1
        rows.append([position, *verdicts])
    return {"baseline": 0, "rows": rows, "counts": counts}

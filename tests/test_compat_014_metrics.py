"""prime-runs 0.1.4 code against our ``prime_runs.metrics`` (issue 24): its names and
signature, the summary's shape, and the aggregation rules of the contract (section 7) on the
objects 0.1.4's callers pass. Expected numbers are worked out by hand in each test."""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

import pytest

from _compat_014 import METRICS_014, Reward, episode, trace
from prime_runs import metrics
from prime_runs.metrics import RunSummary, from_episodes


def test_from_episodes_takes_014s_arguments_and_runsummary_its_keys() -> None:
    for name, theirs in METRICS_014.items():
        parameters = inspect.signature(getattr(metrics, name)).parameters.values()
        assert [(p.name, p.kind, p.default) for p in parameters] == theirs
        assert name in metrics.__all__
    assert "RunSummary" in metrics.__all__
    hints = get_type_hints(RunSummary)
    assert hints == {"avg_reward": float, "avg_metrics": dict[str, float], "avg_error": float}


def test_only_trainable_traces_are_scored() -> None:
    ep = episode("e", trace("s", reward=1.0), trace("j", agent="judge", trainable=False, reward=0))
    assert from_episodes([ep]) == {"avg_reward": 1.0, "avg_metrics": {}, "avg_error": 0.0}


def test_every_trace_counts_when_none_is_trainable() -> None:
    a, b = trace("a", trainable=False, reward=1.0), trace("b", trainable=False, reward=0.0)
    ep = episode("e", a, b)
    assert from_episodes([ep])["avg_reward"] == 0.5


def test_sub_reward_scores_and_metrics_average_per_name_over_the_traces_that_have_them() -> None:
    episodes = [
        episode("e1", trace(rewards={"format": Reward(1.0), "skip": None}, metrics={"turns": 4})),
        episode("e2", trace(rewards={"format": Reward(0.0)}, metrics={"turns": 6, "p": 1.0})),
        episode("e3", trace(rewards={"p": Reward(0.25)}, metrics={"p": None, "turns": 8})),
    ]
    # format: (1 + 0) / 2; turns: (4 + 6 + 8) / 3; p: the metric 1.0 and the score 0.25 (a
    # null metric does not hide the sub-reward). "skip" is null everywhere: no entry.
    expected = {"format": 0.5, "turns": 6.0, "p": 0.625}
    assert from_episodes(episodes)["avg_metrics"] == expected


def test_a_metric_wins_over_a_sub_reward_of_the_same_name_and_counts_once() -> None:
    episodes = [episode("e", trace(rewards={"x": Reward(0.0)}, metrics={"x": 1.0}))]
    assert from_episodes(episodes)["avg_metrics"] == {"x": 1.0}


def test_avg_error_is_the_share_of_episodes_not_ok_including_empty_ones() -> None:
    episodes = [
        episode("ok", trace(), trace("t2"), ok=True),
        episode("broken", ok=False),
        episode("failed", trace(reward=0.0), ok=False),
        episode("fine", trace(), ok=True),
    ]
    summary = from_episodes(episodes)
    assert summary["avg_error"] == 0.5
    assert summary["avg_reward"] == pytest.approx(3 / 4)  # four traces: 1, 1, 0, 1


def test_traces_given_positionally_replace_the_candidates() -> None:
    episodes = [episode("e1", trace(reward=1.0), ok=False), episode("e2", trace(reward=1.0))]
    chosen = [trace("x", reward=0.25), trace("y", reward=0.75, metrics={"m": 2.0})]

    summary = from_episodes(episodes, chosen)

    assert summary == {"avg_reward": 0.5, "avg_metrics": {"m": 2.0}, "avg_error": 0.5}


def test_an_empty_run_is_zeros_not_a_division_by_zero() -> None:
    assert from_episodes([]) == {"avg_reward": 0.0, "avg_metrics": {}, "avg_error": 0.0}
    assert from_episodes([], []) == {"avg_reward": 0.0, "avg_metrics": {}, "avg_error": 0.0}


def test_objects_and_their_records_give_the_same_summary() -> None:
    # 0.1.4 read only objects; a record mapping of the same run must not change the numbers.
    objects = [
        episode("e1", trace(reward=0.5, rewards={"f": Reward(0.5)}, metrics={"n": 3})),
        episode(
            "e2",
            trace(trainable=False, reward=0.0),
            trace(reward=1.0, rewards={"r": Reward(2.0)}),  # weight 0.5 in the record
            ok=False,
        ),
    ]
    records: list[dict[str, Any]] = [
        {
            "id": "e1",
            "ok": True,
            "traces": [{"rewards": {"f": {"score": 0.5, "weight": 1.0}}, "metrics": {"n": 3}}],
        },
        {
            "id": "e2",
            "ok": False,
            "traces": [
                {"agent": {"trainable": False}, "rewards": {}},
                {"rewards": {"r": {"score": 2.0, "weight": 0.5}}},
            ],
        },
    ]
    expected = {"avg_reward": 0.75, "avg_metrics": {"f": 0.5, "n": 3.0, "r": 2.0}, "avg_error": 0.5}
    assert from_episodes(records) == expected
    assert from_episodes(objects) == expected

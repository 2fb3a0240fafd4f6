"""The run summary (contract: summary metrics computed from episodes) and its incremental
accumulator."""

from __future__ import annotations

import copy
import json
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from _support import load_jsonl
from prime_runs.metrics import SummaryAccumulator, from_encoded, from_episodes

FIXTURE_FILES = ["episodes.jsonl", "edge_episodes.jsonl", "train_episodes.jsonl"]


def _trace(
    *,
    trainable: bool = True,
    rewards: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    ok: bool = True,
) -> dict[str, Any]:
    return {
        "id": "t",
        "agent": {"name": "a", "trainable": trainable},
        "rewards": rewards or {},
        "metrics": metrics or {},
        "ok": ok,
    }


def _episode(*traces: dict[str, Any], ok: bool = True) -> dict[str, Any]:
    return {"id": "e", "ok": ok, "traces": list(traces)}


def _r(score: float, weight: float = 1.0) -> dict[str, float]:
    return {"score": score, "weight": weight}


# Duck-typed verifiers objects: properties where verifiers has properties.
def _as_object(episode: dict[str, Any]) -> SimpleNamespace:
    def trace(record: dict[str, Any]) -> SimpleNamespace:
        rewards = {
            name: None if value is None else SimpleNamespace(**value)
            for name, value in record.get("rewards", {}).items()
        }
        return SimpleNamespace(
            agent=SimpleNamespace(**record["agent"]),
            rewards=rewards,
            metrics=dict(record.get("metrics", {})),
            reward=sum(r.score * r.weight for r in rewards.values() if r is not None),
        )

    return SimpleNamespace(ok=episode["ok"], traces=[trace(t) for t in episode["traces"]])


def test_two_hand_written_episodes() -> None:
    episodes = [
        _episode(
            _trace(rewards={"exact": _r(1.0), "style": _r(0.5, 0.5)}, metrics={"turns": 3.0}),
            _trace(trainable=False, rewards={"exact": _r(0.0)}, metrics={"turns": 100.0}),
        ),
        _episode(
            _trace(rewards={"exact": _r(0.0), "style": None}, metrics={"turns": 1.0}),
            ok=False,
        ),
    ]
    expected = {
        # The judge-like untrainable trace is left out of every mean.
        "avg_reward": (1.0 + 0.25 + 0.0) / 2,
        "avg_metrics": {"exact": 0.5, "style": 0.5, "turns": 2.0},
        "avg_error": 0.5,
    }
    assert from_episodes(episodes) == expected
    assert from_episodes([_as_object(e) for e in episodes]) == expected


def test_all_traces_count_when_none_is_trainable() -> None:
    episodes = [
        _episode(_trace(trainable=False, rewards={"x": _r(1.0)})),
        _episode(_trace(trainable=False, rewards={"x": _r(0.0)})),
    ]
    assert from_episodes(episodes) == {
        "avg_reward": 0.5,
        "avg_metrics": {"x": 0.5},
        "avg_error": 0.0,
    }


def test_a_metric_wins_over_a_sub_reward_of_the_same_name_and_counts_once() -> None:
    episodes = [
        _episode(_trace(rewards={"x": _r(1.0)}, metrics={"x": 0.0})),
        _episode(_trace(rewards={"x": _r(1.0)}, metrics={"x": None})),  # null: the score counts
    ]
    summary = from_episodes(episodes)
    assert summary["avg_metrics"] == {"x": (0.0 + 1.0) / 2}
    assert summary["avg_reward"] == 1.0  # avg_reward still uses the weighted rewards


def test_each_name_averages_over_the_traces_that_have_it() -> None:
    episodes = [
        _episode(_trace(metrics={"a": 1.0, "b": None}), _trace(metrics={"a": 3.0, "b": 4.0})),
        _episode(_trace(rewards={"c": None})),
    ]
    assert from_episodes(episodes)["avg_metrics"] == {"a": 2.0, "b": 4.0}


def test_avg_error_counts_episodes_including_those_without_traces() -> None:
    episodes = [
        _episode(_trace(ok=False)),  # a failed trace does not make its episode fail
        _episode(ok=False),  # failed before any trace existed
        _episode(_trace(), ok=False),
        _episode(_trace()),
    ]
    assert from_episodes(episodes)["avg_error"] == 2 / 4
    edge = load_jsonl("edge_episodes.jsonl")  # env hook failure, empty failure, timeout, max_turns
    assert from_episodes(edge)["avg_error"] == 2 / 4


def test_explicit_traces_replace_the_candidates() -> None:
    episodes = [_episode(_trace(rewards={"x": _r(1.0)}), ok=False), _episode()]
    other = [_trace(rewards={"x": _r(0.0)}), _trace(trainable=False, rewards={"x": _r(9.0)})]
    assert from_episodes(episodes, traces=other) == {
        "avg_reward": 0.0,
        "avg_metrics": {"x": 0.0},
        "avg_error": 0.5,
    }


def test_empty_run() -> None:
    empty = {"avg_reward": 0.0, "avg_metrics": {}, "avg_error": 0.0}
    assert from_episodes([]) == empty
    assert SummaryAccumulator().result() == empty


def test_user_sim_run_scores_only_the_assistant() -> None:
    run = load_jsonl("episodes.jsonl")[12:16]
    assistants = [t for e in run for t in e["traces"] if t["agent"]["name"] == "assistant"]
    assert len(assistants) == 4 and all(t["agent"]["trainable"] for t in assistants)
    rewards = [sum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in assistants]
    summary = from_episodes(run)
    assert summary["avg_reward"] == pytest.approx(sum(rewards) / 4)
    assert summary["avg_metrics"]["user_turns"] == 2.0
    assert summary["avg_error"] == 0.0


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_fixture_runs_match_the_rules(name: str) -> None:
    episodes = load_jsonl(name)
    traces = [t for e in episodes for t in e["traces"]]
    scored = [t for t in traces if t["agent"]["trainable"]] or traces
    values: dict[str, list[float]] = {}
    for t in scored:
        named = {n: r["score"] for n, r in t.get("rewards", {}).items() if r is not None}
        named.update({n: v for n, v in t.get("metrics", {}).items() if v is not None})
        for n, v in named.items():
            values.setdefault(n, []).append(v)
    rewards = [sum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in scored]
    summary = from_episodes(episodes)
    assert summary["avg_reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert summary["avg_metrics"] == pytest.approx({n: sum(v) / len(v) for n, v in values.items()})
    assert summary["avg_error"] == sum(not e["ok"] for e in episodes) / len(episodes)
    assert from_episodes([_as_object(e) for e in episodes]) == summary


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_accumulator_equals_from_episodes(name: str) -> None:
    episodes = load_jsonl(name)
    accumulator = SummaryAccumulator()
    for episode in episodes:
        accumulator.add(episode)
    assert accumulator.result() == from_episodes(episodes)


def test_bare_traces_count_as_their_own_units() -> None:
    bare = load_jsonl("traces.jsonl")  # lines 1-4: run 3's traces; 6: a non-trainable user trace
    accumulator = SummaryAccumulator()
    for trace in bare:
        accumulator.add(trace)
    summary = from_episodes(bare)
    assert accumulator.result() == summary
    trainable = [t for t in bare if t["agent"]["trainable"]]
    assert summary["avg_reward"] == pytest.approx(
        sum(sum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in trainable)
        / len(trainable)
    )
    assert summary["avg_error"] == sum(not t["ok"] for t in bare) / len(bare)


def test_accumulator_is_unchanged_by_a_malformed_record() -> None:
    accumulator = SummaryAccumulator()
    accumulator.add(_episode(_trace(rewards={"x": _r(1.0)})))
    before = accumulator.result()
    broken = _episode(_trace(rewards={"x": _r(1.0)}), _trace(rewards={"x": {"score": "high"}}))
    assert accumulator.add(broken) is False  # left out whole and counted, never raised
    assert accumulator.result() == before
    assert accumulator.skipped == 1


def test_accumulator_is_thread_safe() -> None:
    # Exactly representable values, so the sums do not depend on the order of adds.
    episodes = [
        _episode(_trace(rewards={"x": _r(i % 4 / 4)}, metrics={"m": float(i)}), ok=i % 3 != 0)
        for i in range(400)
    ]
    accumulator = SummaryAccumulator()

    def feed(part: list[dict[str, Any]]) -> None:
        for episode in part:
            accumulator.add(episode)

    threads = [threading.Thread(target=feed, args=(episodes[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert accumulator.result() == from_episodes(episodes)


def test_inputs_are_not_modified() -> None:
    episodes = load_jsonl("episodes.jsonl")
    pristine = copy.deepcopy(episodes)
    from_episodes(episodes)
    SummaryAccumulator().add(episodes[0])
    assert episodes == pristine


@pytest.mark.parametrize(
    "trace",
    [
        _trace(rewards={"x": _r(10**400)}),
        _trace(rewards={"x": _r(1.0)}, metrics={"m": 10**400}),
        _trace(rewards={"x": _r(1.0)}, metrics={"m": "high"}),
    ],
)
def test_numbers_a_float_cannot_hold_are_left_out_not_fatal(trace: dict[str, Any]) -> None:
    good = _episode(_trace(rewards={"x": _r(0.5)}, metrics={"m": 2.0}))
    expected = from_episodes([good])
    assert from_episodes([good, _episode(trace)]) == expected
    encoded = [json.dumps(good).encode(), json.dumps(_episode(trace)).encode()]
    assert from_encoded(encoded) == expected
    accumulator = SummaryAccumulator()
    assert accumulator.add(good) and not accumulator.add(_episode(trace))
    assert accumulator.result() == expected and accumulator.skipped == 1


def test_integer_rewards_whose_sum_overflows_give_a_non_finite_mean_not_an_error() -> None:
    big = [_episode(_trace(rewards={"x": _r(10**308)})) for _ in range(3)]
    small = _episode(_trace(rewards={"x": _r(0.5)}))
    summary = from_episodes([*big, small])
    assert summary["avg_reward"] == float("inf")


def test_merge_adds_another_accumulators_records() -> None:
    episodes = [
        _episode(_trace(rewards={"x": _r(i / 4)}, metrics={"m": float(i)})) for i in range(8)
    ]
    first, second = SummaryAccumulator(), SummaryAccumulator()
    for episode in episodes[:5]:
        first.add(episode)
    for episode in episodes[5:]:
        second.add(episode)
    second.add({"traces": "not a list", "ok": True})
    first.merge(second)
    assert first.result() == from_episodes(episodes) and first.skipped == 1


def test_encoded_records_read_as_json_loads_reads_them() -> None:
    # Journal lines are decoded by orjson where it reads them exactly; an integer beyond 64
    # bits (orjson would make it a float) and a NaN literal are read as json.loads reads them.
    episodes = [
        _episode(_trace(rewards={"x": _r(2**70 + 1, 1)})),
        _episode(_trace(rewards={"x": _r(-(2**70), 1)})),
    ]
    encoded = [json.dumps(episode).encode() for episode in episodes]
    assert from_encoded(encoded) == from_episodes(episodes)
    assert from_encoded(encoded)["avg_reward"] == 0.5  # (2**70 + 1 - 2**70) / 2, exactly
    nan = json.dumps(_episode(_trace(rewards={"x": _r(float("nan"), 1)}))).encode()
    assert b"NaN" in nan
    summary = from_encoded([nan])
    assert summary["avg_reward"] != summary["avg_reward"]  # NaN, as json.loads reads it


def test_journal_lines_are_read_for_their_numbers_without_a_whole_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The owner's finish() reads every worker's line back: only the fields the summary
    # reads are built, and the numbers are those a whole decode gives, bit for bit.
    records = [r for name in FIXTURE_FILES for r in load_jsonl(name)] + load_jsonl("traces.jsonl")
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() for r in records]
    expected = from_episodes(json.loads(line) for line in lines)
    import prime_runs.metrics as metrics

    def whole(data: bytes) -> Any:
        raise AssertionError("a journal line of plain numbers was decoded whole")

    monkeypatch.setattr(metrics, "decode_record", whole)
    accumulator = SummaryAccumulator()
    assert all(accumulator.add_encoded(line) for line in lines)
    assert accumulator.result() == expected and accumulator.skipped == 0
    # A large line too: its long strings are parsed, never built, and its text is checked
    # a MiB at a time, here with a character across the first boundary.
    large = copy.deepcopy(records[0])

    def line_with(pad: int) -> bytes:
        content = "x" * pad + "é" + "x" * (4 * 1024 * 1024)
        large["traces"][0]["nodes"] = [{"message": {"content": content}}]
        return json.dumps(large, ensure_ascii=False).encode()

    line = line_with(0)
    line = line_with(1024 * 1024 - 1 - line.index("é".encode()))
    assert line.index("é".encode()) == 1024 * 1024 - 1
    before = copy.deepcopy(accumulator.result())
    assert accumulator.add_encoded(line)
    assert accumulator.result() != before and accumulator.skipped == 0


@pytest.mark.parametrize(
    ("message", "counted"),
    [
        (b'"caf\xc3\xa9"', True),  # valid UTF-8
        (b'"caf\xe9"', False),  # not UTF-8: json.loads refuses the line, so it is left out
        (b'"\\ud83d\\ude00"', True),  # a surrogate pair, escaped
        (b'"\\ud800"', True),  # a lone surrogate escape: json.loads reads it
        (b'"' + b"x" * (4 * 1024 * 1024) + b'"', True),  # a line above the large-line bound
        # Text checked a MiB at a time: a bad byte at the boundary.
        (b'"' + b"x" * (1024 * 1024 - 137) + b"\xc3" + b'x"', False),
        (b"NaN", True),  # a NaN literal where the summary does not look
    ],
)
def test_a_line_the_partial_read_cannot_judge_is_judged_as_a_whole_decode_judges_it(
    message: bytes, counted: bool
) -> None:
    line = (
        b'{"id":"e","ok":true,"traces":[{"id":"t","rewards":{"x":{"score":0.25,"weight":1.0}},'
        b'"metrics":{"m":2.0},"nodes":[{"message":{"content":' + message + b"}}]}]}"
    )
    accumulator = SummaryAccumulator()
    assert accumulator.add_encoded(line) is counted
    assert accumulator.skipped == (0 if counted else 1)
    if counted:
        assert accumulator.result() == from_episodes([json.loads(line)])

"""The report's figures, computed from real verifiers records: episode summaries, pass@k,
per-example grouping, error and stop grouping, shared histogram bins, comparisons and the
episode browser's conversations and embedding budget."""

from __future__ import annotations

import copy
import json
import math
from statistics import fmean

import pytest

from _support import load_jsonl
from prime_runs._report import _browse, _stats
from prime_runs._report._episode import summarize


def _first_trainable(traces: list[dict]) -> dict:
    return next((t for t in traces if t.get("agent", {}).get("trainable", True)), traces[0])


def _weighted(trace: dict) -> float:
    return sum(r["score"] * r.get("weight", 1.0) for r in trace["rewards"].values() if r)


def test_an_episode_is_summarized_from_its_first_trainable_trace():
    records = load_jsonl("episodes.jsonl")
    user_sim = next(r for r in records if r["env"]["id"].startswith("user-sim"))
    summary = summarize(user_sim)
    chosen = _first_trainable(user_sim["traces"])
    assert chosen["agent"]["name"] == "assistant"  # not the simulated user
    assert summary.reward == _weighted(chosen)
    assert summary.scores == {k: v["score"] for k, v in chosen["rewards"].items()}
    assert summary.weights == {k: v["weight"] for k, v in chosen["rewards"].items()}
    assert summary.stop == chosen["stop_condition"]
    assert summary.traces == 2 and summary.agents == ["assistant", "user"]
    assert summary.example.key == user_sim["task"]["key"]
    assert summary.example.name == user_sim["task"]["data"]["name"]
    assert summary.tokens_total == user_sim["num_total_tokens"]
    assert summary.turns == sum(1 for n in chosen["nodes"] if n.get("sampled"))
    starts = [t["timing"]["start"] for t in user_sim["traces"]]
    phases = [p for t in user_sim["traces"] for p in t["timing"].values() if isinstance(p, dict)]
    ends = [p["end"] for p in phases if p.get("end")]
    assert summary.started == min(starts)
    assert summary.duration == pytest.approx(max(ends) - min(starts))
    calls = [c["time"] for t in user_sim["traces"] for c in t["calls"]]
    assert sorted(summary.call_latencies) == sorted(c["end"] - c["start"] for c in calls)


def test_edge_episodes_no_traces_episode_error_timeout_and_truncation():
    env_error, no_traces, timeout, max_turns = (
        summarize(r) for r in load_jsonl("edge_episodes.jsonl")
    )
    assert not env_error.ok and env_error.errors[0][0] == "EnvError"
    assert no_traces.traces == 0 and no_traces.reward is None and no_traces.duration is None
    assert no_traces.errors[0][0] == "SandboxError" and no_traces.error.startswith("SandboxError")
    assert timeout.ok and timeout.stop == "agent_timeout" and not timeout.truncated
    assert max_turns.stop == "max_turns" and max_turns.truncated


def test_a_bare_trace_reads_as_a_one_trace_episode():
    trace = load_jsonl("traces.jsonl")[0]
    summary = summarize(trace)
    assert summary.id == trace["id"] and summary.traces == 1
    assert summary.reward == _weighted(trace)


def test_odd_shapes_never_raise():
    for record in ({}, {"traces": "x"}, {"traces": [1, None]}, {"task": 3, "rewards": []}):
        summary = summarize(record)
        assert summary.reward is None or isinstance(summary.reward, float)
    nan = summarize(
        {"id": "n", "rewards": {"r": {"score": float("nan")}}, "metrics": {"m": math.inf}}
    )
    assert nan.scores == {} and nan.metrics == {}


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [(4, 2, 1, 0.5), (4, 2, 2, 1 - 1 / 6), (4, 0, 3, 0.0), (4, 3, 2, 1.0), (5, 1, 5, 1.0)],
)
def test_pass_at_k_is_the_unbiased_estimate(n, c, k, expected):
    assert _stats.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_refuses_k_beyond_n():
    with pytest.raises(ValueError, match="k=3, n=2"):
        _stats.pass_at_k(2, 1, 3)


def _binary_run(rewards_per_example: dict[str, list[float]]) -> list:
    base = load_jsonl("episodes.jsonl")[-4]  # a one-trace episode
    episodes = []
    for key, rewards in rewards_per_example.items():
        for i, value in enumerate(rewards):
            record = copy.deepcopy(base)
            record["id"] = f"{key}-{i}"
            record["task"]["key"] = key
            record["traces"][0]["rewards"] = {"correct": {"score": value, "weight": 1.0}}
            episodes.append(summarize(record))
    return episodes


def test_per_example_pass_at_k_with_0_1_rewards():
    episodes = _binary_run({"a": [1, 0, 0, 1], "b": [0, 0, 0, 0], "c": [1, 1, 1], "d": [1]})
    signal = _stats.pass_signal(episodes)
    assert signal is not None and signal.label == "reward"
    stats = _stats.by_example(episodes, signal)
    assert [stats[k].rollouts for k in "abcd"] == [4, 4, 3, 1]
    assert stats["a"].mean == 0.5 and stats["a"].passes == 2
    k = _stats.typical_k(stats)
    assert k == 3  # lower median of 4, 4, 3, 1: one thin example does not force k=1
    assert stats["a"].pass_at(3) == pytest.approx(1 - math.comb(2, 3) / math.comb(4, 3))
    assert stats["d"].pass_at(3) is None
    assert _stats.run_pass_at(stats, 1) == pytest.approx(fmean([0.5, 0.0, 1.0, 1.0]))
    assert _stats.run_pass_at(stats, 3) == pytest.approx(fmean([1.0, 0.0, 1.0]))


def test_pass_signal_falls_back_to_a_0_1_reward_function(episodes):
    summaries = [summarize(e) for e in episodes]
    signal = _stats.pass_signal(summaries)
    assert signal is not None and signal.label == "exact"  # rewards are 0/0.25/1.5, exact is 0/1
    stats = _stats.by_example(summaries, signal)
    greet = stats["prfix:prfix-0001"]
    exact = [_first_trainable(e["traces"])["rewards"]["exact"]["score"] for e in episodes
             if e["task"]["key"] == "prfix:prfix-0001"]  # fmt: skip
    assert (greet.judged, greet.passes) == (len(exact), sum(exact))


def test_no_pass_signal_without_0_1_scores():
    episodes = _binary_run({"a": [0.5, 1.0]})
    assert _stats.pass_signal(episodes) is None
    assert _stats.by_example(episodes, None)["a"].pass_at(1) is None


def test_examples_are_grouped_by_task_key_with_means_and_failures(episodes):
    stats = _stats.by_example([summarize(e) for e in episodes], None)
    keys = {e["task"]["key"] for e in episodes}
    assert set(stats) == keys  # idx repeats across environments; the key does not
    for key in keys:
        group = [e for e in episodes if e["task"]["key"] == key]
        assert stats[key].rollouts == len(group)
        assert stats[key].mean == pytest.approx(
            fmean(_weighted(_first_trainable(e["traces"])) for e in group)
        )
        assert stats[key].errors == sum(1 for e in group if not e["ok"])


def test_errors_and_stop_conditions_are_grouped(episodes):
    summaries = [summarize(e) for e in episodes + load_jsonl("edge_episodes.jsonl")]
    groups = _stats.error_groups(summaries)
    provider = groups[0]
    failing = [i for i, e in enumerate(episodes) if not e["ok"]]
    assert provider["type"] == "ProviderError" and provider["episodes"] == len(failing)
    assert provider["samples"] == failing[: _stats.ERROR_SAMPLES]
    assert {g["type"] for g in groups} >= {"EnvError", "SandboxError"}
    stops = dict(_stats.stop_conditions(summaries))
    assert stops["provider_error"] == len(failing)
    assert stops["(none)"] == 1  # the episode without traces
    assert sum(stops.values()) == len(summaries)


def test_histograms_share_bins_across_runs():
    discrete = _stats.histogram([[0, 1, 1], [1, 0.5]])
    assert discrete["labels"] == [0, 0.5, 1]
    assert discrete["counts"] == [[1, 0, 2], [0, 1, 1]]
    values = [float(i) for i in range(40)]
    binned = _stats.histogram([values, [39.0]], bins=4)
    assert binned["edges"] == [0.0, 9.75, 19.5, 29.25, 39.0]
    assert binned["counts"] == [[10, 10, 10, 10], [0, 0, 0, 1]]
    assert _stats.histogram([[], []])["counts"] == [[], []]
    # Continuous figures (tokens, seconds) are always binned, even with few distinct values.
    tokens = _stats.histogram([[40, 41, 226]], bins=2, discrete=False)
    assert tokens["labels"] == [] and tokens["edges"] == [40, 133, 226]
    assert tokens["counts"] == [[2, 1]]
    same = _stats.histogram([[3.0, 3.0], [3.0]], discrete=False)
    assert same == {"labels": [], "edges": [3.0, 3.0], "counts": [[2], [1]]}


@pytest.mark.parametrize(
    ("base", "other", "expected"),
    [(0.5, 0.75, "better"), (0.5, 0.25, "worse"), (0.5, 0.5, "same"), (None, 1.0, "new"),
     (1.0, None, "missing")],
)  # fmt: skip
def test_verdicts(base, other, expected):
    assert _stats.verdict(base, other) == expected


def test_the_browser_sees_the_conversation_tool_calls_and_errors(episodes):
    tool = next(e for e in episodes if e["task"]["data"]["name"] == "notes-tool")
    doc = _browse.episode_doc(tool)
    trace = doc["traces"][0]
    assert trace["summary"] and not doc["traces"][1]["summary"]
    messages = trace["branches"][-1]
    raw = [n["message"] for n in tool["traces"][0]["nodes"]]
    assert [m["role"] for m in messages] == [m["role"] for m in raw]
    call = next(m for m in raw if m.get("tool_calls"))["tool_calls"][0]
    shown = next(m for m in messages if m.get("tool_calls"))["tool_calls"][0]
    assert (shown["name"], shown["arguments"]) == (call["name"], call["arguments"])
    result = next(m for m in messages if m["role"] == "tool")
    assert result["tool_call_id"] == call["id"]
    failed = _browse.episode_doc(next(e for e in episodes if not e["ok"]))
    assert failed["traces"][0]["errors"][0]["type"] == "ProviderError"
    assert failed["traces"][0]["branches"] == []


def test_long_content_is_cut_with_a_note():
    text = "x" * (_browse.TEXT_LIMIT + 10)
    parts = [{"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": text}]
    doc = _browse.message({"role": "user", "content": parts})
    assert doc["content"].startswith("[image]\nxxx")
    # "[image]" and the newline push 18 characters past the limit.
    assert doc["content"].endswith("\n… [18 more characters not embedded in the report]")


def test_browse_order_lets_every_example_take_turns_failed_first():
    episodes = _binary_run({"a": [1, 1, 1], "b": [1], "c": [1, 1]})
    episodes[2].ok = False
    order = _browse.browse_order(episodes)
    assert order == [2, 3, 4, 0, 5, 1]
    assert json.dumps(order)  # positions, ready to embed


def test_a_standard_error_is_the_sample_deviation_over_the_root_of_n():
    assert _stats.standard_error([1.0]) is None  # no spread from one value
    assert _stats.standard_error([]) is None
    assert _stats.standard_error([0.0, 1.0]) == pytest.approx(0.5)
    values = [0.0, 1.0, 1.0, 1.0]
    sd = math.sqrt(sum((v - 0.75) ** 2 for v in values) / 3)
    assert _stats.standard_error(values) == pytest.approx(sd / 2)
    summaries = [summarize(e) for e in load_jsonl("episodes.jsonl")]
    doc = _stats.reward_mean(summaries)
    rewards = [s.reward for s in summaries if s.reward is not None]
    assert doc == {"mean": fmean(rewards), "se": _stats.standard_error(rewards), "n": len(rewards)}


def test_input_target_output_come_from_the_summary_trace():
    episode = load_jsonl("episodes.jsonl")[0]
    messages = [n["message"] for n in episode["traces"][0]["nodes"]]
    given, target, output = _browse.input_target_output(episode)
    assert given == next(m["content"] for m in messages if m["role"] == "user")
    assert target == episode["task"]["data"]["answer"]
    assert output == [m["content"] for m in messages if m["role"] == "assistant"][-1]
    bare = {"id": "t", "timing": {"start": 1.0}}
    assert _browse.input_target_output(bare) == [None, None, None]
    long = copy.deepcopy(episode)
    long["task"]["data"]["answer"] = "y" * 2_000
    assert len(_browse.input_target_output(long)[1]) < _browse.IO_LIMIT + 100  # folded


def test_input_target_output_stop_at_their_budget(monkeypatch):
    from prime_runs._report import _build

    episodes = load_jsonl("episodes.jsonl")
    io: dict[str, list[str | None]] = {}
    for episode in episodes:
        io.setdefault(summarize(episode).example.key, _browse.input_target_output(episode))
    first = next(iter(io.values()))
    monkeypatch.setattr(_build, "IO_BUDGET", sum(len(t) for t in first if t) + 1)
    examples = _build._Examples()
    for episode in episodes:
        examples.add(summarize(episode).example, io)

    shown = [row for row in examples.rows if row["input"] or row["target"] or row["output"]]
    assert len(shown) == 1 and len(examples.rows) > 1

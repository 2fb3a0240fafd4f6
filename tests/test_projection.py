"""The v0 sample projection: golden rows from prime-runs 0.1.4, both input kinds (record
mappings and duck-typed objects), the encode-once bytes path, and the edge rules."""

from __future__ import annotations

import copy
import json
import logging
import math
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from _support import load_jsonl
from prime_runs import projection
from prime_runs._records.jsonio import encode_json, encode_json_lenient, sanitize_nonfinite
from prime_runs.projection import build_samples, project_episode_bytes, trace_to_sample

EPISODES = load_jsonl("episodes.jsonl")
GOLDEN = load_jsonl("samples_v0.jsonl")
# samples_v0.jsonl was made by one build_samples call per group (numbering restarts per call):
# run 3 (lines 17-20), the first two episodes of run 2 (13-14), run 1's notes-tool episodes (7-8).
GROUPS = [EPISODES[16:20], EPISODES[12:14], EPISODES[6:8]]


def _roundtrip(value: Any) -> Any:
    return json.loads(encode_json(value))


# --- duck-typed stand-ins for verifiers objects ------------------------------------------
# They expose the properties verifiers' Trace/Episode have, with pydantic values where
# verifiers has models, so the projection must dump them rather than read mappings.


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class Reward(BaseModel):
    score: float
    weight: float = 1.0


class FakeTrace:
    def __init__(self, record: dict[str, Any]) -> None:
        self._record = record
        self.id = record["id"]
        self.task = SimpleNamespace(data=Loose(**record["task"]["data"]))
        agent = record.get("agent", {})
        self.agent = SimpleNamespace(name=agent.get("name", "agent"), trainable=agent["trainable"])
        self.tools = [Loose(**tool) for tool in record.get("tools", [])]
        self.rewards = {
            name: None if value is None else Reward(**value)
            for name, value in record.get("rewards", {}).items()
        }
        self.metrics = dict(record.get("metrics", {}))
        self.info = dict(record.get("info", {}))
        self.timing = Loose(**record["timing"])
        self.is_completed = record["is_completed"]
        self.stop_condition = record.get("stop_condition")
        self.ok = record["ok"]
        self.errors = [Loose(**error) for error in record.get("errors", [])]

    @property
    def reward(self) -> float:
        return sum(r.score * r.weight for r in self.rewards.values() if r is not None)

    @property
    def last_error(self) -> Loose | None:
        return self.errors[-1] if self.errors else None

    @property
    def usage(self) -> Loose | None:
        usages = [c["usage"] for c in self._record.get("calls", []) if c.get("usage")]
        if not usages:
            return None
        return Loose(
            prompt_tokens=sum(u["prompt_tokens"] for u in usages),
            completion_tokens=sum(u["completion_tokens"] for u in usages),
            cached_input_tokens=None,
        )

    @property
    def is_truncated(self) -> bool:
        if self.stop_condition == "max_turns":
            return True
        calls = [c for c in self._record.get("calls", []) if c.get("error") is None]
        return bool(calls) and calls[-1].get("finish_reason") == "length"

    @property
    def branches(self) -> list[SimpleNamespace]:
        nodes = self._record.get("nodes", [])
        parents = {n.get("parent") for n in nodes}
        calls = {c["node"]: c for c in self._record.get("calls", []) if "node" in c}
        out = []
        for leaf in (i for i in range(len(nodes)) if i not in parents):
            path = [leaf]
            while nodes[path[0]].get("parent") is not None:
                path.insert(0, nodes[path[0]]["parent"])
            usages = [calls[i]["usage"] for i in path if i in calls]
            seen = inputs = 0
            for u in usages:
                inputs += max(0, u["prompt_tokens"] - seen)
                seen = u["prompt_tokens"] + u["completion_tokens"]
            out.append(
                SimpleNamespace(
                    messages=[Loose(**nodes[i]["message"]) for i in path],
                    num_input_tokens=inputs,
                    num_output_tokens=sum(u["completion_tokens"] for u in usages),
                )
            )
        return out


class FakeEpisode:
    def __init__(self, record: dict[str, Any]) -> None:
        self._record = record
        self.id = record["id"]
        self.ok = record["ok"]
        self.traces = [FakeTrace(trace) for trace in record["traces"]]

    def to_record(self) -> dict[str, Any]:
        return copy.deepcopy(self._record)


# --- golden rows --------------------------------------------------------------------------


def test_mapping_path_reproduces_golden_rows() -> None:
    rows = [row for group in GROUPS for row in build_samples(group)]
    assert [_roundtrip(row) for row in rows] == GOLDEN


def test_object_path_reproduces_golden_rows() -> None:
    rows = [row for group in GROUPS for row in build_samples([FakeEpisode(e) for e in group])]
    assert [_roundtrip(row) for row in rows] == GOLDEN


def test_trace_objects_project_like_the_golden_summary_rows() -> None:
    for row, episode in zip(GOLDEN, [e for group in GROUPS for e in group], strict=True):
        index = row["info"]["native_trace_index"]
        trace = FakeTrace(episode["traces"][index])
        expected = {**row, "sample_id": trace.id, "info": None}  # fixture traces have no info
        got = trace_to_sample(trace, row["rollout_number"], episode["id"])
        assert _roundtrip(got) == expected


class MinimalEpisode:
    """Only what a producer must offer: ``id``, ``traces`` and ``to_record()``."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.id = record["id"]
        self.traces = [SimpleNamespace(id=t["id"]) for t in record["traces"]]
        self._record = record

    def to_record(self) -> dict[str, Any]:
        return copy.deepcopy(self._record)


def test_episode_objects_are_projected_from_their_record() -> None:
    rows = [row for group in GROUPS for row in build_samples([MinimalEpisode(e) for e in group])]
    assert [_roundtrip(row) for row in rows] == GOLDEN


def test_bytes_path_reproduces_golden_rows_and_build_samples_bytes() -> None:
    encoded: list[bytes] = []
    for group in GROUPS:
        counters: dict[Any, int] = {}
        for episode in group:
            encoded.extend(project_episode_bytes(encode_json(episode), counters))
    assert [json.loads(row) for row in encoded] == GOLDEN
    expected = [encode_json(row) for group in GROUPS for row in build_samples(group)]
    assert encoded == expected


def test_bytes_path_can_skip_the_decode() -> None:
    counters: dict[Any, int] = {}
    rows = [
        row
        for episode in GROUPS[1]
        for row in project_episode_bytes(encode_json(episode), counters, record=episode)
    ]
    assert [json.loads(row) for row in rows] == GOLDEN[4:6]


def test_bytes_path_with_a_record_holding_nonfinite_messages_falls_back() -> None:
    episode = copy.deepcopy(EPISODES[16])
    episode["traces"][0]["nodes"][2]["message"]["score"] = math.nan
    strict = encode_json(sanitize_nonfinite(episode))
    (row,) = project_episode_bytes(strict, {}, record=episode)
    assert json.loads(row) == _roundtrip(build_samples([episode])[0])
    assert json.loads(row)["completion"][2]["score"] is None


def test_bytes_path_splices_the_given_episode_bytes() -> None:
    episode = EPISODES[16]
    # Key order the encoder would never produce, so only a splice can reproduce it.
    reordered = encode_json(dict(reversed(list(episode.items()))))
    (row,) = project_episode_bytes(reordered, {})
    assert reordered in row
    assert json.loads(row) == GOLDEN[0]


# --- numbering ----------------------------------------------------------------------------


def test_numbering_is_per_example_and_restarts_per_call() -> None:
    # Lines 1-4: examples 0, 0, 1, 1.
    rows = build_samples(EPISODES[0:4])
    assert [(r["example_id"], r["rollout_number"]) for r in rows] == [
        (0, 1),
        (0, 2),
        (1, 1),
        (1, 2),
    ]
    assert [r["rollout_number"] for r in build_samples(EPISODES[1:2])] == [1]


def test_shared_counters_continue_numbering_across_calls() -> None:
    counters: dict[Any, int] = {}
    first = build_samples(EPISODES[0:1], rollout_counters=counters)
    second = build_samples(EPISODES[1:3], rollout_counters=counters)
    encoded = project_episode_bytes(encode_json(EPISODES[3]), counters)
    numbers = [r["rollout_number"] for r in first + second] + [
        json.loads(b)["rollout_number"] for b in encoded
    ]
    assert numbers == [1, 2, 1, 2]
    assert counters == {0: 2, 1: 2}


def test_episode_without_traces_gives_no_row_and_keeps_numbering() -> None:
    empty = load_jsonl("edge_episodes.jsonl")[1]
    assert empty["traces"] == []
    counters: dict[Any, int] = {}
    assert build_samples([empty], rollout_counters=counters) == []
    assert project_episode_bytes(encode_json(empty), counters) == []
    assert counters == {}


# --- which records become rows ------------------------------------------------------------


def test_rows_pass_through_and_bare_traces_give_no_row() -> None:
    ready = {"sample_id": "s-1", "reward": 1.0}
    bare = load_jsonl("traces.jsonl")[0]
    rows = build_samples([ready, bare, FakeTrace(EPISODES[16]["traces"][0]), EPISODES[16]])
    assert rows[0] is ready
    assert [r["sample_id"] for r in rows] == ["s-1", EPISODES[16]["id"]]
    assert project_episode_bytes(encode_json(ready), {}) == [encode_json(ready)]
    assert project_episode_bytes(encode_json(bare), {}) == []


def test_summary_trace_is_first_trainable_not_first() -> None:
    episode = copy.deepcopy(EPISODES[12])  # user-sim: assistant (trainable), user
    episode["traces"].reverse()
    assert [t["agent"]["name"] for t in episode["traces"]] == ["user", "assistant"]
    for row in (build_samples([episode])[0], build_samples([FakeEpisode(episode)])[0]):
        assert row["agent"] == "assistant"
        assert row["trainable"] is True
        assert row["sample_id"] == row["episode_id"] == episode["id"]
        assert row["info"]["native_trace_index"] == 1
        assert row["info"]["native_wrapper"] == episode
        assert row["reward"] == GOLDEN[4]["reward"]


def test_first_trace_represents_episode_when_none_is_trainable() -> None:
    episode = copy.deepcopy(EPISODES[12])
    for trace in episode["traces"]:
        trace["agent"]["trainable"] = False
    (row,) = build_samples([episode])
    assert (row["agent"], row["info"]["native_trace_index"]) == ("assistant", 0)


# --- the row's columns --------------------------------------------------------------------


def _trace(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "t-1",
        "task": {"type": "T", "data": {"idx": 7, "answer": "42"}},
        "agent": {"name": "solver", "trainable": True},
        "timing": {"start": 1.0},
        "is_completed": True,
        "ok": True,
        "errors": [],
    }
    base.update(fields)
    return base


def test_sub_rewards_never_overwrite_columns_and_null_rewards_are_left_out() -> None:
    trace = _trace(
        rewards={
            "reward": {"score": 0.25, "weight": 2.0},
            "metrics": {"score": 0.5, "weight": 1.0},
            "format": {"score": 1.0, "weight": 0.0},
            "judge": None,
        },
        metrics={"turns": 4.0},
    )
    row = trace_to_sample(trace)
    assert row["reward"] == 0.25 * 2.0 + 0.5 + 0.0
    assert row["metrics"] == {"turns": 4.0}
    assert row["format"] == 1.0
    assert "judge" not in row
    assert row["answer"] == "42"
    assert row["tool_defs"] is None
    assert row["info"] is None
    assert (row["sample_id"], row["episode_id"], row["rollout_number"]) == ("t-1", None, 1)


def test_unscored_trace_has_reward_zero() -> None:
    assert trace_to_sample(_trace())["reward"] == 0


def test_branches_completion_trajectory_and_usage_from_the_graph() -> None:
    def msg(role: str, text: str) -> dict[str, Any]:
        return {"role": role, "content": text}

    # 0 -> 1 -> 2 (call A) -> 3 -> 4 (call B); 2 -> 5 (call C): leaves 4 and 5.
    nodes = [
        {"message": msg("system", "s")},
        {"parent": 0, "message": msg("user", "u")},
        {"parent": 1, "message": msg("assistant", "a1"), "sampled": True},
        {"parent": 2, "message": msg("user", "u2")},
        {"parent": 3, "message": msg("assistant", "a2"), "sampled": True},
        {"parent": 2, "message": msg("assistant", "side"), "sampled": True},
    ]
    calls = [
        {
            "node": 2,
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            "finish_reason": "stop",
        },
        {
            "node": 4,
            "usage": {"prompt_tokens": 8, "completion_tokens": 3, "cached_input_tokens": 12},
            "finish_reason": "stop",
        },
        {"node": 5, "usage": {"prompt_tokens": 16, "completion_tokens": 7, "cost": 0.5}},
        {"error": {"type": "ProviderError", "message": "boom"}, "finish_reason": "length"},
    ]
    row = trace_to_sample(_trace(nodes=nodes, calls=calls))
    first = [msg("system", "s"), msg("user", "u"), msg("assistant", "a1")]
    assert row["trajectory"] == [
        # call B's input is 8 + 12 cached = 20, of which 15 (A's prompt + completion) was seen.
        {"messages": [*first, msg("user", "u2"), msg("assistant", "a2")],
         "num_input_tokens": 10 + 5, "num_output_tokens": 5 + 3},
        {"messages": [*first, msg("assistant", "side")],
         "num_input_tokens": 10 + 1, "num_output_tokens": 5 + 7},
    ]  # fmt: skip
    assert row["completion"] == row["trajectory"][-1]["messages"]
    assert row["token_usage"] == {
        "prompt_tokens": 34,
        "completion_tokens": 15,
        "cached_input_tokens": 12,
        "cost": 0.5,
    }
    # The failed call's "length" does not count; the last successful call stopped normally.
    assert row["is_truncated"] is False


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (EPISODES[8], True),  # ramble: the last call finished with "length"
        (load_jsonl("edge_episodes.jsonl")[3], True),  # stop_condition max_turns
        (load_jsonl("edge_episodes.jsonl")[2], False),  # agent_timeout is a stop, not truncation
        (EPISODES[16], False),
    ],
)
def test_truncation_is_derived(record: dict[str, Any], expected: bool) -> None:
    assert trace_to_sample(record["traces"][0])["is_truncated"] is expected


def test_failed_trace_row_has_last_error_and_no_branches() -> None:
    trace = EPISODES[10]["traces"][0]  # upstream-fail: three failed calls, no nodes
    row = trace_to_sample(trace, 3, "ep")
    assert row["error"] == trace["errors"][-1]
    assert (row["completion"], row["trajectory"], row["token_usage"]) == ([], [], None)
    assert row["stop_condition"] == "provider_error"
    assert (row["rollout_number"], row["episode_id"]) == (3, "ep")


def test_bare_trace_projects_like_its_episode_member() -> None:
    members = {t["id"]: t for e in EPISODES for t in e["traces"]}
    for bare in load_jsonl("traces.jsonl"):
        assert trace_to_sample(bare) == trace_to_sample(members[bare["id"]])
        assert trace_to_sample(bare) == _roundtrip(trace_to_sample(FakeTrace(members[bare["id"]])))


def test_bare_trace_keeps_nulls_inside_tool_schemas() -> None:
    tool = {"name": "f", "description": None, "parameters": {"default": None}}
    row = trace_to_sample(_trace(tools=[tool]))
    assert row["tool_defs"] == [{"name": "f", "parameters": {"default": None}}]


# --- non-finite numbers -------------------------------------------------------------------


def _with_nonfinite() -> dict[str, Any]:
    episode = copy.deepcopy(EPISODES[16])
    trace = episode["traces"][0]
    trace["metrics"]["reply_chars"] = math.nan
    trace["rewards"]["exact"]["score"] = math.inf
    trace["info"] = {"scores": [1.0, -math.inf]}
    return episode


def test_nonfinite_numbers_become_null_everywhere() -> None:
    episode = _with_nonfinite()
    pristine = encode_json_lenient(episode)[0]
    (row,) = build_samples([episode])
    assert row["reward"] is None
    assert row["exact"] is None
    assert row["metrics"] == {"reply_chars": None}
    assert row["info"]["scores"] == [1.0, None]
    assert row["info"]["native_wrapper"]["traces"][0]["metrics"] == {"reply_chars": None}
    encode_json(row)  # strict JSON now
    # The caller's record is not modified.
    assert math.isnan(episode["traces"][0]["metrics"]["reply_chars"])
    assert encode_json_lenient(episode)[0] == pristine


def test_trace_to_sample_nulls_nonfinite_numbers() -> None:
    row = trace_to_sample(_with_nonfinite()["traces"][0])
    assert (row["reward"], row["metrics"]["reply_chars"]) == (None, None)


def test_bytes_path_with_nonfinite_literals_matches_build_samples() -> None:
    episode = _with_nonfinite()
    loose = json.dumps(episode, ensure_ascii=False, separators=(",", ":")).encode()
    assert b"NaN" in loose
    (row,) = project_episode_bytes(loose, {})
    assert b"NaN" not in row and b"Infinity" not in row
    assert json.loads(row) == _roundtrip(build_samples([json.loads(loose)])[0])


# --- over-size episodes -------------------------------------------------------------------


def test_oversize_episode_becomes_one_row_per_trace(caplog: pytest.LogCaptureFixture) -> None:
    episode = EPISODES[0]  # best-of-n: three traces
    counters: dict[Any, int] = {0: 4}
    encoded = encode_json(episode)
    # The row carries the whole episode, so a limit of the episode's own size is too small.
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        split = project_episode_bytes(encoded, counters, max_request_bytes=len(encoded))
    rows = [json.loads(row) for row in split]
    assert [r["sample_id"] for r in rows] == [t["id"] for t in episode["traces"]]
    assert {r["rollout_number"] for r in rows} == {5}
    assert {r["episode_id"] for r in rows} == {episode["id"]}
    assert all(r["info"] is None or "native_wrapper" not in r["info"] for r in rows)
    assert rows == [_roundtrip(trace_to_sample(t, 5, episode["id"])) for t in episode["traces"]]
    assert counters == {0: 5}
    assert any(episode["id"] in rec.getMessage() for rec in caplog.records)


def test_size_limit_counts_the_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    episode = EPISODES[16]
    (whole,) = project_episode_bytes(encode_json(episode), {})
    exact = projection.ENVELOPE_BYTES + len(whole)
    assert len(project_episode_bytes(encode_json(episode), {}, max_request_bytes=exact)) == 1
    split = project_episode_bytes(encode_json(episode), {}, max_request_bytes=exact - 1)
    assert [json.loads(r)["sample_id"] for r in split] == [episode["traces"][0]["id"]]

    monkeypatch.setattr(projection, "MAX_REQUEST_BYTES", exact - 1)
    assert [r["sample_id"] for r in build_samples([episode])] == [episode["traces"][0]["id"]]
    monkeypatch.setattr(projection, "MAX_REQUEST_BYTES", exact)
    assert [r["sample_id"] for r in build_samples([episode])] == [episode["id"]]


# --- the JSON helpers ---------------------------------------------------------------------


def test_encode_json_is_compact_utf8_and_strict() -> None:
    assert encode_json({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()
    with pytest.raises(ValueError):
        encode_json({"x": math.nan})


def test_sanitize_copies_only_what_changes() -> None:
    clean = {"a": [1.0, 2.0]}
    value = {"keep": clean, "fix": [math.nan, {"y": -math.inf}], "t": (1.0, math.inf)}
    out = sanitize_nonfinite(value)
    assert out == {"keep": clean, "fix": [None, {"y": None}], "t": [1.0, None]}
    assert out["keep"] is clean
    assert math.isnan(value["fix"][0])  # input untouched
    assert sanitize_nonfinite(clean) is clean


def test_encode_json_lenient_reports_whether_it_sanitized() -> None:
    assert encode_json_lenient([1.5]) == (b"[1.5]", False)
    assert encode_json_lenient([math.nan]) == (b"[null]", True)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular"):
        encode_json_lenient(cyclic)

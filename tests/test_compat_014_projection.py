"""prime-runs 0.1.4 code against our ``prime_runs.projection`` (issue 24): every public name
and signature of 0.1.4's module, and the behaviour its callers rely on (the v0 row of a trace
and of an episode, rollout numbering with positional counters, the summary trace, the
over-size split, batching under the request ceiling). Expectations come from the platform
contract (sections 5 and 6) and from 0.1.4's own output (the golden rows in tests/data)."""

from __future__ import annotations

import inspect
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from _compat_014 import (
    PROJECTION_014,
    PROJECTION_CONSTANTS_014,
    Dumpable,
    Reward,
    Trace,
    episode,
    trace,
)
from _support import load_jsonl
from prime_runs import RecordError, projection
from prime_runs.projection import (
    batch_samples,
    build_samples,
    episode_to_samples,
    json_bytes,
    summary_trace_index,
    trace_to_sample,
)


def _size(value: Any) -> int:
    """The request encoding, written out: compact, UTF-8, non-ASCII unescaped."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json", exclude_none=True)


def expected_row(t: Trace, number: int = 1, episode_id: str | None = None) -> dict[str, Any]:
    """Contract 6.1 applied by hand to a stand-in trace."""
    task = _dump(t.task.data)
    row: dict[str, Any] = {
        "sample_id": t.id,
        "example_id": t.task.data.idx,
        "rollout_number": number,
        "episode_id": episode_id,
        "agent": t.agent.name,
        "trainable": t.agent.trainable,
        "task": task,
        "prompt": [],
        "completion": [_dump(m) for m in t.branches[-1].messages] if t.branches else [],
        "answer": task.get("answer"),
        "tool_defs": [_dump(tool) for tool in t.tools] if t.tools else None,
        "reward": t.reward,
        "timing": _dump(t.timing),
        "is_completed": t.is_completed,
        "is_truncated": t.is_truncated,
        "metrics": t.metrics,
        "error": _dump(t.last_error) if t.last_error else None,
        "stop_condition": t.stop_condition,
        "trajectory": [
            {
                "messages": [_dump(m) for m in b.messages],
                "num_input_tokens": b.num_input_tokens,
                "num_output_tokens": b.num_output_tokens,
            }
            for b in t.branches
        ],
        "token_usage": _dump(t.usage) if t.usage else None,
        "info": dict(t.info) or None,
    }
    for name, reward in t.rewards.items():
        if reward is not None:
            row.setdefault(name, reward.score)
    return row


# --- the surface ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROJECTION_014))
def test_every_014_function_is_here_and_takes_014s_arguments(name: str) -> None:
    parameters = list(inspect.signature(getattr(projection, name)).parameters.values())
    theirs = PROJECTION_014[name]
    ours = [(p.name, p.kind, p.default) for p in parameters[: len(theirs)]]
    assert ours == theirs
    # Anything we added is keyword-only and optional, so no 0.1.4 call changes meaning.
    added = parameters[len(theirs) :]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in added)
    assert name in projection.__all__


def test_the_014_constants_keep_their_values() -> None:
    for name, value in PROJECTION_CONSTANTS_014.items():
        assert getattr(projection, name) == value
    assert projection.ENVELOPE_BYTES == len(b'{"samples":[]}')
    assert projection.MAX_SAMPLES_PAYLOAD_BYTES == projection.MAX_REQUEST_BYTES == 26_214_400


def test_json_bytes_measures_the_compact_utf8_encoding() -> None:
    value = {"a": [1, 2.5], "é": "日本", "n": None}
    assert json_bytes(value) == _size(value) == len('{"a":[1,2.5],"é":"日本","n":null}'.encode())
    with pytest.raises(ValueError):
        json_bytes({"x": float("nan")})


# --- one trace -----------------------------------------------------------------------------


def test_trace_to_sample_is_the_v0_row_of_the_contract() -> None:
    t = trace("t1", idx=7, reward=0.5, metrics={"tokens": 12.0}, branches=2, info={"k": "v"})
    t.rewards = {"format": Reward(1.0), "skip": None, "reward": Reward(9.0)}
    t.tools = [Dumpable(name="calc", parameters=None)]
    t.usage = Dumpable(prompt_tokens=3, completion_tokens=4, cost=None)
    t.last_error = Dumpable(type="ProviderError", message="boom", traceback=None)

    row = trace_to_sample(t, 3, "ep-9")  # positional, as 0.1.4 callers pass them

    branch = [{"role": "assistant", "content": "branch 0"}]
    last = [{"role": "assistant", "content": "branch 1"}]
    assert row == {
        "sample_id": "t1",
        "example_id": 7,
        "rollout_number": 3,
        "episode_id": "ep-9",
        "agent": "solver",
        "trainable": True,
        "task": {"idx": 7, "answer": "42"},
        "prompt": [],
        "completion": last,
        "answer": "42",
        "tool_defs": [{"name": "calc"}],
        "reward": 0.5,  # a sub-reward called "reward" never replaces the column
        "timing": {"total_ms": 120},
        "is_completed": True,
        "is_truncated": False,
        "metrics": {"tokens": 12.0},
        "error": {"type": "ProviderError", "message": "boom"},
        "stop_condition": "stop",
        "trajectory": [
            {"messages": branch, "num_input_tokens": 10, "num_output_tokens": 5},
            {"messages": last, "num_input_tokens": 10, "num_output_tokens": 5},
        ],
        "token_usage": {"prompt_tokens": 3, "completion_tokens": 4},
        "info": {"k": "v"},
        "format": 1.0,
    }
    assert row == expected_row(t, 3, "ep-9")  # the oracle below agrees with the literal


def test_trace_to_sample_defaults_and_a_trace_without_branches() -> None:
    t = trace(branches=0)
    row = trace_to_sample(t)
    assert (row["rollout_number"], row["episode_id"]) == (1, None)
    assert (row["completion"], row["trajectory"], row["info"]) == ([], [], None)


def test_non_finite_numbers_become_null_and_the_row_still_batches() -> None:
    t = trace(reward=float("nan"), metrics={"kl": float("inf")}, rewards={"f": Reward(-1e400)})

    row = trace_to_sample(t)
    (episode_row,) = build_samples([episode("ep-1", t)])

    assert (row["reward"], row["metrics"], row["f"]) == (None, {"kl": None}, None)
    assert episode_row["info"]["native_wrapper"]["traces"][0]["reward"] is None
    assert batch_samples([row, episode_row]) == [[row, episode_row]]


# --- one episode ---------------------------------------------------------------------------


def test_summary_trace_index_is_the_first_trainable_trace_else_zero() -> None:
    judge = trace("judge", agent="judge", trainable=False, reward=0.0)
    solver = trace("solver", reward=1.0)
    assert summary_trace_index(episode("e", judge, solver)) == 1
    assert summary_trace_index(episode("e", solver, judge)) == 0
    assert summary_trace_index(episode("e", judge, judge)) == 0
    assert summary_trace_index(episode("e")) == 0
    # The record form of the same episodes, which 0.1.4 could not read.
    judge_record = {"agent": {"name": "judge", "trainable": False}}
    assert summary_trace_index({"traces": [judge_record, {"agent": {"trainable": True}}]}) == 1
    assert summary_trace_index({"traces": [judge_record, {"id": "no agent: trainable"}]}) == 1


@pytest.mark.parametrize("bad", ["episode", 3, {"id": "a trace"}, trace()], ids=type)
def test_summary_trace_index_refuses_what_is_not_an_episode(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"summary_trace_index.*takes an episode"):
        summary_trace_index(bad)


def test_an_episode_row_is_its_summary_trace_row_with_the_native_wrapper() -> None:
    judge = trace("judge", agent="judge", trainable=False, reward=0.0, idx=9)
    solver = trace("solver", reward=1.0, idx=4, rewards={"format": Reward(0.5)})
    ep = episode("ep-1", judge, solver)

    rows = episode_to_samples(ep, 6)

    wrapper = {"native_wrapper": ep.to_record(), "native_trace_index": 1}
    assert rows == [{**expected_row(solver, 6, "ep-1"), "sample_id": "ep-1", "info": wrapper}]
    # The row reads the trace's properties (0.1.4), not its thinner to_record().
    assert (rows[0]["reward"], rows[0]["agent"], rows[0]["example_id"]) == (1.0, "solver", 4)


def test_episode_to_samples_of_an_empty_episode_and_of_a_non_episode() -> None:
    assert episode_to_samples(episode("empty"), 1) == []
    assert episode_to_samples({"id": "e", "traces": []}, 1) == []
    with pytest.raises(TypeError, match=r"episode_to_samples.*takes an episode"):
        episode_to_samples(trace(), 1)


def test_an_episode_too_large_for_a_request_becomes_one_row_per_trace(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    traces = [trace("a", idx=2), trace("b", idx=2, trainable=False, agent="judge")]
    ep = episode("ep-big", *traces)
    whole = {**expected_row(traces[0], 5, "ep-big"), "sample_id": "ep-big"}
    whole["info"] = {"native_wrapper": ep.to_record(), "native_trace_index": 0}
    fits = projection.ENVELOPE_BYTES + _size(whole)

    monkeypatch.setattr(projection, "MAX_SAMPLES_PAYLOAD_BYTES", fits)
    assert episode_to_samples(ep, 5) == [whole]

    monkeypatch.setattr(projection, "MAX_SAMPLES_PAYLOAD_BYTES", fits - 1)
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        split = episode_to_samples(ep, 5)
    assert split == [expected_row(t, 5, "ep-big") for t in traces]
    assert any("ep-big" in record.getMessage() for record in caplog.records)
    # build_samples splits the same way, numbering the episode once.
    counters: dict[Any, int] = {2: 4}
    assert build_samples([ep], counters) == split
    assert counters == {2: 5}


# --- numbering -----------------------------------------------------------------------------


def test_positional_counters_continue_numbering_across_calls() -> None:
    counters: dict[Any, int] = {}
    first = build_samples([episode("ep-1", trace(idx=4))], counters)
    second = build_samples([episode("ep-2", trace(idx=4)), episode("ep-3", trace(idx=5))], counters)
    third = build_samples([episode("ep-4", trace(idx=4))], rollout_numbers=counters)

    numbers = [row["rollout_number"] for row in first + second + third]
    assert numbers == [1, 2, 1, 3]
    assert counters == {4: 3, 5: 1}  # 0.1.4's shape: example idx -> last number given
    assert [row["rollout_number"] for row in build_samples([episode("ep-5", trace(idx=4))])] == [1]


def test_numbering_keys_on_the_summary_trace_and_skips_empty_episodes() -> None:
    judge = trace("judge", idx=99, trainable=False)
    counters: dict[Any, int] = {}
    rows = build_samples(
        [episode("e1", judge, trace(idx=1)), episode("empty"), episode("e2", trace(idx=1))],
        counters,
    )
    assert [(r["sample_id"], r["rollout_number"]) for r in rows] == [("e1", 1), ("e2", 2)]
    assert counters == {1: 2}


def test_counter_arguments_that_cannot_be_meant_are_refused() -> None:
    counters: dict[Any, int] = {}
    assert build_samples([], counters, rollout_counters=counters) == []  # one dict, both names
    with pytest.raises(TypeError, match="two rollout counter dicts"):
        build_samples([], {}, rollout_counters={})
    with pytest.raises(TypeError, match=r"must be a dict.*got list"):
        build_samples([], [])  # type: ignore[arg-type]


def test_build_samples_takes_any_iterable_and_record_mappings_too() -> None:
    ep = {"id": "ep-m", "traces": [{"id": "t", "task": {"data": {"idx": 3}}, "rewards": {}}]}
    (row,) = build_samples(iter([ep]))  # 0.1.4 needed a sequence of objects
    assert (row["sample_id"], row["example_id"], row["info"]["native_wrapper"]) == ("ep-m", 3, ep)


# --- batching ------------------------------------------------------------------------------


def _sample(name: str, size: int) -> dict[str, str]:
    """A sample whose encoding is exactly ``size`` bytes."""
    sample = {"sample_id": name, "blob": ""}
    sample["blob"] = "x" * (size - _size(sample))
    assert _size(sample) == size
    return sample


def test_batch_samples_packs_greedily_in_order_counting_envelope_and_commas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, c, d = (_sample(n, 40) for n in "abcd")
    # {"samples":[a,b]} is 14 + 40 + 1 + 40 bytes.
    monkeypatch.setattr(projection, "MAX_SAMPLES_PAYLOAD_BYTES", 95)
    assert batch_samples([a, b, c, d]) == [[a, b], [c, d]]
    monkeypatch.setattr(projection, "MAX_SAMPLES_PAYLOAD_BYTES", 94)
    assert batch_samples([a, b, c, d]) == [[a], [b], [c], [d]]
    monkeypatch.setattr(projection, "MAX_SAMPLES_PAYLOAD_BYTES", 14 + 3 * 40 + 2)
    assert batch_samples([a, b, c, d]) == [[a, b, c], [d]]
    assert batch_samples([]) == []


def test_batch_samples_under_the_real_ceiling() -> None:
    third = projection.MAX_SAMPLES_PAYLOAD_BYTES // 3
    samples = [_sample(str(n), third) for n in range(4)]
    batches = batch_samples(samples)
    assert batches == [samples[:2], samples[2:]]
    for batch in batches:
        body = {"samples": batch}
        assert _size(body) <= projection.MAX_SAMPLES_PAYLOAD_BYTES


def test_a_sample_that_cannot_be_sent_alone_raises_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(projection, "MAX_SAMPLES_PAYLOAD_BYTES", 14 + 40)
    ok, too_big = _sample("ok", 40), _sample("big", 41)
    assert batch_samples([ok]) == [[ok]]
    with pytest.raises(RecordError, match=r"sample 1 is too large to upload \(55 > 54 bytes\)"):
        batch_samples([ok, too_big])
    with pytest.raises(ValueError):  # what 0.1.4 callers catch
        batch_samples([too_big])


def test_batch_samples_names_a_sample_json_cannot_carry() -> None:
    with pytest.raises(ValueError, match="sample 1 cannot be sent"):
        batch_samples([{"sample_id": "a"}, {"sample_id": "b", "reward": float("inf")}])
    with pytest.raises(TypeError, match="sample 0 is not JSON-serializable"):
        batch_samples([{"sample_id": "a", "tags": {"x"}}])


# --- 0.1.4's own output --------------------------------------------------------------------

EPISODES = load_jsonl("episodes.jsonl")
GOLDEN = load_jsonl("samples_v0.jsonl")  # 0.1.4's build_samples rows, see tests/data
GOLDEN_EPISODES = [*EPISODES[16:20], *EPISODES[12:14], *EPISODES[6:8]]


def test_each_golden_row_is_episode_to_samples_of_its_episode() -> None:
    for row, ep in zip(GOLDEN, GOLDEN_EPISODES, strict=True):
        assert summary_trace_index(ep) == row["info"]["native_trace_index"]
        (ours,) = episode_to_samples(ep, row["rollout_number"])
        assert json.loads(json.dumps(ours)) == row


def test_the_golden_rows_fit_one_request() -> None:
    assert batch_samples(GOLDEN) == [GOLDEN]


# --- the doc -------------------------------------------------------------------------------

DOC = Path(__file__).parents[1] / "docs" / "coming-from-0.1.4.md"


def _doc_section() -> str:
    text = DOC.read_text("utf-8")
    start = text.index("## Projection and metrics")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_doc_names_every_014_name_and_its_example_streams_numbered_rows() -> None:
    section = _doc_section()
    for name in [*PROJECTION_014, *PROJECTION_CONSTANTS_014, "from_episodes", "RunSummary"]:
        assert name in section, name
    (example,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    posted: list[list[dict[str, Any]]] = []
    stream = [
        [episode("e1", trace(idx=1)), episode("e2", trace(idx=2))],
        [{"id": "e3", "traces": [{"id": "t", "task": {"data": {"idx": 1}}}]}],
    ]

    exec(compile(example, str(DOC), "exec"), {"stream": stream, "post": posted.append})

    assert [[(r["sample_id"], r["rollout_number"]) for r in b] for b in posted] == [
        [("e1", 1), ("e2", 1)],
        [("e3", 2)],
    ]

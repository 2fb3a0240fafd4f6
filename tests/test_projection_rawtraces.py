"""The sample row from the summary trace's bytes alone (``Item.summary``, found when the
record is encoded): the same rows, byte for byte, as from the whole record, and no summary
where the trace's place or index cannot be told for sure."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from _support import load_jsonl
from prime_runs._records.encode import encode
from prime_runs._records.item import Summary
from prime_runs.projection import project_episode_parts

RUN = "ev_summary"
EPISODES = load_jsonl("episodes.jsonl")
EDGE = load_jsonl("edge_episodes.jsonl")


def project_episode_bytes(data: bytes, counters: dict[Any, int], **kw: Any) -> list[bytes]:
    return [bytes(row) for row in project_episode_parts(data, counters, **kw)]


def _rows(record: dict[str, Any], counters: dict[Any, int], summary: bool) -> list[bytes]:
    encoded = encode(record, RUN, "eval")
    return project_episode_bytes(
        encoded.data,
        counters,
        exact=encoded.exact,
        summary=encoded.summary if summary else None,
    )


@pytest.mark.parametrize("records", [EPISODES, EDGE], ids=["episodes", "edge"])
def test_rows_from_the_summary_trace_are_the_whole_records_rows(records: list[Any]) -> None:
    whole: dict[Any, int] = {}
    alone: dict[Any, int] = {}
    assert any(encode(record, RUN, "eval").summary for record in records)
    for record in records:
        assert _rows(record, alone, True) == _rows(record, whole, False)
    assert alone == whole


def test_episodes_carry_where_their_summary_trace_lies() -> None:
    episode = copy.deepcopy(EPISODES[12])
    episode["traces"].reverse()  # the trainable trace second: index 1
    encoded = encode(episode, RUN, "eval")
    summary = encoded.summary
    assert summary is not None and summary.trace_index == 1 and summary.episode_id == episode["id"]
    trace = json.loads(encoded.data[summary.start : summary.end])
    assert trace == json.loads(encoded.data)["traces"][1]
    assert encoded.for_delivery(None).summary == summary


def test_identical_traces_find_either_copy() -> None:
    episode = copy.deepcopy(EPISODES[16])
    episode["traces"] = [episode["traces"][0]] * 3
    assert _rows(episode, {}, True) == _rows(episode, {}, False)


@pytest.mark.parametrize("trainable", [1, "yes", 0.0, [1]])
def test_no_summary_when_trainable_is_not_a_bool(trainable: Any) -> None:
    # bool() of the value and of what it decodes to might differ (an enum, a NaN): the
    # whole record decides which trace is the summary.
    episode = copy.deepcopy(EPISODES[12])
    episode["traces"][0]["agent"]["trainable"] = trainable
    assert encode(episode, RUN, "eval").summary is None


def test_no_summary_for_rows_bare_traces_and_empty_episodes() -> None:
    assert encode({"sample_id": "s", "id": "x", "traces": []}, RUN, "eval").summary is None
    assert encode(load_jsonl("traces.jsonl")[0], RUN, "eval").summary is None
    assert encode({"id": "e", "traces": []}, RUN, "eval").summary is None


def test_a_summary_that_names_no_trace_falls_back_to_the_whole_record() -> None:
    encoded = encode(EPISODES[16], RUN, "eval")
    for wrong in (Summary(0, 1, 5, "x"), Summary(0, 3, 9, "x")):  # a string; not JSON
        counters: dict[Any, int] = {}
        rows = project_episode_bytes(encoded.data, counters, exact=True, summary=wrong)
        assert rows == _rows(EPISODES[16], {}, False)
        assert sum(counters.values()) == 1


def test_an_oversize_row_is_split_once_numbered() -> None:
    encoded = encode(EPISODES[16], RUN, "eval")
    counters: dict[Any, int] = {}
    rows = project_episode_bytes(
        encoded.data, counters, exact=True, summary=encoded.summary, max_request_bytes=2_000
    )
    whole: dict[Any, int] = {}
    expected = project_episode_bytes(encoded.data, whole, exact=True, max_request_bytes=2_000)
    assert rows == expected and len(rows) == len(EPISODES[16]["traces"])
    assert counters == whole

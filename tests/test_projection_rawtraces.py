"""The summary row read from a record's bytes with the values it copies left raw
(``_records.rawtraces``): the same rows as from the decoded record, the same rollout
numbers, and the whole record deciding wherever the bytes hold something else than a
record's types."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from _support import load_jsonl
from prime_runs._records import rawtraces
from prime_runs._records.encode import encode
from prime_runs._records.skeleton import LONG_STRING, Spliced, slot
from prime_runs._records.v0rows import sample_id_of
from prime_runs.projection import build_samples, project_episode_parts

RUN = "ev_summary"
EPISODES = load_jsonl("episodes.jsonl")
EDGE = load_jsonl("edge_episodes.jsonl")


def _rows(record: Any, counters: dict[Any, int], **kw: Any) -> list[Any]:
    encoded = encode(record, RUN, "eval")
    parts = project_episode_parts(encoded.data, counters, exact=encoded.exact, **kw)
    return [json.loads(bytes(row)) for row in parts]


def _expected(record: Any, counters: dict[Any, int]) -> list[Any]:
    stamped = json.loads(encode(record, RUN, "eval").data)
    return build_samples([stamped], rollout_counters=counters)


def _read_raw(record: Any) -> bool:
    return rawtraces.episode_source(encode(record, RUN, "eval").data) is not None


@pytest.mark.parametrize("records", [EPISODES, EDGE], ids=["episodes", "edge"])
def test_rows_read_raw_are_the_decoded_records_rows(records: list[Any]) -> None:
    raw: dict[Any, int] = {}
    decoded: dict[Any, int] = {}
    assert all(_read_raw(record) for record in records if record["traces"])
    for record in records:
        assert _rows(record, raw) == _expected(record, decoded)
    assert raw == decoded and sum(raw.values()) == sum(bool(r["traces"]) for r in records)


def test_a_raw_row_starts_with_its_sample_id_and_carries_the_record_as_is() -> None:
    encoded = encode(EPISODES[12], RUN, "eval")
    (row,) = project_episode_parts(encoded.data, {}, exact=True)
    assert encoded.data in row.parts  # spliced in, not encoded again
    assert sample_id_of(row) == EPISODES[12]["id"]


def test_the_summary_trace_is_the_first_trainable_one() -> None:
    episode = copy.deepcopy(EPISODES[12])
    episode["traces"].reverse()  # the trainable trace second
    source = rawtraces.episode_source(encode(episode, RUN, "eval").data)
    assert source is not None and source.trace_index == 1
    assert _rows(episode, {}) == _expected(episode, {})


@pytest.mark.parametrize("trainable", [1, "yes", 0.0, [1], None])
def test_trainable_reads_as_python_reads_the_decoded_value(trainable: Any) -> None:
    episode = copy.deepcopy(EPISODES[12])
    episode["traces"][0]["agent"]["trainable"] = trainable
    assert _rows(episode, {}) == _expected(episode, {})


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("errors",), {"not": "a list"}),
        (("info",), ["not", "a", "mapping"]),
        (("tools",), "not a list"),
        (("metrics",), 0),
        (("task",), "not a mapping"),
        (("nodes",), [1, 2]),
        (("calls",), [{"usage": 5}]),
    ],
)
def test_a_value_of_another_type_leaves_the_row_to_the_whole_record(
    path: tuple[str, ...], value: Any
) -> None:
    episode = copy.deepcopy(EPISODES[16])
    for trace in episode["traces"]:
        trace[path[0]] = value
    assert not _read_raw(episode)
    counters: dict[Any, int] = {}
    try:
        expected = _expected(episode, {})
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        with pytest.raises(type(exc)):
            _rows(episode, counters)
    else:
        assert _rows(episode, counters) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [("errors", [{"message": "boom"}, 0]), ("metrics", {}), ("tools", []), ("info", {})],
)
def test_falsy_values_read_as_the_decoded_record_reads_them(key: str, value: Any) -> None:
    episode = copy.deepcopy(EPISODES[16])
    episode["traces"][0][key] = value
    assert _read_raw(episode)
    assert _rows(episode, {}) == _expected(episode, {})


def test_a_record_that_quotes_a_slot_is_projected_whole() -> None:
    episode = copy.deepcopy(EPISODES[16])
    episode["traces"][0]["info"] = {"note": slot(0)}
    encoded = encode(episode, RUN, "eval")
    source = rawtraces.episode_source(encoded.data)
    assert source is not None and rawtraces.summary_row(source, 1, encoded.data) is None
    counters: dict[Any, int] = {}
    assert _rows(episode, counters) == _expected(episode, {})
    assert sum(counters.values()) == 1  # numbered once, though read twice


def test_rows_bare_traces_and_empty_episodes_are_not_read_raw() -> None:
    row = {"sample_id": "s", "id": "x", "traces": [EPISODES[0]["traces"][0]]}
    assert not _read_raw(row)
    encoded = encode(row, RUN, "eval")
    assert project_episode_parts(encoded.data, {}, exact=True) == [encoded.data]
    assert not _read_raw(load_jsonl("traces.jsonl")[0])
    assert _rows({"id": "e", "traces": []}, {}) == []


def test_an_oversize_row_is_split_once_numbered() -> None:
    encoded = encode(EPISODES[16], RUN, "eval")
    counters: dict[Any, int] = {}
    rows = project_episode_parts(encoded.data, counters, exact=True, max_request_bytes=2_000)
    whole: dict[Any, int] = {}
    expected = project_episode_parts(encoded.data, whole, exact=False, max_request_bytes=2_000)
    assert [bytes(r) for r in rows] == [bytes(r) for r in expected]
    assert len(rows) == len(EPISODES[16]["traces"]) and counters == whole


def _large(text: str) -> dict[str, Any]:
    episode = copy.deepcopy(EPISODES[16])
    for trace in episode["traces"]:
        trace["nodes"][-1]["message"]["content"] = text
    return episode


@pytest.mark.parametrize("limit", [None, 3 * LONG_STRING], ids=["summary", "split"])
def test_a_large_records_long_values_are_spliced_not_copied(
    monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    # Any size is read raw: a long message goes into the row (twice: trajectory and
    # completion) as a view of the record's bytes, and an over-size row is split here too.
    episode = _large("é" * LONG_STRING)
    encoded = encode(episode, RUN, "eval")

    def refuse(*args: Any) -> None:
        raise AssertionError("a large record was decoded whole")

    kw = {} if limit is None else {"max_request_bytes": limit}
    expected = project_episode_parts(encoded.data, {}, record=json.loads(encoded.data), **kw)
    monkeypatch.setattr("prime_runs.projection._project_whole", refuse)
    rows = project_episode_parts(encoded.data, {}, exact=True, **kw)
    assert [json.loads(bytes(row)) for row in rows] == [json.loads(bytes(r)) for r in expected]
    assert len(rows) == (1 if limit is None else len(episode["traces"]))
    for row in rows:
        assert isinstance(row, Spliced)
        copied = [p for p in row.parts if isinstance(p, bytes) and p is not encoded.data]
        assert sum(map(len, copied)) < LONG_STRING

"""Large records are read without their long strings: the ledger's read-back and sync
through ``_records.skeleton``, the sample row raw (``_records.rawtraces``, its long values
spliced in as views). Both see the same record a whole decode gives."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from prime_runs._records.encode import kind_of, record_id
from prime_runs._records.jsonio import LARGE_DECODE, encode_record
from prime_runs._records.lines import parse_head, parse_record
from prime_runs._records.skeleton import LONG_STRING, is_slot, outline
from prime_runs.projection import build_samples, project_episode_bytes

LONG = LARGE_DECODE // 3 + 1  # three of them make a record a whole decode would not take


def _large(episode: dict[str, Any], text: str) -> dict[str, Any]:
    record = copy.deepcopy(episode)
    summary = record["traces"][0]
    summary["nodes"][-1]["message"]["content"] = text + "é"
    summary["info"] = {**(summary.get("info") or {}), "blob": text + "😀"}
    record["env"] = {**(record.get("env") or {}), "note": text * 1}
    return record


def _rows(data: bytes) -> list[Any]:
    """The rows read raw, checked against the rows of the whole decode."""
    raw = [json.loads(row) for row in project_episode_bytes(data, {}, exact=True)]
    assert raw == [json.loads(row) for row in project_episode_bytes(data, {})]
    return raw


@pytest.mark.parametrize(
    "text",
    [
        "x" * LONG,
        ('a "quoted" \\ back\nslash\t' * (LONG // 20))[:LONG],
        "é" * (LONG // 2),
        "\ud83d\ude00 emoji as escapes" * (LONG // 20),  # surrogates: decoded whole
    ],
    ids=["plain", "escapes", "non-ascii", "surrogate-escapes"],
)
def test_a_large_records_row_is_the_whole_decodes(episodes: list[dict[str, Any]], text: str):
    record = _large(episodes[0], text)
    data = json.dumps(record, ensure_ascii="\ud83d" in text, separators=(",", ":")).encode()
    assert len(data) > LARGE_DECODE

    assert _rows(data) == build_samples([json.loads(data)])
    head, why = parse_head(data)
    whole, _ = parse_record(data)
    assert why is None and head is not None and whole is not None
    assert (kind_of(head), record_id(head)) == (kind_of(whole), record_id(whole))
    assert [t["id"] for t in head["traces"]] == [t["id"] for t in whole["traces"]]


def test_long_strings_become_slots_and_small_ones_stay(episodes: list[dict[str, Any]]):
    record = _large(episodes[0], "y" * LONG)
    found = outline(encode_record(record))
    assert found is not None and len(found[1]) == 3
    assert all(len(literal) >= LONG_STRING for literal in found[1])
    value = json.loads(found[0])
    assert is_slot(value["env"]["note"]) and value["id"] == record["id"]


def test_a_long_id_is_read_whole(episodes: list[dict[str, Any]]):
    record = _large(episodes[0], "z" * LONG)
    record["id"] = "i" * LONG_STRING
    data = encode_record(record)
    head, _ = parse_head(data)
    assert head is not None and head["id"] == record["id"]
    rows = _rows(data)
    assert rows == build_samples([json.loads(data)]) and rows[0]["sample_id"] == record["id"]


def test_a_gzip_body_from_parts_is_the_joined_lines_and_the_same_each_time():
    import gzip

    from prime_runs.platform._traces import compress_body

    lines = [b'{"id":"a"}', b"\n", b"x" * (3 * 1024 * 1024), b"\n", b'{"id":"b"}', b"\n"]
    body = compress_body(lines, 1)
    assert gzip.decompress(body) == b"".join(lines)
    assert compress_body(lines, 1) == body  # a retry resends identical bytes


def test_a_sample_body_joins_spliced_rows_once():
    from prime_runs._records.skeleton import Spliced
    from prime_runs.platform.samples import body_of

    view = memoryview(b'xx{"a":1}yy')[2:9]
    rows = [("a", Spliced([b'{"r":', view, b"}"])), ("b", b'{"s":2}')]
    assert len(rows[0][1]) == len(b'{"r":{"a":1}}')
    assert json.loads(bytes(body_of(rows))) == {"samples": [{"r": {"a": 1}}, {"s": 2}]}


def test_a_large_record_split_into_rows_per_trace_is_the_whole_decodes(
    episodes: list[dict[str, Any]],
):
    record = copy.deepcopy(episodes[0])
    for trace in record["traces"]:
        trace["nodes"][-1]["message"]["content"] = "é" + "x" * LONG
    data = encode_record(record)
    limit = len(data)  # the summary row carries the episode and more: one row per trace
    rows = project_episode_bytes(data, {}, max_request_bytes=limit)
    whole = project_episode_bytes(data, {}, max_request_bytes=limit, record=json.loads(data))
    assert len(rows) == len(record["traces"]) and rows == whole


def test_sync_sends_large_records_whole_reading_only_their_structure(
    prime_env: Any, episodes: list[dict[str, Any]]
) -> None:
    # `prime-runs sync` reads a large line's structure only (kind, id, checks), and sends
    # the journaled bytes: Prime Traces and the sample table get the long strings intact.
    from _support import offline_run
    from prime_runs.cli import main

    text = ('a "quoted" \\ back\nslash é ' * (LONG // 20))[:LONG]
    records = [{**_large(episodes[n], text), "id": f"large-{n}"} for n in range(2)]
    run = offline_run(records, name="large")
    assert main(["sync", run.id]) == 0
    platform_id = json.loads((Path(run.archive_path) / "sync.json").read_text())["platform"]["id"]
    for record in records:
        assert prime_env.episodes[record["id"]]["env"]["note"] == text
        summary = prime_env.traces[record["traces"][0]["id"]]
        assert summary["info"]["blob"] == text + "😀"
        # Restamped in its bytes with the platform's id (the offline run's own id is gone).
        assert prime_env.episodes[record["id"]]["run"]["id"] == platform_id
        assert summary["run"]["id"] == platform_id
    rows = prime_env.samples(platform_id)
    assert sorted(row["episode_id"] for row in rows) == ["large-0", "large-1"]
    assert [row["completion"][-1]["content"] for row in rows] == [text + "é"] * 2

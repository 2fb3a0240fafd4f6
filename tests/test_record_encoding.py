"""The record encoding: orjson where it can, the standard library for what orjson refuses,
and the same JSON values either way."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from prime_runs._records.encode import encode
from prime_runs._records.jsonio import decode_record, encode_record, encode_record_marked
from prime_runs.errors import RecordError
from prime_runs.projection import project_episode_bytes


def _episode() -> dict[str, Any]:
    """A real verifiers episode (messages live in the trace's nodes)."""
    with open(Path(__file__).parent / "data" / "episodes.jsonl", encoding="utf-8") as f:
        return json.loads(f.readline())


def _last_message(record: dict[str, Any]) -> dict[str, Any]:
    return record["traces"][0]["nodes"][-1]["message"]


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, "é", None, True], "b": {"c": -0.0}},
        {"big": 2**63 + 5, "neg": -(2**63)},
        [1e-7, 1e17, 1.5e300, 0.1],
        "snowman ☃ and emoji 🎉",
    ],
)
def test_the_fast_path_writes_what_the_standard_library_reads_back(value: Any) -> None:
    data = encode_record(value)
    assert data == orjson.dumps(value)  # the fast path wrote it
    assert json.loads(data) == value
    assert decode_record(data) == value


def test_only_bytes_orjson_wrote_are_marked_exact() -> None:
    # 20 digits that still fit 64 bits: orjson writes and reads them exactly.
    data, exact = encode_record_marked({"n": 2**64 - 1, "s": "x"})
    assert exact and decode_record(data, exact=True) == {"n": 2**64 - 1, "s": "x"}
    data, exact = encode_record_marked({"n": 2**64})  # beyond: the standard library writes it
    assert not exact and decode_record(data) == {"n": 2**64}


def test_non_finite_numbers_are_written_as_null() -> None:
    data = encode_record({"x": math.nan, "y": [math.inf, -math.inf, 1.0]})
    assert json.loads(data) == {"x": None, "y": [None, None, 1.0]}


def test_what_orjson_refuses_the_standard_library_encodes_exactly() -> None:
    value = {"huge": 10**30, 1: "int key", "deep": 10**400}
    data = encode_record(value)
    assert json.loads(data) == {"huge": 10**30, "1": "int key", "deep": 10**400}
    # orjson would read 10**30 back as a float; the record decoder reads it exactly.
    decoded = decode_record(data)
    assert decoded == {"huge": 10**30, "1": "int key", "deep": 10**400}
    assert isinstance(decoded["huge"], int)


@pytest.mark.parametrize(
    "value",
    [
        {"when": datetime.datetime(2026, 1, 1)},
        {"s": {1, 2}},
        {"bad": "\ud800"},
    ],
)
def test_values_json_cannot_hold_are_still_refused(value: Any) -> None:
    with pytest.raises(RecordError, match="not JSON-serializable"):
        encode(value | {"id": "x", "timing": {"start": 1}}, "ev_1", "eval")


def test_a_dataclass_inside_a_record_is_refused_as_before() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    with pytest.raises(RecordError):
        encode({"id": "x", "p": Point(1)}, "ev_1", "eval")


def test_a_record_beyond_64_bit_integers_projects_exactly() -> None:
    # The sample row re-encodes the messages from a decode of the record's bytes; a plain
    # fast decode would turn the integer into a float.
    record = _episode()
    _last_message(record)["content"] = [{"type": "text", "n": 10**25}]
    encoded = encode(record, "ev_1", "eval")
    assert not encoded.owned  # a mapping: the projection decodes the bytes
    assert not encoded.exact  # the standard library wrote it: no decode may skip the scan
    rows = project_episode_bytes(encoded.data, {}, exact=encoded.exact)
    row = json.loads(rows[0])
    assert row["completion"][-1]["content"][0]["n"] == 10**25
    assert isinstance(row["completion"][-1]["content"][0]["n"], int)


def test_a_plain_record_projects_from_its_bytes() -> None:
    encoded = encode(_episode(), "ev_1", "eval")
    assert not encoded.owned  # a mapping the producer may change: decoded later
    from_bytes = project_episode_bytes(encoded.data, {})
    assert json.loads(from_bytes[0])["completion"][-1] == _last_message(_episode())


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": -123456789012345678901234567890}',
        b"[1,\n 12345678901234567890123, 2.5]",
        b'{"k":"abc12345678901234567890123","n":18446744073709551615}',
        b'{"a":[{"b":1e300}],"c":"\\u00e9"}',
    ],
)
def test_decoding_is_exact(data: bytes) -> None:
    decoded = decode_record(data)
    assert decoded == json.loads(data)
    assert repr(decoded) == repr(json.loads(data))  # an int stays an int


@pytest.mark.parametrize("data", [b"[NaN]", b'{"a":Infinity}', b"[1,]", b"nope"])
def test_decoding_refuses_what_is_not_strict_json(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_record(data)

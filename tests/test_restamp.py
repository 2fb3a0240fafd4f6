"""A record's run id replaced in its encoded bytes (``_records/restamp``): the one step the
live delivery of a run registered late and ``prime-runs sync`` of an offline run share."""

from __future__ import annotations

import json

from prime_runs._records.jsonio import encode_record
from prime_runs._records.restamp import Restamp

LOCAL = "run-20260101-000000-abcd1234"
PLATFORM = "eval_9f8e7d"
STAMP = Restamp.between(LOCAL, PLATFORM)


def record(**extra: object) -> bytes:
    return encode_record(
        {
            "id": "ep-1",
            "run": {"id": LOCAL, "type": "eval"},
            "traces": [{"id": "tr-1", "run": {"id": LOCAL}}],
            **extra,
        }
    )


def test_every_stamp_of_the_run_is_replaced() -> None:
    # The live delivery's case: the record and each of its traces name the local id.
    out = json.loads(STAMP(record()))
    assert out["run"]["id"] == PLATFORM
    assert out["traces"][0]["run"]["id"] == PLATFORM


def test_a_large_record_is_restamped_and_its_long_strings_kept() -> None:
    # Sync's case: a record whose long strings are never decoded.
    long = "x" * 200_000
    data = record(prompt=long, ids=[LOCAL, "other"])
    out = json.loads(STAMP(data))
    assert out["prompt"] == long
    assert out["ids"] == [PLATFORM, "other"]
    assert out["run"]["id"] == PLATFORM


def test_an_id_inside_another_value_is_left_alone() -> None:
    values = [
        f"prefix-{LOCAL}",
        f"{LOCAL}-suffix",
        f"the run {LOCAL} said",
        f'quoted "{LOCAL}" in text',
        f'ends "{LOCAL}',
    ]
    data = record(notes=values, **{f"key-{LOCAL}": 1})
    out = json.loads(STAMP(data))
    assert out["notes"] == values
    assert out[f"key-{LOCAL}"] == 1
    assert out["run"]["id"] == PLATFORM


def test_a_record_without_the_id_is_the_same_object() -> None:
    data = encode_record({"id": "ep-1", "run": {"id": "someone-else"}})
    assert not STAMP.applies(data)
    assert STAMP(data) is data
    # The quoted id inside a longer string (after an escaped quote): looked at, kept.
    quoting = encode_record({"notes": [f'see "{LOCAL}']})
    assert STAMP.applies(quoting)
    assert STAMP(quoting) is quoting


def test_ids_are_matched_as_the_encoder_spells_them() -> None:
    # Non-ASCII is written raw, and a quote in an id escaped: the match follows the bytes.
    stamp = Restamp.between('lokal-é"1', "platform-ü")
    data = encode_record({"run": {"id": 'lokal-é"1'}})
    assert json.loads(stamp(data)) == {"run": {"id": "platform-ü"}}

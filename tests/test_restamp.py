"""A record encoded under a run's local id, sent under the platform's (``_records/restamp``):
the encoder says where it wrote the stamps (``encode(locate=True)``), the new id is written
there, and nothing else of the record changes. The one step the live delivery of a run
registered late and ``prime-runs sync`` of an offline run share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prime_runs._records.encode import encode
from prime_runs._records.item import RecordKey
from prime_runs._records.restamp import Restamp
from prime_runs.projection import project_episode_parts

LOCAL = "run-20260101-000000-abcd1234"
PLATFORM = "eval_9f8e7d"
KEY = RecordKey("episode-1-abc.jsonl", 0)


def record(quote: Any = None, **extra: Any) -> dict[str, Any]:
    """An episode of two traces whose content quotes ``quote`` in many shapes."""
    info = {} if quote is None else _quoting(quote)
    return {
        "id": "ep-1",
        "info": info,
        "traces": [
            {"id": "tr-1", "agent": {"trainable": False}, "info": info, "run": {"name": quote}},
            {"id": "tr-2", "timing": {"start": 1.0}, "info": {"nested": [info]}},
        ],
        **extra,
    }


def _quoting(value: Any) -> dict[str, Any]:
    return {
        "ref": value,
        "list": [value, "x"],
        str(value): "a key",
        "deep": {"id": value, "run": {"id": value}},
        "text": f'prefix-{value} "{value}" \\"{value}\\"',
    }


def stamped(rec: dict[str, Any], run_id: str) -> dict[str, Any]:
    out = json.loads(json.dumps(rec))
    out["run"] = {"id": run_id, "type": "eval"}
    for member in out["traces"]:
        member["run"] = {**member.get("run", out["run"]), "id": run_id, "type": "eval"}
    return out


def sent(rec: dict[str, Any], old: str = LOCAL, new: str = PLATFORM) -> tuple[Any, Any]:
    """The record encoded under ``old`` and delivered under ``new``: the item sent."""
    item = encode(rec, old, "eval", locate=True).for_delivery(None)
    return item, Restamp.between(old, new).item(item)


@pytest.mark.parametrize("new", [PLATFORM, "e", "eval-" + "9" * 60])
def test_only_the_stamps_change_whatever_the_content_quotes(new: str) -> None:
    rec = record(LOCAL)
    before, after = sent(rec, new=new)
    assert json.loads(after.data) == stamped(rec, new)
    assert after.stamps is None  # sent as it is from now on
    # Its sample row is read from the restamped bytes and carries them whole.
    (row,) = project_episode_parts(after.data, {}, exact=after.exact)
    assert before.data != after.data and after.data in row.parts
    assert json.loads(bytes(row))["info"]["native_wrapper"] == stamped(rec, new)


def test_a_record_that_does_not_quote_the_id_needs_no_second_encode() -> None:
    rec = record("someone-else")
    encoded = encode(rec, LOCAL, "eval", locate=True)
    assert not encoded.quotes_id and len(encoded.stamps or ()) == 3
    assert encoded.data == encode(rec, LOCAL, "eval").data
    _, after = sent(rec)
    assert json.loads(after.data) == stamped(rec, PLATFORM)


def test_a_quoting_record_is_encoded_to_the_same_bytes() -> None:
    rec = record(LOCAL)
    encoded = encode(rec, LOCAL, "eval", locate=True)
    assert encoded.quotes_id and len(encoded.stamps or ()) == 3
    assert encoded.data == encode(rec, LOCAL, "eval").data


def test_a_record_whose_id_cannot_change_is_sent_as_it_is() -> None:
    item = encode(record(LOCAL), PLATFORM, "eval").for_delivery(None)
    assert item.stamps is None
    assert Restamp.between(LOCAL, PLATFORM).item(item) is item


@pytest.mark.parametrize("old", ['lokal-é"1', "a,b", "x\\y", ":"])
def test_ids_the_encoder_cannot_count_are_located_all_the_same(old: str) -> None:
    rec = record(old)
    _, after = sent(rec, old=old, new="platform-ü")
    assert json.loads(after.data) == stamped(rec, "platform-ü")


def test_sync_finds_the_stamps_by_counting_when_the_content_does_not_quote_the_id() -> None:
    rec = record("other")
    data = encode(rec, LOCAL, "eval").data
    line = Restamp.between(LOCAL, PLATFORM).line(KEY, data, json.loads(data))
    assert line is not None and json.loads(line) == stamped(rec, PLATFORM)


def test_sync_takes_the_journals_note_when_the_content_quotes_the_id() -> None:
    rec = record(LOCAL)
    encoded = encode(rec, LOCAL, "eval", locate=True)
    assert encoded.stamps
    restamp = Restamp.between(LOCAL, PLATFORM, {KEY: encoded.stamps})
    line = restamp.line(KEY, encoded.data, json.loads(encoded.data))
    assert line is not None and json.loads(line) == stamped(rec, PLATFORM)


@pytest.mark.parametrize("size", [0, 5 * 1024 * 1024])
def test_sync_of_an_unnoted_quoting_record_decodes_it_and_sets_only_the_stamps(size: int) -> None:
    # A record an earlier version journaled (no note); a large one keeps its long strings.
    rec = record(LOCAL, blob=f'{LOCAL} "{LOCAL}"' + "b" * size)
    data = encode(rec, LOCAL, "eval").data
    line = Restamp.between(LOCAL, PLATFORM).line(KEY, data, json.loads(data))
    assert line is not None and json.loads(line) == stamped(rec, PLATFORM)


def test_a_record_stamped_with_another_id_is_sent_as_journaled() -> None:
    # Logged once the run was registered: its content may still quote the local id.
    data = encode(record(LOCAL), PLATFORM, "eval").data
    restamp = Restamp.between(LOCAL, PLATFORM)
    assert restamp.line(KEY, data, json.loads(data)) is data


def test_a_note_that_does_not_point_at_the_id_is_not_trusted() -> None:
    rec = record(LOCAL)
    data = encode(rec, LOCAL, "eval").data
    restamp = Restamp.between(LOCAL, PLATFORM, {KEY: (0, 5)})
    line = restamp.line(KEY, data, json.loads(data))
    assert line is not None and json.loads(line) == stamped(rec, PLATFORM)

"""Records beyond the in-memory bound are read back from the journal once, not once per
sink: the sinks claim the same records at about the same time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import prime_runs._journal.ledger as _ledger
import prime_runs._journal.readback as _readback
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.ledger import Ledger
from prime_runs._records.encode import encode
from prime_runs._records.item import Item
from prime_runs._records.jsonio import decode_record, encode_record_marked
from prime_runs.projection import project_episode_parts


def test_a_record_read_back_for_one_sink_is_not_read_again_for_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 2)  # the rest: journal only
    archive = RunArchive.create(tmp_path, "ev_readback", {"name": "r"})
    ledger = Ledger(["traces", "eval_samples"], archive)
    for n in range(10):
        data = b'{"id":"r%d","traces":[{"id":"t%d"}]}' % (n, n)
        key = archive.append("episode", data)
        assert (
            ledger.add(Item("episode", data, key, None, f"r{n}"), sinks=["traces", "eval_samples"])
            is not None
        )
    reads: list[int] = []
    real = archive.read_many

    def counting(segment, offsets):  # type: ignore[no-untyped-def]
        offsets = list(offsets)
        reads.extend(offsets)
        return real(segment, offsets)

    monkeypatch.setattr(archive, "read_many", counting)
    first = ledger.claim("traces", max_items=100)
    second = ledger.claim("eval_samples", max_items=100)
    assert [i.record_id for i in first] == [f"r{n}" for n in range(10)]
    assert [i.record_id for i in second] == [f"r{n}" for n in range(10)]
    assert len(reads) == 8  # the 8 records beyond the bound, read once for both sinks
    assert [i.data for i in first] == [i.data for i in second]


def test_a_record_read_back_keeps_whether_its_bytes_decode_without_a_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 0)  # every record: journal only
    archive = RunArchive.create(tmp_path, "ev_exact", {"name": "r"})
    ledger = Ledger(["traces"], archive)
    records = [{"id": f"r{n}", "traces": [{"id": "t", "n": 10**n}]} for n in (3, 25, 5)]
    for record in records:
        data, exact = encode_record_marked(record)
        key = archive.append("episode", data)
        ledger.add(
            Item("episode", data, key, None, str(record["id"]), exact=exact), sinks=["traces"]
        )
    items = ledger.claim("traces", max_items=10)
    # 10**25 made the standard library write its record: that one must keep its scan.
    assert [i.exact for i in items] == [True, False, True]
    assert [decode_record(i.data, exact=i.exact) for i in items] == records
    assert isinstance(decode_record(items[1].data, exact=items[1].exact)["traces"][0]["n"], int)


def _fixture_episodes(count: int) -> list[dict[str, Any]]:
    lines = (Path(__file__).parent / "data" / "episodes.jsonl").read_bytes().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [dict(records[n % len(records)], id=f"episode-{n}") for n in range(count)]


def _logged(
    tmp_path: Path, records: list[dict[str, Any]], sinks: list[str]
) -> tuple[RunArchive, Ledger, list[Item]]:
    """``records`` logged as a run logs them, none held in memory."""
    archive = RunArchive.create(tmp_path, "ev_head", {"name": "r"})
    ledger = Ledger(sinks, archive)
    items = []
    for record in records:
        encoded = encode(record, "ev_head", "eval")
        item = encoded.for_delivery(archive.append(encoded.kind, encoded.data))
        assert ledger.add(item, sinks=sinks) is not None
        items.append(item)
    return archive, ledger, items


def _row(item: Item) -> bytes:
    (row,) = project_episode_parts(item.data, {}, exact=item.exact)
    return bytes(row)


def test_an_episode_read_back_is_not_decoded_again_and_gives_the_same_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 0)  # every record: journal only
    _archive, ledger, logged = _logged(tmp_path, _fixture_episodes(6), ["eval_samples"])
    assert all(i.exact and i.kind == "episode" for i in logged)

    def refuse(data: bytes, *, exact: bool = False) -> Any:
        raise AssertionError("an episode logged whole was decoded on read-back")

    monkeypatch.setattr(_readback, "parse_head", refuse)
    read = ledger.claim("eval_samples", max_items=100)
    assert [(i.kind, i.record_id, i.problem, i.exact) for i in read] == [
        (i.kind, i.record_id, i.problem, i.exact) for i in logged
    ]
    assert [i.data for i in read] == [i.data for i in logged]
    assert [_row(i) for i in read] == [_row(i) for i in logged]


def test_a_line_that_reads_back_otherwise_than_it_was_logged_is_decoded_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 0)
    archive, ledger, logged = _logged(tmp_path, _fixture_episodes(2), ["traces"])
    # The first episode's id, overwritten in the segment by a number of the same length.
    (segment,) = (archive.path / "records").iterdir()
    raw = bytearray(segment.read_bytes())
    quoted = b'"episode-0"'
    at = raw.index(quoted)
    raw[at : at + len(quoted)] = b"1" * len(quoted)
    segment.write_bytes(bytes(raw))
    first, second = ledger.claim("traces", max_items=10)
    assert first.record_id is None
    assert first.problem is not None and "`id`" in first.problem
    assert second.record_id == "episode-1" and second.problem is None
    assert second.data == logged[1].data


def test_a_record_held_in_memory_keeps_every_field_it_was_logged_with() -> None:
    ledger = Ledger(["traces"], None)
    logged = Item(
        kind="episode",
        data=b'{"id":"r0","traces":[]}',
        key=None,
        problem="a problem",
        record_id="r0",
        mapping={"id": "r0", "traces": []},
        exact=True,
        stamps=(4, 5),
    )
    ref = ledger.add(logged, sinks=["traces"])
    (held,) = ledger.claim("traces", max_items=10)
    # Every field, so that one added to Item later cannot be dropped on the way.
    for field in dataclasses.fields(Item):
        want = ref if field.name == "ref" else getattr(logged, field.name)
        assert getattr(held, field.name) == want, field.name

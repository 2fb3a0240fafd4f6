"""Records beyond the in-memory bound are read back from the journal once, not once per
sink: the sinks claim the same records at about the same time."""

from __future__ import annotations

from pathlib import Path

import pytest

import prime_runs._journal.ledger as _ledger
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.ledger import Ledger
from prime_runs._records.jsonio import decode_record, encode_record_marked


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
            ledger.add("episode", data, key, None, f"r{n}", None, sinks=["traces", "eval_samples"])
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
        ledger.add("episode", data, key, None, str(record["id"]), None, exact, sinks=["traces"])
    items = ledger.claim("traces", max_items=10)
    # 10**25 made the standard library write its record: that one must keep its scan.
    assert [i.exact for i in items] == [True, False, True]
    assert [decode_record(i.data, exact=i.exact) for i in items] == records
    assert isinstance(decode_record(items[1].data, exact=items[1].exact)["traces"][0]["n"], int)

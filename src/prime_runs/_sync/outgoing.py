"""A journaled record made ready for ``prime-runs sync``'s sinks: read back, checked, and
given the platform's run id in its stamps when the run was registered after it was written
(``_records/restamp``, as the live delivery does)."""

from __future__ import annotations

from typing import Any

from prime_runs._records.encode import kind_of, traces_problem
from prime_runs._records.item import Item, RecordKey
from prime_runs._records.jsonio import LARGE_DECODE, may_hold_long_int
from prime_runs._records.lines import parse_head
from prime_runs._records.restamp import Restamp


def outgoing(
    key: RecordKey, data: bytes, restamp: Restamp | None
) -> tuple[Item | None, Any, str | None]:
    """The record at ``key`` as the sinks take it (under the platform's id with
    ``restamp``), its sample id; or None and why it cannot be sent."""
    # Its structure only: a large record's long strings are never decoded.
    record, problem = parse_head(data)
    if record is None:
        return None, None, f"line at {key.segment}:{key.offset}: {problem}"
    kind = kind_of(record)
    record_id = record.get("id") if isinstance(record.get("id"), str) else None
    sample_id = record.get("sample_id", record_id)
    if restamp is not None:
        stamped = restamp.line(key, data, record)
        if stamped is None:
            why = "its run stamps could not be given the platform's id"
            return None, None, f"line at {key.segment}:{key.offset}: {why}"
        data = stamped
    # The journal's writers leave no NaN and no number beyond a float, and parse_head read
    # it as text: without an integer orjson would misread, it is as exact as orjson's bytes,
    # so its sample row is read raw, a large record's long strings never copied. A large
    # one is never decoded by orjson (``decode_record``), and msgspec reads long integers
    # exactly: no scan (a copy of the line) for it.
    exact = len(data) > LARGE_DECODE or not may_hold_long_int(data)
    problem = traces_problem(kind, record)
    return Item(kind, data, key, problem, record_id, exact=exact), sample_id, None

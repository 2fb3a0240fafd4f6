"""A journaled record made ready for ``prime-runs sync``'s sinks: read back, checked, and
given the platform's run id in its stamps when the run was registered after it was written
(``_records/restamp``, as the live delivery does)."""

from __future__ import annotations

from typing import Any

from prime_runs._records.encode import kind_of, traces_problem
from prime_runs._records.item import Item, RecordKey
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
    return Item(kind, data, key, traces_problem(kind, record), record_id), sample_id, None

"""A journaled record made ready for ``prime-runs sync``'s sinks: read back, checked, and
stamped with the platform's run id when the run was registered after it was written."""

from __future__ import annotations

from typing import Any

from prime_runs._records.encode import encode, kind_of, traces_problem
from prime_runs._records.item import Item, RecordKey
from prime_runs._records.jsonio import LARGE_DECODE
from prime_runs._records.lines import parse_head, parse_record
from prime_runs._records.restamp import Restamp
from prime_runs.errors import RecordError


def outgoing(
    key: RecordKey, data: bytes, run_id: str, restamp: str | None, run_type: str
) -> tuple[Item | None, Any, str | None]:
    """The record at ``key`` of run ``run_id`` as the sinks take it (stamped with the
    platform's id ``restamp``, if given), its sample id; or None and why it cannot be sent."""
    # A large record is restamped in its bytes, as the live delivery restamps a run
    # registered late: its long strings are never decoded (a whole decode and encode
    # peaks at over ten times the record). A small one is encoded again.
    stamp = None
    if restamp is not None and len(data) > LARGE_DECODE:
        stamp = Restamp.between(run_id, restamp)
        stamp = stamp if stamp.applies(data) else None
    full = restamp is not None and stamp is None
    record, problem = (parse_record if full else parse_head)(data)
    if record is None:
        return None, None, f"line at {key.segment}:{key.offset}: {problem}"
    kind = kind_of(record)
    record_id = record.get("id") if isinstance(record.get("id"), str) else None
    sample_id = record.get("sample_id", record_id)
    if full:
        try:
            encoded = encode(record, restamp or "", run_type)
        except RecordError as exc:  # e.g. nested deeper than this process encodes
            return None, None, f"line at {key.segment}: {exc}"
        data, problem = encoded.data, encoded.problem
    else:
        if stamp is not None:
            data = stamp(data)
        problem = traces_problem(kind, record)
    return Item(kind, data, key, problem, record_id), sample_id, None

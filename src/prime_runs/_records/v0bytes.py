"""A v0 sample row encoded from a record's bytes (``projection.project_episode_parts``): the
episode's bytes, and each branch's messages encoded once, are spliced into the row rather
than encoded again inside it.

Slot strings (``_records.skeleton``) stand in for these large values while the row is
encoded; the values' bytes are then spliced in (the episode's own bytes, each branch's
messages encoded once even though the last branch appears twice, a large record's long
strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import prime_runs._records.access as _records
import prime_runs._records.skeleton as _skeleton
import prime_runs._records.v0rows as _v0rows
from prime_runs._records.jsonio import LARGE_DECODE, encode_record

__all__ = ["outlined", "spliced_row"]


def outlined(data: bytes, exact: bool) -> tuple[Mapping[str, Any], list[memoryview]] | None:
    """A large record decoded without its long strings (``_records.skeleton``): the row
    needs its structure, and its long strings only as the bytes they already are. None
    when it must be decoded whole: small, no long string, or a long string where the row
    reads a value (an id, an example key)."""
    if len(data) <= LARGE_DECODE:
        return None
    try:
        found = _skeleton.skeleton(data, exact=exact)
    except ValueError:
        return None
    if found is None or not isinstance(found.value, Mapping):
        return None
    record = found.value
    traces = record.get("traces")
    if _skeleton.is_slot(record.get("id")) or not isinstance(traces, list) or not traces:
        return None
    if not all(isinstance(trace, Mapping) for trace in traces):
        return None  # whatever a whole decode makes of it, the same
    summary = traces[_records.summary_trace_index(traces)]
    if any(_skeleton.is_slot(v) for v in (_records.example_idx(summary), summary.get("id"))):
        return None
    return record, found.literals


def spliced_row(
    source: _v0rows.Source, number: int, episode_bytes: bytes, literals: list[memoryview]
) -> _skeleton.Spliced | None:
    """The summary row encoded around slots for its large values, which are then spliced in
    (and a skeleton's long strings, ``literals``); ``None`` if a slot did not come out
    exactly once (the caller encodes the plain row)."""
    base = len(literals)  # slots below it are the skeleton's long strings
    row = _v0rows.episode_row(source._replace(native=_skeleton.slot(base)), number)
    pieces: list[Any] = [episode_bytes]
    lookup = _skeleton.literal_of(literals)
    for entry in row["trajectory"]:  # fresh dicts, safe to change
        try:
            # Non-finite numbers come out as null, as the plain path writes them.
            encoded = encode_record(entry["messages"])
        except (TypeError, ValueError):  # the plain path reports what is wrong
            return None
        piece = _skeleton.splice(encoded, lookup) if literals else encoded
        if piece is None:
            return None
        pieces.append(piece)
        entry["messages"] = _skeleton.slot(base + len(pieces) - 1)
    pieces.append(pieces[-1] if len(pieces) > 1 else b"[]")
    row["completion"] = _skeleton.slot(base + len(pieces) - 1)
    # Non-finite numbers come out as null, as the plain path writes them.
    return _skeleton.splice_once(encode_record(row), pieces, literals)

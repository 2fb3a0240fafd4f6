"""An episode record read from its bytes for its v0 summary row, with the values the row
only copies (messages, tools, task data, timing, metrics, info) left as the raw JSON they
already are (``msgspec.Raw``).

msgspec decodes the record into plain dicts, as a whole decode would give them but holding
only the keys the row reads, and ``_records.v0rows`` builds the row from them as from a
decoded record. The row's encoder writes raw values back verbatim, so a record is neither
decoded whole nor encoded again inside its row, and its long strings never become ``str``
objects. A raw value of ``LONG_STRING`` bytes or more (a large record's long message) is not
even copied into the row: a slot stands for it while the row is encoded, and its bytes are
spliced back as a view of the record's. Records of any size come here, and their over-size
rows are split here too. Only bytes this SDK wrote come here (valid UTF-8, finite numbers),
so a raw copy decodes to what a decode and an encode would give; a value of another type
than the types below say is left to the whole decode, which reports it.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec

import prime_runs._records.access as _records
import prime_runs._records.v0rows as _v0rows
from prime_runs._records.skeleton import LONG_STRING, Part, Spliced, slot, splice_once

__all__ = ["episode_source", "example_idx", "rows", "summary_row"]


# ``total=False``: a key the record leaves out stays out, as in a decoded record (the row
# reads a missing key and a null one apart, e.g. ``agent.name``).
class _Agent(TypedDict, total=False):
    name: Any
    trainable: Any


class _Task(TypedDict, total=False):
    data: dict[str, msgspec.Raw] | None


class _Node(TypedDict, total=False):
    parent: Any
    message: msgspec.Raw


class _Call(TypedDict, total=False):
    node: Any
    error: Any
    finish_reason: Any
    usage: dict[str, Any] | None


class _Trace(TypedDict, total=False):
    id: Any
    task: _Task | None
    agent: _Agent | None
    tools: list[msgspec.Raw] | None
    nodes: list[_Node] | None
    calls: list[_Call] | None
    rewards: Any
    metrics: dict[str, msgspec.Raw] | None
    info: dict[str, msgspec.Raw] | None
    is_completed: Any
    stop_condition: Any
    errors: list[Any] | None  # decoded: the row's error is the last, if truthy
    timing: msgspec.Raw


class _Episode(TypedDict, total=False):
    id: Any
    traces: list[_Trace] | None
    sample_id: msgspec.Raw  # a finished v0 row passes through as it is


_EPISODE = msgspec.json.Decoder(_Episode)
_ANY = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()


def episode_source(data: bytes) -> _v0rows.Source | None:
    """The episode in ``data`` (bytes orjson wrote) ready to project, its native wrapper a
    slot for ``data``; None when the whole decode must decide: not an episode with traces, a
    v0 row, or a value of another type than a record's (the whole decode reports it)."""
    try:
        episode = _EPISODE.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None  # RecursionError: nested past msgspec's depth, the whole decode judges
    traces = episode.get("traces")
    if not traces or "sample_id" in episode:
        return None
    index = _records.summary_trace_index(traces)
    return _v0rows.Source(episode, traces, index, slot(0), False)


def example_idx(source: _v0rows.Source) -> Any:
    """``task.data.idx``, decoded: the rollout counters' key."""
    idx = _records.example_idx(source.traces[source.trace_index])
    return None if idx is None else _ANY.decode(idx)


def summary_row(source: _v0rows.Source, number: int, data: bytes) -> Spliced | None:
    """The summary row of :func:`episode_source`'s episode, built by ``v0rows`` as for the
    decoded record, with ``data`` (the record) spliced in as its native wrapper; None if
    the row cannot be told from the record's (the caller projects the record whole)."""
    return _encoded(_v0rows.episode_row(source, number), [data], len(data))


def rows(
    source: _v0rows.Source, number: int, data: bytes, limit: int
) -> list[bytes | Spliced] | None:
    """:func:`summary_row`, or one row per trace when its request would exceed ``limit``
    bytes (as ``v0rows.rows_of`` splits a decoded record); None as for :func:`summary_row`."""
    summary = summary_row(source, number, data)
    if summary is None or _v0rows.ENVELOPE_BYTES + len(summary) <= limit:
        return None if summary is None else [summary]
    split: list[bytes | Spliced] = []
    for row in _v0rows.split_rows(source, number):
        encoded = _encoded(row, [], len(data))
        if encoded is None:
            return None
        split.append(encoded)
    _v0rows.warn_oversize(source.episode.get("id"), limit)
    return split


def _encoded(row: dict[str, Any], pieces: list[Part], size: int) -> Spliced | None:
    """``row`` encoded, its slots spliced: ``pieces`` (slots 0 on), then its long raw
    values, which only a record of ``size`` >= ``LONG_STRING`` bytes can hold."""
    try:
        if size >= LONG_STRING:
            row = _slotted(row, pieces)
        encoded = _ENCODER.encode(row)
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError, RecursionError):
        return None  # an odd value inside: the whole decode reports it
    return splice_once(encoded, pieces)


def _slotted(value: Any, pieces: list[Part]) -> Any:
    """``value`` with a slot for each raw value of ``LONG_STRING`` bytes or more (its bytes
    added to ``pieces``), in new containers: the source's stay as they are for a split."""
    if isinstance(value, msgspec.Raw):
        if len(value) < LONG_STRING:
            return value
        pieces.append(memoryview(value))
        return slot(len(pieces) - 1)
    if isinstance(value, dict):
        return {key: _slotted(item, pieces) for key, item in value.items()}
    if isinstance(value, list):
        return [_slotted(item, pieces) for item in value]
    return value

"""An episode record read from its bytes for its v0 summary row, with the values the row
only copies (messages, tools, task data, timing, metrics, info) left as the raw JSON they
already are (``msgspec.Raw``).

msgspec decodes the record into plain dicts, as a whole decode would give them but holding
only the keys the row reads, and ``_records.v0rows`` builds the row from them as from a
decoded record. The row's encoder writes raw values back verbatim, so a record is neither
decoded whole nor encoded again inside its row, and its long strings never become ``str``
objects. Only bytes orjson wrote come here (valid UTF-8, finite numbers, no integer past 64
bits), so a raw copy decodes to what a decode and an encode would give; a value of another
type than the types below say is left to the whole decode, which reports it.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec

import prime_runs._records.access as _records
import prime_runs._records.v0rows as _v0rows
from prime_runs._records.skeleton import Spliced, slot, splice_once

__all__ = ["episode_source", "example_idx", "summary_row"]


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
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
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
    try:
        encoded = _ENCODER.encode(_v0rows.episode_row(source, number))
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError):
        return None  # an odd value inside: the whole decode reports it
    return splice_once(encoded, [data])

"""The v0 row builders behind :mod:`prime_runs.projection`: one trace's row, an episode's
summary row with its native wrapper, and the over-size fallback to one row per trace.

An episode is projected from one of two sources (see :func:`source_of`): its record's traces
(a record mapping, or an object whose traces are mere handles), or, as prime-runs 0.1.4 and
verifiers read it, its trace objects' properties with ``to_record()`` as the native wrapper.
For verifiers' own objects the two give the same rows; they differ only for an object whose
record says something else than its properties (a test stand-in), and then the properties win
as they did in 0.1.4.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import prime_runs._records.access as _records
from prime_runs._records.jsonio import encode_json, is_nonfinite_error, sanitize_nonfinite
from prime_runs._records.skeleton import Spliced

logger = logging.getLogger("prime_runs")

#: ``{"samples":[]}``: what a request costs before its first row.
ENVELOPE_BYTES = 14

T = TypeVar("T")


def packed(entries: Sequence[T], sizes: Sequence[int], limit: int) -> list[list[T]]:
    """``entries`` in greedy, in-order batches whose ``{"samples":[...]}`` body (envelope
    and commas counted) fits ``limit``, given each entry's encoded size: the one packer of
    sample rows. An entry too large alone gets a batch of its own: callers set those apart
    first, each in its own way (refused, rejected, or split off)."""
    batches: list[list[T]] = []
    current: list[T] = []
    size = ENVELOPE_BYTES
    for entry, entry_size in zip(entries, sizes, strict=True):
        extra = entry_size + (1 if current else 0)  # +1: the comma before it
        if current and size + extra > limit:
            batches.append(current)
            current, size, extra = [], ENVELOPE_BYTES, entry_size
        current.append(entry)
        size += extra
    if current:
        batches.append(current)
    return batches


class Source(NamedTuple):
    """An episode ready to project: ``traces`` are what rows are read from (the episode's
    trace objects, or its record's traces), ``native`` is its record for the wrapper."""

    episode: Any
    traces: Sequence[Any]
    trace_index: int  # the summary trace's position in ``traces``
    native: Any
    bare: bool


def source_of(record: Any) -> Source | None:
    """``record`` as a projectable episode, or ``None`` (not an episode, or no traces)."""
    if isinstance(record, Mapping):
        traces = record.get("traces")
        native = record
    else:
        traces = getattr(record, "traces", None)
        if not traces:
            return None
        native = _record_of(record)
        if not all(_is_trace_object(trace) for trace in traces):
            # Trace handles without the trace properties: the record says everything.
            record, traces = native, native.get("traces")
    if not traces:
        return None
    bare = record is not native  # trace objects: dump them as a model dump would
    return Source(record, traces, _records.summary_trace_index(traces), native, bare)


def _record_of(episode: Any) -> Mapping[str, Any]:
    to_record = getattr(episode, "to_record", None)
    record = to_record() if callable(to_record) else None
    if not isinstance(record, Mapping):
        raise TypeError(
            f"an episode object ({type(episode).__name__}) needs a to_record() method that "
            "returns its record as a mapping (the row carries it as info.native_wrapper)"
        )
    return record


def _is_trace_object(trace: Any) -> bool:
    # As 0.1.4 and the contract read an episode object: through its traces' properties, so an
    # object whose record says less (a test stand-in) still gives the row 0.1.4 gave.
    return not isinstance(trace, Mapping) and hasattr(trace, "agent")


def rows_of(source: Source, number: int, limit: int) -> list[dict[str, Any]]:
    """The episode's summary row, or one row per trace when its request would exceed
    ``limit`` bytes."""
    row = episode_row(source, number)
    encoded, row = encode_row(row)
    if ENVELOPE_BYTES + len(encoded) <= limit:
        return [row]
    warn_oversize(row["sample_id"], limit)
    return [encode_row(per_trace)[1] for per_trace in split_rows(source, number)]


def next_number(counters: dict[Any, int], summary_trace: Any) -> int:
    return count_rollout(counters, _records.example_idx(summary_trace))


def count_rollout(counters: dict[Any, int], idx: Any) -> int:
    """The next rollout number of example ``idx``, counted in ``counters``."""
    counters[idx] = number = counters.get(idx, 0) + 1
    return number


def episode_row(source: Source, number: int) -> dict[str, Any]:
    """The summary trace's row for the episode, carrying its record as the native wrapper."""
    episode_id = _records.field(source.episode, "id")
    row = trace_row(source.traces[source.trace_index], number, episode_id, bare=source.bare)
    row["sample_id"] = episode_id
    row["info"] = {
        **(row["info"] or {}),
        "native_wrapper": source.native,
        "native_trace_index": source.trace_index,
    }
    return row


def split_rows(source: Source, number: int) -> list[dict[str, Any]]:
    """The over-size fallback: one row per trace, all with the episode's rollout number."""
    episode_id = _records.field(source.episode, "id")
    return [trace_row(trace, number, episode_id, bare=source.bare) for trace in source.traces]


def warn_oversize(episode_id: Any, limit: int) -> None:
    logger.warning(
        "episode %s does not fit in one %d-byte sample request; sending one row per trace",
        episode_id,
        limit,
    )


def trace_row(
    trace: Any, rollout_number: int, episode_id: str | None, *, bare: bool
) -> dict[str, Any]:
    """The v0 row of one trace, before non-finite numbers are nulled. ``bare``: a mapping
    trace still has its null fields (see ``_records``)."""
    task = _records.dump(_records.task_data(trace), bare=bare)
    agent = _records.field(trace, "agent")
    branches = _records.branches(trace, bare=bare)
    tools = _records.field(trace, "tools")
    info = _records.field(trace, "info")
    row: dict[str, Any] = {
        "sample_id": _records.field(trace, "id"),
        "example_id": _records.field(task, "idx"),
        "rollout_number": rollout_number,
        "episode_id": episode_id,
        "agent": _records.field(agent, "name", "agent"),
        "trainable": _records.field(agent, "trainable", True),
        "task": task,
        "prompt": [],
        "completion": branches[-1].messages if branches else [],
        "answer": task.get("answer") if isinstance(task, Mapping) else None,
        "tool_defs": [_records.dump(tool, bare=bare) for tool in tools] if tools else None,
        "reward": _records.reward(trace),
        "timing": _records.dump(_records.field(trace, "timing"), bare=bare),
        "is_completed": _records.field(trace, "is_completed", False),
        "is_truncated": _records.is_truncated(trace),
        "metrics": _records.metrics(trace),
        "error": _records.last_error(trace, bare=bare),
        "stop_condition": _records.field(trace, "stop_condition"),
        "trajectory": [
            {
                "messages": branch.messages,
                "num_input_tokens": branch.num_input_tokens,
                "num_output_tokens": branch.num_output_tokens,
            }
            for branch in branches
        ],
        "token_usage": _records.usage(trace),
        "info": dict(info) if info else None,
    }
    # Sub-rewards flatten to top-level keys as in v0, never over a real column.
    for name, score in _records.reward_scores(trace):
        row.setdefault(name, score)
    return row


_ID_KEY = b'{"sample_id":'
_ID_HEAD = 4096  # bytes of a row read for its id: ids are short
_DECODER = json.JSONDecoder()


def sample_id_of(row: bytes | Spliced) -> str:
    """The ``sample_id`` of an encoded row, as ``str()`` of its value, read from the row's
    head (it is the row's first key, see :func:`trace_row`): a row of a record of megabytes
    is then neither joined nor decoded for it. The whole row decides otherwise."""
    head = bytes(row.parts[0][:_ID_HEAD] if isinstance(row, Spliced) else row[:_ID_HEAD])
    if head.startswith(_ID_KEY):
        text = head[len(_ID_KEY) :].decode("utf-8", "ignore")  # a cut character at the end
        try:
            value, end = _DECODER.raw_decode(text)
        except ValueError:
            value, end = None, -1
        # What follows the value shows it was read whole (a number cut short is not).
        if end >= 0 and text[end : end + 1] in (",", "}"):
            return str(value)
    return str(json.loads(bytes(row)).get("sample_id"))


def encode_row(row: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The row's compact encoding and the row itself, non-finite numbers nulled in both.
    A clean row (the normal case) is encoded once and never walked in Python."""
    try:
        return encode_json(row), row
    except ValueError as error:
        if not is_nonfinite_error(error):
            raise
    row = sanitize_nonfinite(row)
    return encode_json(row), row


def finite(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with non-finite numbers nulled; checked by the C encoder, walked only if needed."""
    try:
        encode_json(row)
    except ValueError as error:
        if not is_nonfinite_error(error):
            raise
        return sanitize_nonfinite(row)
    return row

"""The v0 sample projection: producer episodes as rows of the legacy eval-sample table
(``POST /evaluations/{id}/samples``).

Inputs are duck-typed; verifiers is never imported. Record mappings
(``Episode.to_record()`` / ``Trace.to_record()``) are read directly, with the values
verifiers derives (reward, truncation, branches, usage) recomputed from the JSON. An episode
object is projected from its ``to_record()``, which the row needs anyway as the native
wrapper; a trace object given to :func:`trace_to_sample` is read through its properties
(``reward``, ``branches``, ``usage``, ...) with pydantic values dumped. Both give the same rows.

Which records become rows in :func:`build_samples`:

* an episode object (has ``traces``), or an episode mapping (has a ``traces`` key), is
  projected. Unlike prime-runs 0.1.4, which skipped JSON episodes, mappings are projected too;
* a mapping that already has ``sample_id`` is a finished v0 row and passes through unchanged;
* anything else, notably a bare trace in either form, gives no row, and so does an episode
  with no traces (which also does not advance the rollout numbering).

One row per episode: the projection of its summary trace (the first trainable one, else the
first) with the whole episode record under ``info.native_wrapper``. An episode whose row would
not fit in one request is sent as one row per trace instead. Non-finite numbers become ``null``.

Rows share sub-objects with mapping inputs (nothing is deep-copied): treat inputs and rows as
read-only. An episode mapping is taken to be in ``Episode.to_record()`` form (null fields
already dropped); :func:`trace_to_sample` on a bare trace mapping drops them itself.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import prime_runs._records.access as _records
from prime_runs._records.jsonio import (
    decode_record,
    encode_json,
    encode_record,
    is_nonfinite_error,
    sanitize_nonfinite,
)

__all__ = [
    "ENVELOPE_BYTES",
    "MAX_REQUEST_BYTES",
    "build_samples",
    "project_episode_bytes",
    "trace_to_sample",
]

logger = logging.getLogger("prime_runs")

#: The platform's ceiling on one ``POST /samples`` body, envelope included.
MAX_REQUEST_BYTES = 26_214_400
#: ``{"samples":[]}``: what a request costs before its first row.
ENVELOPE_BYTES = 14

# Slot strings stand in for large values while a row is encoded; the values' bytes are then
# spliced in (the episode's own bytes, each branch's messages encoded once even though the last
# branch appears twice). Random per process, so a record cannot collide with them by accident.
_SLOT_PREFIX = f"prime-runs:slot:{uuid.uuid4().hex}:"
_SLOT_PATTERN = re.compile(b'"' + re.escape(_SLOT_PREFIX.encode()) + rb'(\d+)"')


def trace_to_sample(
    trace: Any, rollout_number: int = 1, episode_id: str | None = None
) -> dict[str, Any]:
    """One trace (object or record mapping) as a v0 sample row.

    ``completion`` is the last branch's messages and ``trajectory`` has one entry per branch;
    each non-null sub-reward's score is copied to a top-level key unless that key is taken.
    Non-finite numbers become ``null``.
    """
    return _finite(_trace_row(trace, rollout_number, episode_id, bare=True))


def build_samples(
    episodes: Iterable[Any], *, rollout_counters: dict[Any, int] | None = None
) -> list[dict[str, Any]]:
    """Project ``episodes`` (objects or mappings, see the module docstring) to v0 rows.

    Rollout numbers count per example (the summary trace's ``task.data.idx``) from 1. They
    restart with every call unless the caller passes the same ``rollout_counters`` dict to
    each call (a streaming exporter keeps one per run); callers sharing a dict serialize their
    calls.
    """
    counters = rollout_counters if rollout_counters is not None else {}
    rows: list[dict[str, Any]] = []
    for record in episodes:
        if isinstance(record, Mapping):
            if "sample_id" in record:
                rows.append(record)  # type: ignore[arg-type]  # already a v0 row
                continue
            if "traces" not in record:
                continue
            episode = record
        elif getattr(record, "traces", None):
            # The record is needed for the native wrapper anyway, and projecting from it reads
            # nothing but what verifiers dumps (no Branch models, no per-message dumps).
            episode = record.to_record()
        else:
            continue
        traces = episode.get("traces")
        if not traces:
            continue
        index = _records.summary_trace_index(traces)
        number = _next_number(counters, traces[index])
        encoded, row = _encode_row(_episode_row(episode, traces, index, number, episode))
        if ENVELOPE_BYTES + len(encoded) <= MAX_REQUEST_BYTES:
            rows.append(row)
        else:
            _warn_oversize(row["sample_id"], MAX_REQUEST_BYTES)
            rows.extend(_encode_row(per_trace)[1] for per_trace in _split_rows(episode, number))
    return rows


def project_episode_bytes(
    episode_bytes: bytes,
    rollout_counters: dict[Any, int],
    *,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    record: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> list[bytes]:
    """Project one already-encoded record to encoded v0 rows, encoding the episode only once.

    ``episode_bytes`` is the record as compact strict JSON (see :func:`encode_json`). The rows
    decode to exactly what ``build_samples([json.loads(episode_bytes)], rollout_counters=...)``
    returns: the episode bytes are spliced into the summary row as ``info.native_wrapper``
    rather than re-encoded. A row whose request (``{"samples":[row]}``) would exceed
    ``max_request_bytes`` is replaced by one row per trace, with a warning. A passed-through
    v0 row comes back as the given bytes; a bare trace or an episode without traces gives
    ``[]``.

    ``record`` skips the decode: pass it only if it is exactly what ``episode_bytes`` decode to
    and nobody changes it meanwhile (bytes with NaN/Infinity literals must not come with one).
    ``exact``: the bytes hold no integer beyond 64 bits (orjson wrote them), so the decode
    skips the scan for one.
    """
    saw_nonfinite = False

    def constant(name: str) -> float:
        nonlocal saw_nonfinite
        saw_nonfinite = True
        return float(name)  # "NaN", "Infinity", "-Infinity"; nulled below like build_samples

    if record is None:
        try:
            record = decode_record(episode_bytes, exact=exact)
        except ValueError:  # NaN literals, a number beyond a float: the standard decoder
            record = json.loads(episode_bytes, parse_constant=constant)
    if not isinstance(record, Mapping):
        return []
    if "sample_id" in record:
        return [bytes(episode_bytes)]
    traces = record.get("traces")
    if not traces:
        return []
    index = _records.summary_trace_index(traces)
    number = _next_number(rollout_counters, traces[index])
    encoded = None
    if not saw_nonfinite:  # otherwise the bytes are not strict JSON and cannot be reused
        encoded = _spliced_row(record, traces, index, number, bytes(episode_bytes))
    if encoded is None:
        encoded, _ = _encode_row(_episode_row(record, traces, index, number, record))
    if ENVELOPE_BYTES + len(encoded) <= max_request_bytes:
        return [encoded]
    _warn_oversize(record.get("id"), max_request_bytes)
    return [_encode_row(row)[0] for row in _split_rows(record, number)]


def _spliced_row(
    record: Mapping[str, Any], traces: Any, index: int, number: int, episode_bytes: bytes
) -> bytes | None:
    """The summary row encoded around slots for its large values, which are then spliced in;
    ``None`` if a slot did not come out exactly once (the caller encodes the plain row)."""
    row = _episode_row(record, traces, index, number, _slot(0))
    pieces = [episode_bytes]
    for entry in row["trajectory"]:  # fresh dicts, safe to change
        try:
            # Non-finite numbers come out as null, as the plain path writes them.
            pieces.append(encode_record(entry["messages"]))
        except (TypeError, ValueError):  # the plain path reports what is wrong
            return None
        entry["messages"] = _slot(len(pieces) - 1)
    pieces.append(pieces[-1] if len(pieces) > 1 else b"[]")
    row["completion"] = _slot(len(pieces) - 1)
    parts = _SLOT_PATTERN.split(encode_record(row))  # non-finite numbers as null too
    slots = parts[1::2]
    if sorted(int(slot) for slot in slots) != list(range(len(pieces))):
        return None
    out = [parts[0]]
    for slot, text in zip(slots, parts[2::2], strict=True):
        out.append(pieces[int(slot)])
        out.append(text)
    return b"".join(out)


def _slot(number: int) -> str:
    return f"{_SLOT_PREFIX}{number}"


def _next_number(counters: dict[Any, int], summary_trace: Any) -> int:
    idx = _records.example_idx(summary_trace)
    counters[idx] = number = counters.get(idx, 0) + 1
    return number


def _episode_row(episode: Any, traces: Any, index: int, number: int, native: Any) -> dict[str, Any]:
    """The summary trace's row for the episode, carrying ``native`` as the native wrapper."""
    episode_id = _records.field(episode, "id")
    row = _trace_row(traces[index], number, episode_id, bare=False)
    row["sample_id"] = episode_id
    row["info"] = {
        **(row["info"] or {}),
        "native_wrapper": native,
        "native_trace_index": index,
    }
    return row


def _split_rows(episode: Any, number: int) -> list[dict[str, Any]]:
    """The over-size fallback: one row per trace, all with the episode's rollout number."""
    episode_id = _records.field(episode, "id")
    return [
        _trace_row(trace, number, episode_id, bare=False) for trace in _records.traces_of(episode)
    ]


def _warn_oversize(episode_id: Any, limit: int) -> None:
    logger.warning(
        "episode %s does not fit in one %d-byte sample request; sending one row per trace",
        episode_id,
        limit,
    )


def _trace_row(
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


def _encode_row(row: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The row's compact encoding and the row itself, non-finite numbers nulled in both.
    A clean row (the normal case) is encoded once and never walked in Python."""
    try:
        return encode_json(row), row
    except ValueError as error:
        if not is_nonfinite_error(error):
            raise
    row = sanitize_nonfinite(row)
    return encode_json(row), row


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with non-finite numbers nulled; checked by the C encoder, walked only if needed."""
    try:
        encode_json(row)
    except ValueError as error:
        if not is_nonfinite_error(error):
            raise
        return sanitize_nonfinite(row)
    return row

"""The v0 sample projection: producer episodes as rows of the legacy eval-sample table
(``POST /evaluations/{id}/samples``), and the training viewer's Parquet table built from them.

Inputs are duck-typed; verifiers is never imported. Record mappings
(``Episode.to_record()`` / ``Trace.to_record()``) are read directly, with the values
verifiers derives (reward, truncation, branches, usage) recomputed from the JSON. A trace
object is read through its properties (``reward``, ``branches``, ``usage``, ...) with pydantic
values dumped, and so is an episode object's summary trace, with ``to_record()`` as the native
wrapper (as in prime-runs 0.1.4); an episode object whose traces are mere handles (no
``agent``) is projected from its ``to_record()``. For verifiers' objects all give the same rows.

Which records become rows in :func:`build_samples`:

* an episode object (has ``traces``), or an episode mapping (has a ``traces`` key), is
  projected. Unlike prime-runs 0.1.4, which skipped JSON episodes, mappings are projected too;
* a mapping that already has ``sample_id`` is a finished v0 row and passes through unchanged;
* anything else, notably a bare trace in either form, gives no row, and so does an episode
  with no traces (which also does not advance the rollout numbering).

One row per episode: the projection of its summary trace (:func:`summary_trace_index`: the
first trainable one, else the first) with the whole episode record under
``info.native_wrapper``. An episode whose row would not fit in one request is sent as one row
per trace instead. Non-finite numbers become ``null``. :func:`batch_samples` packs rows into
requests under the same ceiling.

Rows share sub-objects with mapping inputs (nothing is deep-copied): treat inputs and rows as
read-only. An episode mapping is taken to be in ``Episode.to_record()`` form (null fields
already dropped); :func:`trace_to_sample` on a bare trace mapping drops them itself.

Every public name of 0.1.4's ``prime_runs.projection`` is here with its signature
(``docs/coming-from-0.1.4.md``); ``MAX_SAMPLES_PAYLOAD_BYTES`` is 0.1.4's spelling of
``MAX_REQUEST_BYTES``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import prime_runs._records.access as _records
import prime_runs._records.rawtraces as _rawtraces
import prime_runs._records.skeleton as _skeleton
import prime_runs._records.traintable as _train_table
import prime_runs._records.v0rows as _v0rows
from prime_runs._records.jsonio import decode_record, encode_json, encode_record
from prime_runs._records.v0rows import ENVELOPE_BYTES
from prime_runs.errors import RecordError

__all__ = [
    "ENVELOPE_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_SAMPLES_PAYLOAD_BYTES",
    "batch_samples",
    "build_samples",
    "episode_to_samples",
    "episodes_to_parquet_bytes",
    "json_bytes",
    "parquet_available",
    "project_episode_bytes",
    "summary_trace_index",
    "trace_to_sample",
    "train_sample_schema",
]

#: The platform's ceiling on one ``POST /samples`` body, envelope included (25 MiB).
MAX_REQUEST_BYTES = 26_214_400
#: 0.1.4's name for :data:`MAX_REQUEST_BYTES`.
MAX_SAMPLES_PAYLOAD_BYTES = MAX_REQUEST_BYTES


def trace_to_sample(
    trace: Any, rollout_number: int = 1, episode_id: str | None = None
) -> dict[str, Any]:
    """One trace (object or record mapping) as a v0 sample row.

    ``completion`` is the last branch's messages and ``trajectory`` has one entry per branch;
    each non-null sub-reward's score is copied to a top-level key unless that key is taken.
    Non-finite numbers become ``null``.
    """
    return _v0rows.finite(_v0rows.trace_row(trace, rollout_number, episode_id, bare=True))


def build_samples(
    episodes: Iterable[Any],
    rollout_numbers: dict[Any, int] | None = None,
    *,
    rollout_counters: dict[Any, int] | None = None,
) -> list[dict[str, Any]]:
    """Project ``episodes`` (objects or mappings, see the module docstring) to v0 rows.

    Rollout numbers count per example (the summary trace's ``task.data.idx``) from 1. They
    restart with every call unless the caller passes the same dict to each call (a streaming
    exporter keeps one per run), positionally as 0.1.4 did (``rollout_numbers``) or as
    ``rollout_counters=``; callers sharing a dict serialize their calls.
    """
    counters = _counters(rollout_numbers, rollout_counters)
    rows: list[dict[str, Any]] = []
    for record in episodes:
        if isinstance(record, Mapping) and "sample_id" in record:
            rows.append(record)  # type: ignore[arg-type]  # already a v0 row
            continue
        source = _v0rows.source_of(record)
        if source is None:
            continue
        number = _v0rows.next_number(counters, source.traces[source.trace_index])
        rows.extend(_v0rows.rows_of(source, number, _request_limit()))
    return rows


def episode_to_samples(episode: Any, rollout_number: int) -> list[dict[str, Any]]:
    """One episode's rows with the given rollout number (no numbering state), as in
    :func:`build_samples`: normally one row, one per trace when that row would not fit in a
    request, none for an episode without traces."""
    source = _v0rows.source_of(episode)
    if source is None:
        if _records.is_episode(episode):
            return []
        raise TypeError(
            "episode_to_samples() takes an episode (an object with `traces` or a mapping with "
            f"a 'traces' key), got {type(episode).__name__}"
        )
    return _v0rows.rows_of(source, rollout_number, _request_limit())


def summary_trace_index(episode: Any) -> int:
    """The index of the trace that represents ``episode`` (object or mapping) in its row and
    its rollout numbering: the first trainable trace, else 0 (also for no traces)."""
    if not _records.is_episode(episode):
        raise TypeError(
            "summary_trace_index() takes an episode (an object with `traces` or a mapping with "
            f"a 'traces' key), got {type(episode).__name__}"
        )
    return _records.summary_trace_index(_records.traces_of(episode))


def json_bytes(value: Any) -> int:
    """The size of ``value`` as the request body encodes it (compact UTF-8 JSON)."""
    return len(encode_json(value))


def batch_samples(samples: Sequence[Any]) -> list[list[Any]]:
    """``samples`` packed greedily, in order, into batches whose ``{"samples":[...]}`` body
    (envelope and commas counted) fits :data:`MAX_SAMPLES_PAYLOAD_BYTES`.

    A sample too large to send even alone raises :class:`~prime_runs.RecordError` (a
    ``ValueError``) rather than being dropped, and so does one holding NaN or Infinity; one
    JSON cannot encode at all raises ``TypeError``. Each names the sample's index.
    """
    limit = _request_limit()
    sizes = [_sample_size(index, sample) for index, sample in enumerate(samples)]
    for index, sample_bytes in enumerate(sizes):
        if ENVELOPE_BYTES + sample_bytes > limit:
            raise RecordError(
                f"sample {index} is too large to upload "
                f"({ENVELOPE_BYTES + sample_bytes} > {limit} bytes)"
            )
    return _v0rows.packed(samples, sizes, limit)


def _sample_size(index: int, sample: Any) -> int:
    try:
        return json_bytes(sample)
    except ValueError as error:  # NaN/Infinity (rows from build_samples never hold one)
        raise RecordError(f"sample {index} cannot be sent: {error}") from error
    except TypeError as error:
        raise TypeError(f"sample {index} is not JSON-serializable: {error}") from error


def parquet_available() -> bool:
    """Whether pyarrow can be imported (``pip install 'prime-runs[train]'``)."""
    return _train_table.available()


def train_sample_schema() -> Any:
    """The training viewer's table schema (a ``pyarrow.Schema``); needs pyarrow."""
    return _train_table.schema()


def episodes_to_parquet_bytes(
    episodes: Iterable[Any], run_id: str, step: int, *, sample_id_offset: int = 0
) -> bytes | None:
    """One training step's episodes as the viewer's Parquet table (snappy): a row per v0 row
    of :func:`build_samples` that has a trajectory, plus the training columns (``advantage``
    from the summary trace's ``info``, ``env_name`` from ``env.id``). ``sample_id`` counts
    from ``sample_id_offset`` over the v0 rows. ``None`` when no row has a trajectory. Needs
    pyarrow; raises ``ImportError`` saying how to install it when it is missing."""
    _train_table.check_arguments(run_id, step, sample_id_offset)
    episodes = list(episodes)
    return _train_table.encode(episodes, build_samples(episodes), run_id, step, sample_id_offset)


def _counters(
    rollout_numbers: dict[Any, int] | None, rollout_counters: dict[Any, int] | None
) -> dict[Any, int]:
    if rollout_numbers is not None and rollout_counters is not None:
        if rollout_numbers is not rollout_counters:
            raise TypeError(
                "build_samples() got two rollout counter dicts: pass one, either positionally "
                "(rollout_numbers) or as rollout_counters="
            )
    counters = rollout_numbers if rollout_numbers is not None else rollout_counters
    if counters is None:
        return {}
    if not isinstance(counters, dict):
        raise TypeError(
            "build_samples() rollout counters must be a dict of example idx to the last rollout "
            f"number, got {type(counters).__name__}"
        )
    return counters


def _request_limit() -> int:
    # Two spellings of one ceiling (0.1.4's and ours); lowering either (a test) lowers it.
    return min(MAX_REQUEST_BYTES, MAX_SAMPLES_PAYLOAD_BYTES)


def project_episode_bytes(
    episode_bytes: bytes,
    rollout_counters: dict[Any, int],
    *,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    record: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> list[bytes]:
    """See :func:`project_episode_parts`; each row joined into one ``bytes``."""
    rows = project_episode_parts(
        episode_bytes,
        rollout_counters,
        max_request_bytes=max_request_bytes,
        record=record,
        exact=exact,
    )
    return [bytes(row) for row in rows]


def project_episode_parts(
    episode_bytes: bytes,
    rollout_counters: dict[Any, int],
    *,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    record: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> list[bytes | _skeleton.Spliced]:
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
    ``exact``: this SDK wrote the bytes (no NaN, no integer beyond 64 bits), so the rows are
    read from them with the values they copy left as they are, a large record's long values
    not even copied (``_records.rawtraces``), and a whole decode skips the scan for a large
    integer.

    The summary row comes back as its parts (``_records.skeleton.Spliced``: ``len()`` is its
    size, ``bytes()`` joins it), the episode's bytes among them, so a request body is the
    only joined copy; :func:`project_episode_bytes` joins each row.
    """
    number = None
    if record is None and exact:
        source = _rawtraces.episode_source(episode_bytes)
        if source is not None:
            number = _v0rows.count_rollout(rollout_counters, _rawtraces.example_idx(source))
            rows = _rawtraces.rows(source, number, bytes(episode_bytes), max_request_bytes)
            if rows is not None:
                return rows
            # Rare (an odd value): the whole record decides, same number.
    return _project_whole(episode_bytes, rollout_counters, max_request_bytes, record, exact, number)


def _project_whole(
    episode_bytes: bytes,
    rollout_counters: dict[Any, int],
    max_request_bytes: int,
    record: Mapping[str, Any] | None,
    exact: bool,
    number: int | None,
) -> list[bytes | _skeleton.Spliced]:
    """:func:`project_episode_parts` from the whole record (decoded unless given);
    ``number``: the rollout number already drawn for it, if any."""
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
    source = _v0rows.Source(record, traces, _records.summary_trace_index(traces), record, False)
    if number is None:
        number = _v0rows.next_number(rollout_counters, traces[source.trace_index])
    encoded: bytes | _skeleton.Spliced | None = None
    if not saw_nonfinite:  # otherwise the bytes are not strict JSON and cannot be reused
        encoded = _spliced_row(source, number, bytes(episode_bytes))
    if encoded is None:
        encoded, _ = _v0rows.encode_row(_v0rows.episode_row(source, number))
    if ENVELOPE_BYTES + len(encoded) <= max_request_bytes:
        return [encoded]
    _v0rows.warn_oversize(_records.field(record, "id"), max_request_bytes)
    rows: list[bytes | _skeleton.Spliced] = [
        _v0rows.encode_row(row)[0] for row in _v0rows.split_rows(source, number)
    ]
    return rows


def _spliced_row(
    source: _v0rows.Source, number: int, episode_bytes: bytes
) -> _skeleton.Spliced | None:
    """The summary row of a decoded record, with the episode's bytes spliced in as its
    native wrapper and each branch's messages encoded once (the last branch appears twice),
    rather than encoded again inside it; ``None`` if a slot did not come out exactly once
    (the caller encodes the plain row)."""
    row = _v0rows.episode_row(source._replace(native=_skeleton.slot(0)), number)
    pieces: list[Any] = [episode_bytes]
    for entry in row["trajectory"]:  # fresh dicts, safe to change
        try:
            # Non-finite numbers come out as null, as the plain path writes them.
            pieces.append(encode_record(entry["messages"]))
        except (TypeError, ValueError):  # the plain path reports what is wrong
            return None
        entry["messages"] = _skeleton.slot(len(pieces) - 1)
    pieces.append(pieces[-1] if len(pieces) > 1 else b"[]")
    row["completion"] = _skeleton.slot(len(pieces) - 1)
    return _skeleton.splice_once(encode_record(row), pieces)

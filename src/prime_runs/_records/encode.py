"""Turning a producer's record into the bytes every sink shares.

A record is encoded exactly once, on the producer's thread, already stamped
with the run (design §4.4): the journal, the Prime Traces line and the v0
sample row all reuse these bytes, and the producer may mutate its object as
soon as ``log_episodes`` returns.

A run whose id may still change (offline, or a raw ``run`` span's run not registered yet)
sends its records later under the platform's id. Only the stamps may change then, and a
producer may quote the id anywhere in its content, so the encoder says where it wrote them
(``Encoded.stamps``, :func:`stamp_sites`): ``_records/restamp`` rewrites those bytes only.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, is_dataclass
from typing import Any, TypeGuard

from prime_runs._records.item import Item, RecordKey
from prime_runs._records.jsonio import encode_json, encode_record_marked
from prime_runs.errors import RecordError

EPISODE = "episode"
TRACE = "trace"

# A run id whose JSON string can be counted in a record's bytes (see ``stamp_sites``): no
# quote or backslash inside, and no character JSON writes between two strings.
_COUNTABLE = re.compile(rb'"[A-Za-z0-9._~-]+"')
# Stamped in place of the run id when the content names the id too: random per process,
# so no content holds it (checked all the same).
_SENTINEL_ID = f"prime-runs-stamp-{uuid.uuid4().hex}"
_SENTINEL = encode_json(_SENTINEL_ID)


@dataclass(frozen=True, slots=True)
class Encoded:
    """One record, encoded and stamped. ``data`` is compact JSON without a newline."""

    kind: str  # EPISODE or TRACE
    data: bytes
    record: Mapping[str, Any]  # the producer's mapping (unstamped); read, never mutated
    restamped: bool  # the record named a different run id, replaced on the copy
    problem: str | None  # what Prime Traces would reject in it (checked before sending)
    owned: bool = False  # ``record`` came from to_record(): nobody else holds it
    exact: bool = False  # orjson wrote ``data``: it decodes exactly without a scan (see _json)
    # The delivery keeps ``record`` (owned) for the sample row or the training table: only
    # where the row cannot be read from ``data`` (``_records.rawtraces``), which is faster
    # and does not keep hundreds of objects a record alive for the garbage collector.
    keep_mapping: bool = False
    # Where ``data`` holds the run id's stamps (offsets of its JSON string), when the run's
    # id may change (``encode(locate=True)``); ``()`` when they could not be told apart.
    stamps: tuple[int, ...] | None = None
    quotes_id: bool = False  # the content names the run id too (the journal notes ``stamps``)

    def for_delivery(self, key: RecordKey | None) -> Item:
        """The record as the run's delivery holds it (``Delivery.hand``): the decoded
        mapping only when nobody else holds it, so a producer's later change cannot leak,
        and only when it is wanted (``keep_mapping``)."""
        mapping = self.record if self.keep_mapping else None
        return Item(
            self.kind,
            self.data,
            key,
            self.problem,
            record_id(self.record),
            mapping,
            None,
            self.exact,
            self.stamps,
        )


def to_mapping(record: object) -> Mapping[str, Any]:
    """The record as a mapping: a mapping itself, or what ``to_record()`` returns."""
    if _is_mapping(record):
        return record
    to_record = getattr(record, "to_record", None)
    if not callable(to_record):
        hint = (
            "; for a dataclass, log dataclasses.asdict(obj)"
            if is_dataclass(record)
            else " (verifiers Episode/Trace objects do)"
        )
        raise RecordError(
            f"cannot log this {type(record).__name__} object: a record must be a mapping or "
            f"have a to_record() method{hint}"
        )
    value = to_record()
    if not isinstance(value, Mapping):
        raise RecordError(
            f"{type(record).__name__}.to_record() returned a {type(value).__name__}, "
            "expected a mapping"
        )
    return value


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # ``dict`` first: the abstract class's check costs several times more (a record's
    # members are checked several times each on the producer's thread).
    return value.__class__ is dict or isinstance(value, Mapping)


def kind_of(record: Mapping[str, Any]) -> str:
    """An episode is a record with a ``traces`` key; anything else is a bare trace."""
    return EPISODE if "traces" in record else TRACE


def _stamp_run(run: object, run_id: str, run_type: str) -> tuple[dict[str, Any], bool]:
    if _is_mapping(run):
        changed = run.get("id") not in (None, run_id)
        stamped = dict(run)
        stamped["id"] = run_id
        stamped["type"] = run_type
        return stamped, changed
    return {"id": run_id, "type": run_type}, False


def stamp(record: Mapping[str, Any], run_id: str, run_type: str) -> tuple[dict[str, Any], bool]:
    """A shallow copy of ``record`` with ``run.id``/``run.type`` set on it and its members.

    Other ``run`` keys (``name``, ``work``) are kept; a member without a ``run``
    gets the envelope's. Returns the copy and whether a different run id was replaced.
    """
    copy = dict(record)
    run, replaced = _stamp_run(record.get("run"), run_id, run_type)
    copy["run"] = run
    traces = record.get("traces")
    if isinstance(traces, (list, tuple)):  # a tuple is written as a JSON array too
        members = []
        for member in traces:
            if _is_mapping(member):
                member_copy = dict(member)
                if "run" in member:
                    member_copy["run"], member_replaced = _stamp_run(
                        member["run"], run_id, run_type
                    )
                    replaced = replaced or member_replaced
                else:
                    member_copy["run"] = run
                members.append(member_copy)
            else:
                members.append(member)
        copy["traces"] = members
    return copy, replaced


def stamp_count(record: Mapping[str, Any]) -> int:
    """How many run stamps :func:`stamp` writes into ``record``: the envelope's and each
    mapping member's."""
    traces = record.get("traces")
    if not isinstance(traces, (list, tuple)):
        return 1
    return 1 + sum(1 for m in traces if _is_mapping(m))


def stamp_sites(data: bytes, quoted: bytes, expected: int) -> tuple[int, ...] | None:
    """Where ``data`` holds ``quoted`` (a run id as a JSON string) when it holds it exactly
    ``expected`` times; None otherwise, or when the id cannot be counted.

    For bytes holding ``expected`` stamps of that id, the occurrences are then the stamps:
    each stamp is one, and occurrences never overlap or hide one another (an id of
    ``_COUNTABLE`` characters cannot begin or end between two JSON strings). Any other
    occurrence (a value, a key, the id after an escaped quote) makes the count differ."""
    if not _countable(quoted):
        return None
    sites: list[int] = []
    find = data.find
    at = find(quoted)
    while at >= 0:
        if len(sites) == expected:
            return None
        sites.append(at)
        at = find(quoted, at + len(quoted))
    return tuple(sites) if len(sites) == expected else None


@functools.lru_cache(maxsize=16)
def _countable(quoted: bytes) -> bool:
    return _COUNTABLE.fullmatch(quoted) is not None


@functools.lru_cache(maxsize=16)
def _quoted(run_id: str) -> bytes:
    return encode_json(run_id)


def _located(
    mapping: Mapping[str, Any], encoded: tuple[bytes, bool], run_id: str, run_type: str
) -> tuple[bytes, bool, tuple[int, ...], bool]:
    """The record's ``(data, exact)`` with where its stamps lie, and whether its content
    names the id too. Usually the id occurs only as the stamps. When the content names it,
    the record is encoded again with a stamp no content holds, and the id is written where
    that stamp lies: the same bytes, with the stamps known."""
    data, exact = encoded
    quoted = _quoted(run_id)
    expected = stamp_count(mapping)
    sites = stamp_sites(data, quoted, expected)
    if sites is not None:
        return data, exact, sites, False
    marked, exact = encode_record_marked(stamp(mapping, _SENTINEL_ID, run_type)[0])
    found = stamp_sites(marked, _SENTINEL, expected)
    if found is None:  # cannot happen; the delivery then decodes the record to restamp it
        return data, encoded[1], (), True
    parts: list[bytes | memoryview] = []
    view = memoryview(marked)
    shift = len(quoted) - len(_SENTINEL)
    last = 0
    for at in found:
        parts += (view[last:at], quoted)
        last = at + len(_SENTINEL)
    parts.append(view[last:])
    stamps = tuple(at + n * shift for n, at in enumerate(found))
    return b"".join(parts), exact, stamps, True


def encode(record: object, run_id: str, run_type: str, *, locate: bool = False) -> Encoded:
    """Encode one record for every sink. Raises ``RecordError`` for bad input.
    ``locate``: the run's id may change; find where the stamps lie (``Encoded.stamps``)."""
    mapping = to_mapping(record)
    stamped, replaced = stamp(mapping, run_id, run_type)
    stamps: tuple[int, ...] | None = None
    quotes_id = False
    try:
        data, exact = encode_record_marked(stamped)
        # orjson's buffer has room to spare (about 1.6x on these records); the ledger may
        # hold thousands of records, so they are kept at their exact size.
        data = bytes(memoryview(data))
        if locate:
            data, exact, stamps, quotes_id = _located(mapping, (data, exact), run_id, run_type)
    except RecursionError as exc:
        raise RecordError(
            "record is nested too deeply to encode as JSON here (past Python's recursion "
            "limit); keep it a few hundred levels deep at most, or store a deep value as a "
            "JSON string"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise RecordError(
            f"record is not JSON-serializable ({exc}); records must hold only strings, "
            "numbers, booleans, None, lists and mappings with string keys: convert the value "
            "first (a datetime with .isoformat() or .timestamp(), a set with list())"
        ) from exc
    kind = kind_of(mapping)
    owned = mapping is not record
    problem = traces_problem(kind, stamped)
    if problem is not None and "sample_id" not in mapping:
        # Refused now, online and offline alike, rather than by the platform at upload or
        # `prime-runs sync` time. A finished v0 sample row (``sample_id``) is no trace: it
        # still goes to the sample table, and Prime Traces counts it as not stored.
        raise RecordError(f"{problem} (see docs/records.md)")
    # The v0 row reads exact bytes faster than the mapping; a training run's table and a
    # record the row cannot read from its bytes read the mapping.
    keep = owned and not (exact and problem is None and run_type != "train")
    return Encoded(kind, data, mapping, replaced, problem, owned, exact, keep, stamps, quotes_id)


def traces_problem(kind: str, record: Mapping[str, Any]) -> str | None:
    """What Prime Traces would reject in this record (None if fine): the one check of the
    rules docs/records.md lists, applied when a record is logged (online and offline), by
    the live exporter and by ``prime-runs sync``. Each message names the fix."""
    if not isinstance(record.get("id"), str) or not record.get("id"):
        return (
            "invalid_trace: the record needs a non-empty string `id`; give each record a "
            "unique one (verifiers uses uuid.uuid4().hex)"
        )
    if kind == EPISODE:
        traces = record.get("traces")
        if not isinstance(traces, (list, tuple)):  # a tuple is written as a JSON array
            return "invalid_trace: an episode's `traces` must be a list (possibly empty)"
        for member in traces:
            if not _is_mapping(member) or not isinstance(member.get("id"), str):
                return "invalid_trace: every member trace needs a string `id`; give it one"
        return None
    timing = record.get("timing")
    start = timing.get("start") if isinstance(timing, Mapping) else None
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        return (
            "invalid_trace: a trace needs a numeric `timing.start` (seconds since the epoch, "
            "e.g. time.time() when the rollout started); a record with a `traces` list is "
            "an episode and needs none"
        )
    return None


def record_id(record: Any) -> str | None:
    """The record's ``id`` when it is a string (for messages and keys), else None."""
    value = record.get("id") if _is_mapping(record) else None
    return value if isinstance(value, str) else None

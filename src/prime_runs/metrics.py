"""The run summary: run-level means over episodes, in the shape the eval dashboard reads
(``{"avg_reward", "avg_metrics", "avg_error"}``). This is the aggregation verifiers used, so
migrated runs keep their numbers. Pass the result to ``finish(summary=...)``.

Rules (platform contract, summary metrics):

* rewards and metrics are averaged over the *trainable* traces; only when no candidate trace
  is trainable are all of them used (a judge or simulated user would otherwise drag every mean
  down with structural zeros);
* ``avg_metrics[name]`` averages the non-null sub-reward scores (unweighted) and the non-null
  metrics of that name, each over the traces that have it; a trace with the name in both
  counts once, with its ``metrics`` value;
* ``avg_error`` is the share of episodes whose own ``ok`` is false, counting episodes without
  traces.

Inputs are verifiers objects or their JSON records. A bare trace (no ``traces``) given where
an episode is expected counts as a one-trace unit of work: its trace is a candidate and its own
``ok`` counts toward ``avg_error``.

A record whose rewards or metrics are not numbers a float can hold (a string, or an integer
such as ``10**400``) is bad input: it is left out of the summary whole, and counted
(``SummaryAccumulator.skipped``). Nothing here raises because of a record's content.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable
from typing import Any, TypedDict

import msgspec

import prime_runs._records.access as _records
from prime_runs._records.jsonio import decode_record, is_utf8

__all__ = ["RunSummary", "SummaryAccumulator", "from_encoded", "from_episodes"]


class RunSummary(TypedDict):
    avg_reward: float
    avg_metrics: dict[str, float]
    avg_error: float


class _Means:
    """Running sums for one set of scored traces: O(1) memory per metric name."""

    __slots__ = ("counts", "reward_sum", "sums", "traces")

    def __init__(self) -> None:
        self.traces = 0
        self.reward_sum: Any = 0  # int 0 like sum(), so sums match verifiers' bit for bit
        self.sums: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add(self, reward: Any, values: dict[str, Any]) -> None:
        self.traces += 1
        try:
            self.reward_sum += reward
        except OverflowError:  # a huge integer sum met a float: the mean is not finite
            self.reward_sum = math.copysign(math.inf, self.reward_sum)
        sums, counts = self.sums, self.counts
        for name, value in values.items():
            total = sums.get(name)
            if total is None:
                sums[name] = 0.0 + value  # a float from the start, as sum(..., 0.0) would
                counts[name] = 1
            else:
                sums[name] = total + value
                counts[name] += 1

    def merge(self, other: _Means) -> None:
        self.traces += other.traces
        try:
            self.reward_sum += other.reward_sum
        except OverflowError:
            self.reward_sum = math.copysign(math.inf, self.reward_sum)
        for name, total in other.sums.items():
            self.sums[name] = self.sums.get(name, 0.0) + total
            self.counts[name] = self.counts.get(name, 0) + other.counts[name]


# What one trace contributes: (trainable, reward, {metric name: value}).
_Scored = tuple[bool, Any, dict[str, Any]]


class _Unusable(Exception):
    """A record's reward or metric is not a number that fits a float."""


class _NotAsStored(Exception):
    """A value the summary reads is stored differently in the journal (a non-finite float is
    written as null), or the record is not made of plain dicts: decode the stored bytes."""


def _number(value: Any) -> Any:
    """``value`` when it is a number a float can hold (bools count, as in ``sum``)."""
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            raise _Unusable from None
        return value
    raise _Unusable


def _score(trace: Any) -> _Scored:
    values = {name: _number(value) for name, value in _records.reward_scores(trace)}
    for name, value in _records.metrics(trace).items():
        if value is not None:
            values[name] = _number(value)  # a metric wins over a sub-reward of the same name
    try:
        reward = _number(_records.reward(trace))
    except (OverflowError, TypeError, AttributeError):
        raise _Unusable from None
    return _records.is_trainable(trace), reward, values


def _read(record: Any) -> tuple[bool, list[_Scored]]:
    """One episode (or bare trace) as (failed, its traces' contributions), read in full
    before any state changes so a malformed record leaves the tally untouched. Raises
    ``_Unusable`` for a record that cannot be summarized."""
    try:
        members = _records.traces_of(record) if _records.is_episode(record) else (record,)
        return not _records.is_ok(record), [_score(trace) for trace in members]
    except (AttributeError, TypeError, ValueError, OverflowError) as exc:
        raise _Unusable from exc


# A logged record is summarized on the producer's thread, so the two functions below are the
# per-record cost: one pass over each trace's rewards and metrics, and one check of all its
# numbers at once. They give what ``_read`` gives for the record's JSON line, or raise
# ``_NotAsStored`` (the caller then decodes the line).


def _nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _score_stored(trace: dict[str, Any]) -> _Scored:
    values: dict[str, Any] = {}
    reward: Any = 0  # int 0 like verifiers' sum(), so an unscored trace reports 0
    for name, entry in (trace.get("rewards") or {}).items():
        if entry is None or (score := entry.get("score")) is None:
            continue
        values[name] = score
        reward += score * entry.get("weight", 1.0)
    for name, value in (trace.get("metrics") or {}).items():
        if value is not None:
            values[name] = value  # a metric wins over a sub-reward of the same name
    # A record that could be encoded holds no number types but int and float: fsum takes
    # every value as a float, so a finite total means each is a number a float holds
    # (a non-finite one, stored as null, or one too big for a float, raises or is not).
    if not (math.isfinite(math.fsum(values.values())) and math.isfinite(reward)):
        raise _NotAsStored
    agent = trace.get("agent")
    if agent.__class__ is dict:
        trainable = agent.get("trainable", True)
    else:
        trainable = True if agent is None else _records.field(agent, "trainable", True)
    if trainable.__class__ is not bool and _nonfinite(trainable):
        raise _NotAsStored
    return bool(trainable), reward, values


def _read_stored(record: Any) -> tuple[bool, list[_Scored]]:
    """``_read`` of ``record`` as its JSON line reads back, for records of plain dicts."""
    if record.__class__ is not dict:
        raise _NotAsStored
    try:
        if "traces" not in record:
            members: Any = (record,)
        elif (members := record["traces"]).__class__ is not list:
            raise _NotAsStored
        scored = []
        for trace in members:
            if trace.__class__ is not dict:
                raise _NotAsStored
            scored.append(_score_stored(trace))
        ok = record.get("ok", False)
        if ok.__class__ is not bool and _nonfinite(ok):
            raise _NotAsStored
        return not ok, scored
    except (AttributeError, TypeError, ValueError, OverflowError):
        raise _NotAsStored from None


# What the tally reads of a record's line. msgspec parses the rest (messages, tools, task
# data) without building it, so a journal line read back costs a third of a decode: the
# owner's finish() reads back every record its folder's workers journaled.
class _ScoredFields(TypedDict, total=False):
    rewards: Any
    metrics: Any
    agent: Any


class _LineFields(_ScoredFields, total=False):
    traces: list[_ScoredFields]
    ok: Any


_LINE = msgspec.json.Decoder(_LineFields)


def _read_line(data: bytes) -> tuple[bool, list[_Scored]]:
    """``_read`` of the record on a JSON line, from the fields it reads alone, at any size
    (a large line's long strings are never built). Raises ``_NotAsStored`` where the whole
    decode must judge: a line that is not a record of plain dicts and finite numbers, not
    strict JSON, or not valid UTF-8 (msgspec does not check the text of what it skips)."""
    if not (data.isascii() or is_utf8(data)):
        raise _NotAsStored
    try:
        fields = _LINE.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise _NotAsStored from None
    return _read_stored(fields)


class _Tally:
    """The state behind both :func:`from_episodes` and :class:`SummaryAccumulator`, so the
    two agree exactly when fed the same records in the same order."""

    __slots__ = ("episodes", "failed", "skipped", "trainable", "untrainable")

    def __init__(self) -> None:
        # Each trace is added to one of the two: when no trace is trainable, the untrainable
        # sums are exactly the sums over all traces that the rules fall back to.
        self.trainable = _Means()
        self.untrainable = _Means()
        self.episodes = 0
        self.failed = 0
        self.skipped = 0  # records left out: unreadable, or numbers a float cannot hold

    def add_unit(self, failed: bool) -> None:
        self.episodes += 1
        self.failed += failed

    def add_scored(self, scored: Iterable[_Scored]) -> None:
        for trainable, reward, values in scored:
            (self.trainable if trainable else self.untrainable).add(reward, values)

    def merge(self, other: _Tally) -> None:
        self.episodes += other.episodes
        self.failed += other.failed
        self.skipped += other.skipped
        self.trainable.merge(other.trainable)
        self.untrainable.merge(other.untrainable)

    def result(self) -> RunSummary:
        means = self.trainable if self.trainable.traces else self.untrainable
        return {
            "avg_reward": means.reward_sum / means.traces if means.traces else 0.0,
            "avg_metrics": {name: total / means.counts[name] for name, total in means.sums.items()},
            "avg_error": self.failed / self.episodes if self.episodes else 0.0,
        }


def from_episodes(episodes: Iterable[Any], traces: Iterable[Any] | None = None) -> RunSummary:
    """The run summary over ``episodes`` (objects or record mappings).

    When ``traces`` is given, rewards and metrics are computed over those traces instead of
    the episodes' members, and the episodes only feed ``avg_error``. An empty run gives
    ``{"avg_reward": 0.0, "avg_metrics": {}, "avg_error": 0.0}``. Records that cannot be
    summarized (see the module notes) are left out.
    """
    if traces is None:
        accumulator = SummaryAccumulator()
        for record in episodes:
            accumulator.add(record)
        return accumulator.result()
    tally = _Tally()
    for record in episodes:
        tally.add_unit(not _records.is_ok(record))
    for trace in traces:
        try:
            tally.add_scored([_score(trace)])
        except _Unusable:
            tally.skipped += 1
    return tally.result()


def from_encoded(records: Iterable[bytes]) -> RunSummary:
    """The summary of records stored as JSON (a run's journal); undecodable ones are skipped."""
    accumulator = SummaryAccumulator()
    for data in records:
        accumulator.add_encoded(data)
    return accumulator.result()


class SummaryAccumulator:
    """Builds the run summary incrementally from the records a run logs, without keeping them.

    ``add`` takes an episode or a bare trace (record mapping or object); after any sequence of
    ``add`` calls, ``result()`` equals ``from_episodes`` over the same records in the same
    order. Thread-safe; memory grows only with the number of distinct metric names. Never
    raises because of a record: one that cannot be summarized is counted in ``skipped``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tally = _Tally()

    @property
    def skipped(self) -> int:
        """Records left out: not decodable, or with a reward or metric that is not a number
        a float can hold."""
        with self._lock:
            return self._tally.skipped

    def add(self, record: Any) -> bool:
        """Count ``record``; False when it was left out (see ``skipped``)."""
        try:
            failed, scored = _read(record)  # outside the lock: reading is the slow part
        except _Unusable:
            with self._lock:
                self._tally.skipped += 1
            return False
        return self._count(failed, scored)

    def add_logged(self, record: Any, data: bytes) -> bool:
        """Count a record logged as ``data`` (its JSON encoding) exactly as ``add_encoded``
        would, reading ``record`` instead of decoding ``data`` where that gives the same
        numbers (almost always: it costs a few microseconds, not a decode)."""
        try:
            failed, scored = _read_stored(record)
        except _NotAsStored:
            return self.add_encoded(data)
        return self._count(failed, scored)

    def _count(self, failed: bool, scored: list[_Scored]) -> bool:
        with self._lock:
            self._tally.add_unit(failed)
            self._tally.add_scored(scored)
        return True

    def add_encoded(self, data: bytes) -> bool:
        """Count one record stored as JSON; False when it was left out."""
        try:
            failed, scored = _read_line(data)
        except _NotAsStored:
            return self._add_decoded(data)
        return self._count(failed, scored)

    def _add_decoded(self, data: bytes) -> bool:
        try:
            # The fast exact decoder, for what ``_read_line`` leaves to a whole decode.
            record = decode_record(data)
        except ValueError:
            try:  # NaN literals, read as json.loads reads them
                record = json.loads(data)
            except ValueError:  # also a number too long to parse
                record = None
        if not isinstance(record, dict):
            with self._lock:
                self._tally.skipped += 1
            return False
        return self.add(record)

    def merge(self, other: SummaryAccumulator) -> None:
        """Add what ``other`` counted (its records after this one's)."""
        with other._lock:
            theirs = other._tally
            with self._lock:
                self._tally.merge(theirs)

    def result(self) -> RunSummary:
        with self._lock:
            return self._tally.result()

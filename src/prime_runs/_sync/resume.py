"""Sync's first step: the batches other deliverers noted (``_journal/batches``) and may
have sent, settled before anything else is sent.

A producer that exited or was killed, or an earlier sync, may have a request in flight
that the platform stores later. Its records must not go out in another batch:

- **Prime Traces.** The noted batch is sent again as exactly the same bytes (its records
  in the noted order, stamped as sync stamps them), under the same Idempotency-Key: the
  service stores it once, whichever request lands first. Should the bytes not come out
  the same (a record unreadable now), the batch is looked up by its records' ids once no
  request of it can still land, and only what is missing goes out.
- **The sample table** (no key). The noted append is looked up by its rows' ids among the
  rows appended since it (``stored_among``). What is found is never sent again. What is
  not found is sent only once no request of it can still be stored (``until``); until
  then its records stay pending, and the report says when to run sync again.

Batches of segments a live process still delivers are left to it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import prime_runs._journal.batches as _batches
from prime_runs._journal.runinfo import SAMPLES, SINK_LABELS, TRACES
from prime_runs._records.item import Deadline, Item, RecordKey
from prime_runs._sync.outgoing import outgoing
from prime_runs._sync.readback import Candidate, Unreadable, held_by_traces
from prime_runs.errors import APIError, describe
from prime_runs.exporters.traces import batch_key
from prime_runs.platform.sample_listing import stored_among

if TYPE_CHECKING:
    from prime_runs._records.restamp import Restamp
    from prime_runs._sync.syncer import _Syncer
    from prime_runs.exporters._channel import Channel

logger = logging.getLogger("prime_runs")

READ_TIMEOUT = 120.0


@dataclass
class Resumed:
    """What settling the noted batches left: records to keep pending this time (per
    sink), sample rows found stored, and when the last held request can no longer land."""

    held: dict[str, set[RecordKey]] = field(default_factory=dict)
    rows: set[str] = field(default_factory=set)
    until: float = 0.0
    writers: set[int] = field(default_factory=set)
    notes: list[_batches.Noted] = field(default_factory=list)

    def hold(self, batch: _batches.Noted, keys: list[RecordKey]) -> None:
        self.held.setdefault(batch.sink, set()).update(keys)
        self.until = max(self.until, batch.until)
        self.writers.add(batch.pid)

    def waiting(self) -> str | None:
        """The report's words for the records held back by requests that may still land."""
        count = sum(len(keys) for keys in self.held.values())
        if not count or not self.until:
            return None
        at = time.strftime("%H:%M:%S", time.localtime(self.until))
        pids = ", ".join(str(p) for p in sorted(self.writers))
        return (
            f"{count} records were sent by a process now gone (pid {pids}) in a request the "
            f"platform may still store until {at}; they were left pending so as not to store "
            f"them twice: run `prime-runs sync` again after {at}"
        )


def resume(
    syncer: _Syncer,
    sinks: dict[str, Channel],
    done: dict[str, set[RecordKey]],
    stamp: Restamp | None,
    failures: list[str],
) -> Resumed:
    """Settle every batch noted by a deliverer that is gone, before sync sends anything."""
    resumed = Resumed()
    archive = syncer.archive
    noted = [b for b in _batches.noted(archive.path) if b.sink in sinks]
    _batches.prune(archive.path, noted, done)
    for batch in noted:
        if batch.sink not in sinks:
            continue  # stopped by an earlier batch's failure: the rest waits for next time
        open_keys = [k for k in batch.keys if k not in done[batch.sink]]
        if not open_keys:
            continue
        if any(k.segment in syncer.busy for k in batch.keys):
            continue  # its writer still delivers it (the stream leaves its records too)
        resumed.notes.append(batch)
        if batch.sink == TRACES:
            _traces(syncer, sinks, batch, open_keys, stamp, resumed, failures)
        elif batch.sink == SAMPLES:
            _samples(syncer, batch, open_keys, resumed, failures)
    return resumed


def _traces(
    syncer: _Syncer,
    sinks: dict[str, Channel],
    batch: _batches.Noted,
    open_keys: list[RecordKey],
    stamp: Restamp | None,
    resumed: Resumed,
    failures: list[str],
) -> None:
    items = _items(syncer, batch.keys, stamp)
    if items is not None and batch_key(items) == batch.data.get("key"):
        # The same bytes: stored once, whether the earlier request lands before or after.
        syncer.export(sinks, TRACES, items, failures)
        if TRACES not in sinks:  # it failed: its records wait for the next sync
            resumed.held.setdefault(TRACES, set()).update(open_keys)
        return
    if _batches.window_left(batch):
        resumed.hold(batch, open_keys)
        return
    # No request of it can land any more: look its records up, send only what is missing.
    candidates = []
    read: Sequence[Item | None] = items or [None] * len(batch.keys)
    for key, item in zip(batch.keys, read, strict=True):
        if key in open_keys and item is not None and item.record_id:
            candidates.append(Candidate(key, item.kind, item.record_id))
    try:
        held = held_by_traces(syncer.settings, syncer.eval_id, candidates)
    except Unreadable as exc:
        syncer.notes.append(
            f"could not check which traces of an unfinished batch landed ({exc}): resent, "
            "so some may be stored twice"
        )
        return
    syncer.ack(TRACES, sorted(held), found=True)


def _samples(
    syncer: _Syncer,
    batch: _batches.Noted,
    open_keys: list[RecordKey],
    resumed: Resumed,
    failures: list[str],
) -> None:
    data = batch.data
    ids, since, before = data.get("ids"), data.get("since"), data.get("before") or []
    if not (_strings(ids) and isinstance(since, int) and _strings(before)):
        return  # not a note of ours: its records go as if never sent
    try:
        found = stored_among(
            syncer.client,
            syncer.eval_id,
            ids,
            since,
            before,
            Deadline(time.monotonic() + READ_TIMEOUT),
        )
    except APIError as exc:
        failures.append(
            f"{SINK_LABELS[SAMPLES]}: could not check whether an unfinished append landed "
            f"({describe(exc)}); its records were not resent"
        )
        resumed.held.setdefault(SAMPLES, set()).update(open_keys)
        return
    resumed.rows |= found
    if not found.issuperset(ids) and _batches.window_left(batch):
        resumed.hold(batch, open_keys)


def _items(
    syncer: _Syncer, keys: tuple[RecordKey, ...], stamp: Restamp | None
) -> list[Item] | None:
    """The batch's records as sync sends them, in the noted order; None if one is gone."""
    items = []
    for key in keys:
        try:
            data = syncer.archive.read(key)
        except OSError:
            return None
        item, _sample_id, _why = outgoing(key, data, stamp)
        if item is None or item.problem is not None:
            return None
        items.append(item)
    return items


def _strings(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)

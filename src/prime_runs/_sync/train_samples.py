"""``prime-runs sync`` of a training run's sample table: the Parquet objects per dispatch
step that the live ``train_samples`` sink sends (presign, PUT, confirm: contract
Appendix A), for the episodes no sink settled.

The live sink's own code makes and sends the objects (``exporters/train_samples``): sync
reads the pending episodes from the journal, groups them by the step of their object (one
object per step, split only where a live export's claim would split it) and hands each
group to a ``TrainSamplesSink``. What it settles is journaled under ``train_samples`` as
the live sink's outcomes are, so a run partly delivered live sends only the rest and a
second sync sends nothing. Segments a live process still holds (``_journal/lease``) are
left to it.

Nothing twice after a kill: between an object's upload and its confirm, the sink notes it
in the run folder (step, key, records: ``_journal/batches``), the live sink and sync's
alike. A sync first confirms again every object noted by a deliverer that is gone (a
confirm replays safely) rather than sending a second one; a confirm the platform refuses
(the object never landed) lets its records go again. sync.json keeps each step's next
``sample_id`` range, so no two objects of a step share ids; a run that had a live sink
numbers from the upper half of the ranges, which its owner (numbering from 0) does not
reach.

Without pyarrow nothing is sent: the episodes stay pending and the report says how to
send them.
"""

from __future__ import annotations

import time
from typing import Any

import prime_runs._journal.batches as _batches
import prime_runs._journal.lease as _lease
from prime_runs._delivery.delivery import BATCH_BYTES, BATCH_ITEMS
from prime_runs._journal.archive import (
    RECORDS_DIR,
    REJECTED,
    SKIPPED,
    RecordKey,
    RunArchive,
    settled_name,
)
from prime_runs._journal.nofollow import segment_paths
from prime_runs._journal.runinfo import EPISODE_KIND, EPISODES, TRAIN_SAMPLES, RunInfo
from prime_runs._plural import quantity
from prime_runs._records.item import Deadline, Item, Outcome, record_keys
from prime_runs._records.lines import parse_record
from prime_runs._sync.report import Tally
from prime_runs.errors import PrimeRunsError, ValidationRejectedError, describe
from prime_runs.exporters.train_samples import (
    SAMPLE_ID_RANGES,
    TrainSamplesSink,
    Uploaded,
    parquet_available,
    table_step,
)
from prime_runs.platform.training import TrainingPlatform

STATE = "train_samples"  # sync.json: {"run_id", "ranges": {step: next}}
# A live delivery takes at most this much at once: a step's episodes beyond it become a
# second object there, and here too.
CHUNK_RECORDS = BATCH_ITEMS
CHUNK_BYTES = BATCH_BYTES
CHUNK_TIMEOUT = 300.0

Indexed = list[tuple[RecordKey, int]]  # (key, size) of pending episodes, in journal order


def send_samples(info: RunInfo, platform: TrainingPlatform, run_id: str, tally: Tally) -> list[str]:
    """Send the sample-table objects the journal still owes; the failures, in words."""
    if not info.pending.get(TRAIN_SAMPLES):
        return []
    return _TableSync(info, platform, run_id, tally).run()


class _TableSync:
    def __init__(
        self, info: RunInfo, platform: TrainingPlatform, run_id: str, tally: Tally
    ) -> None:
        self.archive: RunArchive = info.archive
        self.platform = platform
        self.run_id = run_id
        self.tally = tally
        self.first_range = SAMPLE_ID_RANGES // 2 if info.mode == "online" else 0
        state = self.archive.sync_state().get(STATE)
        if not isinstance(state, dict) or state.get("run_id") != run_id:
            state = {"run_id": run_id, "ranges": {}}
        if not isinstance(state.get("ranges"), dict):
            state["ranges"] = {}
        self.state: dict[str, Any] = state
        self.done: set[RecordKey] = set()
        self.left = 0  # pending episodes in segments a live process still holds

    def run(self) -> list[str]:
        acks = self.archive.acknowledged()
        self.done = set(acks.get(TRAIN_SAMPLES, set()))
        for how in (REJECTED, SKIPPED):
            self.done |= acks.get(settled_name(TRAIN_SAMPLES, how), set())
        noted = [b for b in _batches.noted(self.archive.path) if b.sink == TRAIN_SAMPLES]
        try:
            return self._send(noted)
        finally:  # the noted objects whose records are settled now are forgotten
            _batches.prune(self.archive.path, noted, {TRAIN_SAMPLES: self.done})

    def _send(self, noted: list[_batches.Noted]) -> list[str]:
        failure = self._resume(noted)
        if failure:
            return [failure]
        steps = self._index()
        failures = self._left_to_live()
        if not steps:
            return failures
        if not parquet_available():
            waiting = sum(len(keys) for keys in steps.values())
            return [
                *failures,
                f"the sample table was not sent: pyarrow is not installed; "
                f"`pip install 'prime-runs[train]'` and run `prime-runs sync` again to send "
                f"it ({waiting} episodes wait for it) and close the run",
            ]
        sink = TrainSamplesSink(
            self.platform,
            self.run_id,
            next_ranges=self._ranges(),
            first_range=self.first_range,
            on_uploaded=self._uploaded,
        )
        sink.keep_notes(_batches.notebook(self.archive.path, TRAIN_SAMPLES))
        try:
            for step in sorted(steps):
                for chunk in _chunks(steps[step]):
                    failure = self._export(sink, chunk)
                    if failure:  # one round per sync: the rest waits for the next one
                        return [*failures, failure]
        finally:
            sink.close()
        return failures

    # -- what is pending ---------------------------------------------------------------

    def _index(self) -> dict[int, Indexed]:
        """Pending episodes by the step of their object; the ones without a row in the
        table (other work, off the cadence) settled as skipped, unreadable ones as
        rejected, as the live sink settles them."""
        names = [p.name for p in segment_paths(self.archive.path / RECORDS_DIR)]
        episodes = [n for n in names if n.startswith(EPISODES)]
        busy = _lease.wait_free(self.archive.path, episodes, _lease.SYNC_WAIT)
        steps: dict[int, Indexed] = {}
        skipped: list[RecordKey] = []
        for key, _kind, data in self.archive.iter_records(skip=set(names) - set(episodes)):
            if key in self.done:
                continue
            if key.segment in busy:  # another process may have it in flight
                self.left += 1
                continue
            record, problem = parse_record(data)
            if record is None:
                self._settle(REJECTED, [key], f"line at {key.segment}:{key.offset}: {problem}")
                continue
            step = table_step(record)
            if step is None:
                skipped.append(key)
            else:
                steps.setdefault(step, []).append((key, len(data)))
        self._settle(SKIPPED, skipped, None)
        return steps

    def _left_to_live(self) -> list[str]:
        if not self.left:
            return []
        return [
            f"{quantity(self.left, 'episode')} of the sample table "
            f"{'was' if self.left == 1 else 'were'} left to a live process still "
            "delivering them; run `prime-runs sync` again once it has exited (or in two "
            "minutes)"
        ]

    # -- sending -----------------------------------------------------------------------

    def _export(self, sink: TrainSamplesSink, chunk: Indexed) -> str | None:
        items = self._items(chunk)
        outcome: Outcome = sink.export(items, time.monotonic() + CHUNK_TIMEOUT)
        acked = record_keys(outcome.acked)
        self._ack(acked)
        self.tally.uploaded[TRAIN_SAMPLES] = self.tally.uploaded.get(TRAIN_SAMPLES, 0) + len(acked)
        for item, reason in outcome.rejected:
            self._settle(REJECTED, record_keys([item]), reason)
        self._settle(SKIPPED, record_keys(outcome.skipped), None)
        if outcome.retire or outcome.retry:
            return f"sample table: {outcome.retire or outcome.retry_reason}"
        return None

    def _items(self, chunk: Indexed) -> list[Item]:
        """The chunk's records read back from the journal, in journal order."""
        by_segment: dict[str, list[tuple[int, int]]] = {}
        for key, size in chunk:
            by_segment.setdefault(key.segment, []).append((key.offset, size))
        return [
            Item(EPISODE_KIND, data, key)
            for segment, sized in by_segment.items()
            for key, data in self.archive.read_many(segment, sized)
        ]

    def _uploaded(self, obj: Uploaded) -> None:
        """Before the confirm: no other object of the step is ever numbered in its range."""
        ranges = self.state["ranges"]
        ranges[str(obj.step)] = max(_int(ranges.get(str(obj.step))), obj.id_range + 1)
        self._save()  # an OSError here stops the export before the confirm

    def _resume(self, noted: list[_batches.Noted]) -> str | None:
        """Confirm again the objects a deliverer that is gone (the live process, an
        earlier sync) uploaded and may not have confirmed: their rows are never sent a
        second time. Objects of segments a live process still delivers are left to it."""
        segments = sorted({k.segment for b in noted for k in b.keys})
        busy = _lease.wait_free(self.archive.path, segments, _lease.SYNC_WAIT)
        for batch in noted:
            if any(k.segment in busy for k in batch.keys):
                continue
            failure = self._confirm_again(batch)
            if failure:
                return failure
        return None

    def _confirm_again(self, batch: _batches.Noted) -> str | None:
        step, s3_key = batch.data.get("step"), batch.data.get("s3_key")
        if not isinstance(step, int) or not isinstance(s3_key, str):
            return None  # not ours (edited by hand): its records simply go again
        keys = [k for k in batch.keys if k not in self.done]
        if not keys:
            return None
        try:
            self.platform.confirm(
                self.run_id, step, s3_key, Deadline(time.monotonic() + CHUNK_TIMEOUT)
            )
        except ValidationRejectedError:
            return None  # the object never landed (or its grant lapsed): its records go again
        except PrimeRunsError as exc:
            return f"sample table: confirming step {step}'s object failed: {describe(exc)}"
        self._ack(keys)
        uploaded = self.tally.uploaded
        uploaded[TRAIN_SAMPLES] = uploaded.get(TRAIN_SAMPLES, 0) + len(keys)
        return None

    # -- bookkeeping -------------------------------------------------------------------

    def _ranges(self) -> dict[int, int]:
        out = {}
        for step, value in self.state["ranges"].items():
            if str(step).isdigit():
                out[int(step)] = _int(value)
        return out

    def _ack(self, keys: list[RecordKey]) -> None:
        self.archive.ack(TRAIN_SAMPLES, keys)
        self.done.update(keys)
        _batches.settled(self.archive.path, TRAIN_SAMPLES, keys)

    def _settle(self, how: str, keys: list[RecordKey], reason: str | None) -> None:
        if not keys:
            return
        self.archive.ack(settled_name(TRAIN_SAMPLES, how), keys)
        self.done.update(keys)
        _batches.settled(self.archive.path, TRAIN_SAMPLES, keys)
        if how == REJECTED:
            self.tally.rejected.setdefault(TRAIN_SAMPLES, []).extend([reason or how] * len(keys))

    def _save(self) -> None:
        sync = self.archive.sync_state()
        sync[STATE] = self.state
        self.archive.write_sync_state(sync)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _chunks(indexed: Indexed) -> list[Indexed]:
    """Cut as ``Ledger.claim`` cuts a live delivery: the entry that reaches a bound is
    the last of its chunk."""
    chunks: list[Indexed] = []
    chunk: Indexed = []
    size = 0
    for entry in indexed:
        chunk.append(entry)
        size += entry[1]
        if len(chunk) >= CHUNK_RECORDS or size >= CHUNK_BYTES:
            chunks.append(chunk)
            chunk, size = [], 0
    return [*chunks, chunk] if chunk else chunks

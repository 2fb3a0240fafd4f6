"""The training sample table: step-keyed Parquet objects through presign, PUT, confirm.

Every ``STEP_INTERVAL``-th step (prime-rl's cadence), a batch's episodes of that step
become one Parquet object: ``POST /rft/samples/presign``, ``PUT`` to the presigned URL,
``POST /rft/samples/confirm`` (contract Appendix A). The step is the one the episode was
*dispatched* at, read from its ``run.work.step`` (``run.type`` and ``work.type`` both
``train``); other records have no row here and reach Prime Traces only (skipped, not a
loss), and so does an episode that never produced a message (no trajectory): a step
with none but those sends no object. Objects are additive per step: each upload has its
own key and numbers its ``sample_id`` in a range of its own (``range * 2**32 + row``),
so a step logged over several batches becomes several objects and no two rows share an
id.

After a transient failure the channel hands back the very same items: the sink resends
the same object to the same key (or only the confirm, when the upload landed), as a group
of its own, so a replay never stores a step's rows twice. Between an object's upload and
its confirm the object is noted in the run's archive (``_journal/batches``): whoever
delivers its episodes next (``prime-runs sync``, after a kill or an exit) confirms that
object again (a confirm replays safely) rather than send a second one. Needs pyarrow
(``prime-runs[train]``).

``prime-runs sync`` drives the same sink from the journal (``_sync/train_samples``): it
continues the numbering it kept (``next_ranges``, ``first_range``) and hears of each
object uploaded but not yet confirmed (``on_uploaded``), to keep its ranges.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import prime_runs._records.traintable as _table
from prime_runs._envnumbers import inflight_window
from prime_runs._records.item import Deadline, Item, Outcome, as_deadline, record_keys
from prime_runs._records.jsonio import decode_record
from prime_runs.errors import (
    APIError,
    ConflictError,
    RetryableAPIError,
    TransportError,
    ValidationRejectedError,
)
from prime_runs.platform.training import TrainingPlatform
from prime_runs.projection import build_samples

if TYPE_CHECKING:
    from prime_runs._journal.batches import Notebook

SINK_NAME = "train_samples"
STEP_INTERVAL = 10
SAMPLE_ID_STRIDE = 1 << 32
SAMPLE_ID_RANGES = 1 << 21  # ids stay below 2**53 for the viewer
CONFIRM_TIMEOUT = 60.0  # the platform API's read timeout (contract §2.3)


def parquet_available() -> bool:
    return _table.available()


def dispatch_step(record: Mapping[str, Any]) -> int | None:
    """The step a training episode was dispatched at (``run.work.step`` of ``train``
    work), else None. Every record of a training run is stamped ``run.type = "train"``,
    so the work's type is what tells training work apart."""
    run = record.get("run")
    work = run.get("work") if isinstance(run, Mapping) else None
    if not isinstance(work, Mapping) or work.get("type") != "train":
        return None
    step = work.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def table_step(record: Mapping[str, Any], interval: int = STEP_INTERVAL) -> int | None:
    """The step whose object an episode's row goes to: its dispatch step when that is on
    the cadence, else None (the episode has no row in the table)."""
    step = dispatch_step(record)
    return None if step is None or step % interval else step


def encode_step(
    episodes: Sequence[Mapping[str, Any]], run_id: str, step: int, first_id: int
) -> bytes | None:
    """One step's episodes as a Parquet table, one row per sample with a trajectory,
    numbered from ``first_id``, exactly as 0.1.4 encodes it; None when no row has a
    trajectory."""
    return _encode(episodes, run_id, step, first_id)[0]


def _encode(
    episodes: Sequence[Mapping[str, Any]], run_id: str, step: int, first_id: int
) -> tuple[bytes | None, set[Any]]:
    """:func:`encode_step`, and the ids of the episodes with a row in it."""
    episodes = list(episodes)
    return _table.encode_rows(episodes, build_samples(episodes), run_id, step, first_id)


class _Upload:
    """One step's object of one batch, kept across resends of the same items."""

    def __init__(
        self, payload: bytes, id_range: int, step: int, group: list[Item], items: list[Item]
    ) -> None:
        self.payload = payload
        self.id_range = id_range
        self.step = step
        self.group = group  # the batch's items of the step, resent together
        self.items = items  # those of them whose episodes have a row in it
        self.url: str | None = None
        self.key: str | None = None
        self.uploaded = False


@dataclass(frozen=True)
class Uploaded:
    """An object stored under ``s3_key`` but not yet confirmed: its step, the items whose
    rows it holds, and the ``sample_id`` range it numbered them in."""

    step: int
    s3_key: str
    items: tuple[Item, ...]
    id_range: int


UploadedHook = Callable[[Uploaded], None]


class TrainSamplesSink:
    """Uploads one training run's sample objects. Never raises from ``export``."""

    name = SINK_NAME

    def __init__(
        self,
        platform: TrainingPlatform,
        run_id: str,
        *,
        interval: int = STEP_INTERVAL,
        next_ranges: Mapping[int, int] | None = None,
        first_range: int = 0,
        on_uploaded: UploadedHook | None = None,
    ) -> None:
        """``next_ranges``: per step, the next ``sample_id`` range to number in (steps not
        named start at ``first_range``). ``on_uploaded``: told of each object between its
        upload and its confirm; what it raises stops the export before the confirm."""
        self._platform = platform
        self._run_id = run_id
        self._interval = interval
        self._ranges: dict[int, int] = dict(next_ranges or {})
        self._first_range = first_range
        self._on_uploaded = on_uploaded
        self._pending: dict[tuple[int, ...], _Upload] = {}
        self._pid = os.getpid()
        self._notes: Notebook | None = None

    def __repr__(self) -> str:
        return f"TrainSamplesSink({self._run_id!r})"

    def keep_notes(self, notes: Notebook) -> None:
        """Note each object between its upload and its confirm in the run's archive."""
        self._notes = notes

    def _groups(
        self, items: list[Item], outcome: Outcome
    ) -> list[tuple[int, list[Item], list[Any]]]:
        by_step: dict[int, tuple[list[Item], list[Any]]] = {}
        for item in items:
            record = item.mapping
            if item.kind == "episode" and record is None:
                try:
                    record = decode_record(item.data)
                except ValueError as exc:
                    outcome.rejected.append((item, f"not JSON: {exc}"))
                    continue
            step = table_step(record, self._interval) if isinstance(record, Mapping) else None
            if item.kind != "episode" or step is None:
                outcome.skipped.append(item)  # no row in this table: not a loss
                continue
            found = by_step.setdefault(step, ([], []))
            found[0].append(item)
            found[1].append(record)
        return [(step, *by_step[step]) for step in sorted(by_step)]

    def _next_range(self, step: int) -> int:
        if os.getpid() != self._pid:  # a forked child must not reuse the parent's ranges
            half = SAMPLE_ID_RANGES // 2
            return half + secrets.randbelow(half)
        index = self._ranges.get(step, self._first_range)
        self._ranges[step] = index + 1
        return index

    def _pinned(
        self, items: list[Item]
    ) -> tuple[list[tuple[int, list[Item], list[Any]]], list[Item]]:
        """The objects kept from an earlier try whose items are all back, each as its own
        group (sent, or only confirmed, as it was), and the other items. Regrouped with
        later episodes of the step, an object already stored would be stored again."""
        present = {id(i) for i in items}
        pinned: list[tuple[int, list[Item], list[Any]]] = []
        taken: set[int] = set()
        for upload in self._pending.values():
            if all(id(i) in present for i in upload.group):
                pinned.append((upload.step, upload.group, []))
                taken.update(id(i) for i in upload.group)
        return pinned, [i for i in items if id(i) not in taken]

    def export(self, items: list[Item], deadline: float | Deadline) -> Outcome:
        deadline = as_deadline(deadline)
        outcome = Outcome()
        pinned, items = self._pinned(items)
        groups = pinned + self._groups(items, outcome)
        for index, (step, group, records) in enumerate(groups):
            ident = tuple(i.ref if i.ref is not None else id(i) for i in group)
            try:
                stored = self._send(ident, step, group, records, deadline)
            except (ValidationRejectedError, ConflictError, ValueError, TypeError) as exc:
                self._pending.pop(ident, None)
                outcome.rejected.extend((i, f"sample object: {exc}") for i in group)
                continue
            except (RetryableAPIError, TransportError, APIError) as exc:
                outcome.retry.extend(i for g in groups[index:] for i in g[1])
                status = getattr(exc, "status_code", None)
                permanent = not isinstance(exc, (RetryableAPIError, TransportError)) and (
                    status is None or status < 500
                )
                if permanent:
                    outcome.retire = f"{type(exc).__name__}: {exc}"
                outcome.retry_reason = str(exc)
                return outcome
            if stored is None:  # out of time: what it began is kept for the next delivery
                outcome.retry.extend(i for g in groups[index:] for i in g[1])
                outcome.retry_reason = "out of time"
                return outcome
            self._pending.pop(ident, None)
            held = {id(item) for item in stored}
            outcome.acked.extend(stored)
            # No row: an episode that never produced a message (no trajectory).
            outcome.skipped.extend(item for item in group if id(item) not in held)
        return outcome

    def _send(
        self,
        ident: tuple[int, ...],
        step: int,
        group: list[Item],
        records: list,
        deadline: Deadline,
    ) -> list[Item] | None:
        """Store the group's object; the items with a row in it (none: nothing sent). None
        when a step used the time up: no request starts after the deadline (the first
        attempt of one always would), and the next delivery goes on from that step."""
        if deadline.expired():
            return None
        upload = self._pending.get(ident)
        if upload is None:
            id_range = self._next_range(step)
            first = id_range * SAMPLE_ID_STRIDE
            payload, rowed = _encode(records, self._run_id, step, first)
            if payload is None:
                return []  # no sample with a trajectory: nothing to store
            items = [i for i, r in zip(group, records, strict=True) if r.get("id") in rowed]
            upload = self._pending[ident] = _Upload(payload, id_range, step, group, items)
        if upload.key is None:
            upload.url, upload.key = self._platform.presign(self._run_id, step, deadline)
            if deadline.expired():
                return None
        if not upload.uploaded:
            assert upload.url is not None
            try:
                self._platform.upload(upload.url, upload.payload, deadline.at)
            except APIError as exc:
                status = exc.status_code
                if status is not None and status < 500 and status != 429:
                    # Final for this object (the contract's "any other 4xx"): not the sink.
                    raise ValueError(f"the object store refused it: {exc}") from None
                raise
            upload.uploaded = True
        assert upload.key is not None
        if self._on_uploaded is not None:
            self._on_uploaded(Uploaded(step, upload.key, tuple(upload.items), upload.id_range))
        if deadline.expired():  # the object is known (above): sync confirms it if we cannot
            return None
        if self._notes is not None:  # the object exists: confirmed again, never sent again
            keys = record_keys(upload.items)
            until = time.time() + inflight_window(CONFIRM_TIMEOUT)
            self._notes.open(keys, until, step=step, s3_key=upload.key)
        self._platform.confirm(self._run_id, step, upload.key, deadline)
        return upload.items

    def close(self) -> None:
        self._pending.clear()

    def after_fork(self) -> None:
        self._pending = {}

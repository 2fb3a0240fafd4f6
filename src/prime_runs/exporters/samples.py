"""The v0 sample sink: one row per episode in the evaluation's sample table.

Rows are projected from the bytes encoded at log time (the episode is spliced
into ``info.native_wrapper``, not encoded again) and appended through the
platform's ``SampleWriter``, which never blindly replays an append (contract §5).

Each request is its own ``SampleWriter.append`` call, so a failure is classified
per request: a rejected request is halved until the bad row stands alone, a
transient one is retried later (after reading back whatever may have landed, and
not before no attempt of it can still be stored), a sink-wide one retires the sink.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from prime_runs._records.item import Deadline, Item, Outcome, as_deadline, record_key
from prime_runs._records.skeleton import Spliced
from prime_runs._records.v0rows import ENVELOPE_BYTES, packed, sample_id_of
from prime_runs.errors import APIError, ValidationRejectedError
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.samples import BODY_LIMIT, SampleWriter, Sent
from prime_runs.projection import project_episode_parts

if TYPE_CHECKING:
    from prime_runs._journal.batches import Notebook

logger = logging.getLogger("prime_runs")

YIELD_EVERY = 0.0003  # seconds of projection between GIL hand-offs (measured: docs/benchmarks.md)

SINK_NAME = "eval_samples"
# Extra requests one export may spend halving rejected requests. One bad row in 2,000
# costs about 22; a platform that refuses every row must not cost thousands.
SPLIT_BUDGET = 64

Row = tuple[str, bytes | Spliced]


class _Rows:
    """The rows of one record that have not landed yet."""

    __slots__ = ("doubt", "item", "rows")

    def __init__(self, item: Item, rows: list[Row]) -> None:
        self.item = item
        self.rows = rows
        # An earlier append of these rows may have landed unseen: settled before resending.
        self.doubt: Sent | None = None


class SamplesSink:
    """Appends v0 rows for one evaluation; rollout numbers count across the whole run."""

    name = SINK_NAME

    def __init__(self, client: PlatformClient, eval_id: str, *, limit: int = BODY_LIMIT) -> None:
        self._client = client
        self._limit = limit
        self._writer = SampleWriter(client, eval_id, limit=limit)
        self._counters: dict[Any, int] = {}
        # Records waiting for a retry, by id(); the entry holds the item itself, so the id
        # cannot be reused meanwhile. Projecting again would renumber the rollout.
        self._waiting: dict[int, _Rows] = {}
        self._landed: set[str] = set()  # rows known stored (``already_stored``)

    def __repr__(self) -> str:
        return "SamplesSink()"

    def keep_notes(self, notes: Notebook) -> None:
        """Note each append in the run's archive before it is sent (``_journal/batches``):
        its records, its rows' ids and where in the evaluation it lands at the earliest."""
        self._writer.notes = notes

    def already_stored(self, sample_ids: set[str]) -> None:
        """Rows the evaluation holds already (found by ``prime-runs sync``): never sent
        again; a record whose rows are all among them is acknowledged as it is."""
        self._landed |= sample_ids

    def continue_numbering(self, counts: dict[Any, int]) -> None:
        """Number rollouts after ``counts`` (rollouts per example already stored), so a
        later delivery (``prime-runs sync``) continues the run's numbering."""
        for example, n in counts.items():
            self._counters[example] = self._counters.get(example, 0) + n

    # -- projection ----------------------------------------------------------------

    def _project(self, item: Item) -> list[Row]:
        rows = project_episode_parts(
            item.data,
            self._counters,
            max_request_bytes=self._limit,
            record=item.mapping,
            exact=item.exact,
        )
        if len(rows) == 1 and item.kind == "episode" and item.record_id is not None:
            return [(item.record_id, rows[0])]  # the summary row is keyed by the episode id
        return [(sample_id_of(row), row) for row in rows]

    def _pending(self, item: Item) -> _Rows | None:
        """The item's rows still to send (projected now, or kept from an earlier try)."""
        waiting = self._waiting.pop(id(item), None)
        if waiting is not None and waiting.item is item:
            return waiting
        rows = self._project(item)
        if not rows:
            return None
        if self._landed:
            rows = [row for row in rows if row[0] not in self._landed]
        return _Rows(item, rows)

    # -- export --------------------------------------------------------------------

    def export(self, items: list[Item], deadline: float | Deadline) -> Outcome:
        """Append the rows of ``items``; each item ends up acked, rejected, to retry or
        skipped (no v0 row)."""
        deadline = as_deadline(deadline)
        outcome = Outcome()
        todo: list[_Rows] = []
        yielded = time.monotonic()
        for item in items:
            if time.monotonic() - yielded >= YIELD_EVERY:
                # Let the producer's thread have the GIL: projecting a batch holds it for
                # many milliseconds, and a log call waiting on it is the producer's tail
                # latency. Not after every record: each hand-off costs a context switch.
                time.sleep(0)
                yielded = time.monotonic()
            try:
                pending = self._pending(item)
            except Exception as exc:  # a record the projection cannot read
                outcome.rejected.append((item, f"no v0 row: {type(exc).__name__}: {exc}"))
                continue
            if pending is None:
                outcome.skipped.append(item)
            else:
                todo.append(pending)
        held: list[_Rows] = []
        if any(p.doubt is not None for p in todo):
            todo, held = self._reconcile(todo, deadline, outcome)
        self._send(todo, deadline, outcome)
        if held:
            self._wait(held, outcome)
        return outcome

    def _reconcile(
        self, todo: list[_Rows], deadline: Deadline, outcome: Outcome
    ) -> tuple[list[_Rows], list[_Rows]]:
        """Drop the rows an unconfirmed earlier append did store. Returns the records
        whose rows may be sent now, and those that wait: a request of theirs may still be
        stored. Those the platform cannot tell us about are handed back at once."""
        doubts = {id(p.doubt): p.doubt for p in todo if p.doubt is not None}
        unknown: set[int] = set()
        for sent in doubts.values():
            mine = [p for p in todo if p.doubt is sent]
            try:
                found, free = self._writer.settle(sent, deadline)
            except APIError as exc:
                self._hold(mine, outcome, exc)
                unknown.update(id(p) for p in mine)
                continue
            for p in mine:
                kept = [row for row in p.rows if row[0] not in found]
                outcome.rows += len(p.rows) - len(kept)  # an earlier append stored them
                p.rows = kept
                if free or not p.rows:
                    p.doubt = None
        ready = [p for p in todo if p.doubt is None]
        waiting = [p for p in todo if p.doubt is not None and id(p) not in unknown]
        return ready, waiting

    def _wait(self, held: list[_Rows], outcome: Outcome) -> None:
        """Hand back records that wait on a request in doubt; when nothing else failed,
        the channel waits for them without counting a failure (``held_until``)."""
        failed = bool(outcome.retry) or outcome.retire is not None
        self._hold(held, outcome, None)
        if failed:
            return
        until = min(p.doubt.until for p in held if p.doubt is not None)
        outcome.held_until = until
        outcome.retry_reason = (
            "an earlier request of these rows may still be stored; they are sent again "
            f"after {time.strftime('%H:%M:%S', time.localtime(until))} if it is not"
        )

    def _send(self, todo: list[_Rows], deadline: Deadline, outcome: Outcome) -> None:
        lost = self._oversize(todo)  # id(item) -> why it is rejected
        work: deque[list[tuple[_Rows, Row]]] = deque(
            self._pack([(p, row) for p in todo if id(p.item) not in lost for row in p.rows])
        )
        budget = SPLIT_BUDGET
        while work:
            if deadline.expired():
                # finish() gave up on this export: start nothing new after its deadline.
                rest = [p for b in work for p, _ in b]
                self._hold([p for p in _unique(rest) if id(p.item) not in lost], outcome, None)
                break
            batch = [(p, row) for p, row in work.popleft() if id(p.item) not in lost]
            if not batch:
                continue
            result = self._writer.append(
                [row for _, row in batch],
                deadline=deadline,
                keys=[record_key(p.item) for p, _ in batch],
            )
            landed = set(result.acked)
            outcome.rows += len(landed)
            for p, row in batch:
                if row[0] in landed or row[0] not in result.failed:
                    p.rows.remove(row)
            if result.ok:
                continue
            if result.rejected and not result.permanent:
                splittable = isinstance(result.error, ValidationRejectedError)
                if len(batch) > 1 and splittable and budget >= 2:
                    budget -= 2
                    half = len(batch) // 2
                    work.appendleft(batch[half:])
                    work.appendleft(batch[:half])
                    continue
                reason = _rejection(result.error)
                for p, _ in batch:
                    lost.setdefault(id(p.item), reason)
                continue
            # Transient or sink-wide: stop here; nothing later is attempted this round.
            rest = [p for b in work for p, _ in b]
            if result.permanent:
                outcome.retire = f"{type(result.error).__name__}: {result.error}"
            self._hold(
                [p for p in _unique([*(p for p, _ in batch), *rest]) if id(p.item) not in lost],
                outcome,
                result.error,
                doubts=result.doubt,
                keep=not result.permanent,
            )
            break
        _settle(todo, lost, outcome)

    def _oversize(self, todo: list[_Rows]) -> dict[int, str]:
        """``id(item) -> why`` for the records with a row no request can carry."""
        lost: dict[int, str] = {}
        for p in todo:
            too_big = [r for r in p.rows if ENVELOPE_BYTES + len(r[1]) > self._limit]
            if too_big:
                lost[id(p.item)] = (
                    f"row of {len(too_big[0][1]):,} bytes exceeds the "
                    f"{self._limit:,}-byte request limit (v0 sample row)"
                )
        return lost

    def _hold(
        self,
        todo: list[_Rows],
        outcome: Outcome,
        error: BaseException | None,
        doubts: list[Sent] | None = None,
        keep: bool = True,
    ) -> None:
        """Hand ``todo``'s items back to the channel, keeping their unsent rows for the next
        try (``keep``: not when the sink is retiring); ``doubts``: appends that may still be
        stored, settled before their rows are sent again."""
        doubted = [(sent, set(sent.ids)) for sent in doubts or ()]
        for p in todo:
            if not p.rows:
                continue
            for sent, ids in doubted:
                if any(row[0] in ids for row in p.rows):
                    p.doubt = sent
            if keep:
                self._waiting[id(p.item)] = p
            outcome.retry.append(p.item)
        if error is not None or outcome.retry_reason is None:  # the first failure's reason
            outcome.retry_reason = f"{type(error).__name__}: {error}" if error else None
            outcome.retry_after = getattr(error, "retry_after", None)

    def _pack(self, rows: list[tuple[_Rows, Row]]) -> list[list[tuple[_Rows, Row]]]:
        """Greedy, in-order requests under the body limit (envelope and commas counted)."""
        return packed(rows, [len(entry[1][1]) for entry in rows], self._limit)

    def close(self) -> None:
        self._waiting.clear()
        self._landed.clear()
        self._client.close()

    def after_fork(self) -> None:
        # PlatformClient opens a fresh pool in a new process by itself.
        self._waiting = {}


def _rejection(error: BaseException | None) -> str:
    """``HTTP <status>: ...``, the form every sink gives a record rejection."""
    status = getattr(error, "status_code", None)
    return f"HTTP {status}: {error}" if status else f"{type(error).__name__}: {error}"


def _settle(todo: list[_Rows], lost: dict[int, str], outcome: Outcome) -> None:
    """Each record of ``todo`` not held for a resend: rejected (``lost``) or acked."""
    held = {id(i) for i in outcome.retry}
    for p in todo:
        if id(p.item) in lost:
            outcome.rejected.append((p.item, lost[id(p.item)]))
        elif id(p.item) not in held:
            outcome.acked.append(p.item)


def _unique(rows: list[_Rows]) -> list[_Rows]:
    seen: set[int] = set()
    out = []
    for p in rows:
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out

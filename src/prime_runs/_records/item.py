"""The record on its way to the sinks (``Item``), where the journal holds it
(``RecordKey``), and what a sink is: something that stores a batch of items and says what
landed (``Sink``, ``Outcome``) within a ``Deadline``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeAlias


class RecordKey(NamedTuple):
    """Where the journal holds a record: its segment file and the line's offset."""

    segment: str
    offset: int


#: Where a metrics row is journaled (``_journal/rows``): its number in the live run's
#: journal, or, for ``prime-runs sync``, that journal's file and the number.
RowKey: TypeAlias = int | tuple[Path, int]


@dataclass(frozen=True, slots=True)
class Item:
    """One encoded record on its way to the sinks. Shared (not copied) between sinks."""

    kind: str  # "episode" | "trace"
    data: bytes  # compact JSON, stamped with the run, no newline
    key: RecordKey | RowKey | None  # where the journal holds it (None with the journal off)
    problem: str | None = None  # why Prime Traces would reject it, found before sending
    record_id: str | None = None  # for error messages
    # The decoded record, when the SDK owns it (a fresh to_record() result) and the queue
    # is short: the sample projection then skips decoding ``data`` again. Never mutated.
    mapping: Any = None
    ref: int | None = None  # the run's handle for the record in flight (see ``_ledger``)
    # ``data`` holds no NaN and no integer orjson would misread (orjson wrote it, or sync
    # found none in a journal line): it decodes without a scan, its row is read raw.
    exact: bool = False
    # Where ``data`` holds the run id's stamps, when the run's id may change before it is
    # sent (``_records/restamp``); None when it cannot, ``()`` when they are not known.
    stamps: tuple[int, ...] | None = None


def record_key(item: Item) -> RecordKey | None:
    """Where the journal holds ``item``'s record; None with the journal off, and for a
    metrics row (a ``RowKey``, journaled apart from the records)."""
    return item.key if isinstance(item.key, RecordKey) else None


def record_keys(items: Iterable[Item]) -> list[RecordKey]:
    """The records' journal keys of ``items``, in order; those without one are left out."""
    return [i.key for i in items if isinstance(i.key, RecordKey)]


@dataclass
class Outcome:
    """What happened to one batch handed to a sink.

    Every item of the batch ends up in exactly one of ``acked``, ``rejected``,
    ``unsent``, ``retry`` or ``skipped``.
    """

    acked: list[Item] = field(default_factory=list)
    # Rejected for their own sake: resending the same bytes cannot succeed (the platform
    # refused the record, or a local check did). Final: `prime-runs sync` skips them.
    rejected: list[tuple[Item, str]] = field(default_factory=list)
    # Not stored because the sink stopped for the run (retired): a loss now, but the
    # records stay pending in the journal for `prime-runs sync`.
    unsent: list[tuple[Item, str]] = field(default_factory=list)
    # Not stored because of a transient failure (or not attempted): worth another try later.
    retry: list[Item] = field(default_factory=list)
    retry_reason: str | None = None
    retry_after: float | None = None
    # Sink-wide permanent failure: stop using this sink for the run.
    retire: str | None = None
    # The sink switched itself off without it being a loss (e.g. service not enabled).
    quiet: bool = False
    # Items the sink does not store at all (no projection): not a loss.
    skipped: list[Item] = field(default_factory=list)
    # Settled after the channel was closed: the counters already hold these items as
    # unsent, so only the archive may learn about what landed.
    late: bool = False
    # Rows the sink holds now for this batch's records, where one record can be several
    # (the sample table's over-size episodes): the owner's finish compares them with the
    # evaluation's row count to tell that no other process stored any (``_runs/coverage``).
    rows: int = 0
    # Set when every item in ``retry`` waits on a request of its own that the platform may
    # still store until this time (``time.time()``), and nothing failed: the sink settles
    # them later, and the wait is not a failure of the platform.
    held_until: float | None = None


class Deadline:
    """A point in ``time.monotonic()`` time that the owner may bring forward.

    A sink waits between retries with :meth:`sleep`, so ``finish()`` cutting the
    deadline wakes it at once instead of after a long back-off.
    """

    def __init__(self, at: float) -> None:
        self._at = at
        self._cut = threading.Event()

    def __repr__(self) -> str:
        return f"Deadline(left={self.left():.3f})"

    @property
    def at(self) -> float:
        return self._at

    def left(self) -> float:
        return self._at - time.monotonic()

    def expired(self) -> bool:
        return self.left() <= 0

    def cut(self, at: float) -> None:
        """Bring the deadline forward to ``at`` (never back) and wake any sleeper."""
        if at < self._at:
            self._at = at
        self._cut.set()

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the deadline comes first (it may be cut meanwhile).
        True when the full wait ran and time is left."""
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if self._at <= now:
                return False
            if end <= now:
                return True
            self._cut.wait(min(end, self._at) - now)
            self._cut.clear()


def as_deadline(deadline: float | Deadline) -> Deadline:
    return deadline if isinstance(deadline, Deadline) else Deadline(deadline)


class Sink(Protocol):
    name: str

    def export(self, items: list[Item], deadline: float | Deadline) -> Outcome:
        """Store ``items`` before ``deadline`` (``time.monotonic()``). Never raises."""
        ...

    def close(self) -> None: ...

    def after_fork(self) -> None:
        """Drop inherited connections without closing them (they belong to the parent)."""
        ...

"""A run's journal as the run writes it: appends whose failures are contained and counted,
acknowledgements of what each sink settled, and the run summary at finish.

A full disk or a file size limit must never raise into the producer (the record still goes
to the platform when it can), and must not cost a warning per record or per batch: each
failing spell is reported once, and its end is logged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Container
from typing import Any, Protocol

import prime_runs._journal.batches as _batches
from prime_runs._journal.archive import REJECTED, SKIPPED, RecordKey, RunArchive, settled_name
from prime_runs._plural import quantity
from prime_runs._records.encode import EPISODE, Encoded, record_id
from prime_runs._records.item import Outcome, record_keys
from prime_runs.errors import JournalError, RecordError
from prime_runs.metrics import SummaryAccumulator

logger = logging.getLogger("prime_runs")

Report = Callable[..., None]  # RunState.report(message, exc=None, *, warn=True)


class Tally(Protocol):
    """The run's counters, as far as the journal counts: records it could not hold."""

    unjournaled: int

    def count(self, name: str, n: int = 1) -> int: ...


class Journal:
    """Writes one run's records and acknowledgements into its archive. Thread-safe."""

    def __init__(self, archive: RunArchive, counters: Tally, report: Report) -> None:
        self.archive = archive
        self._counters = counters
        self._report = report
        self._lock = threading.Lock()
        self._failing = False  # appends fail: reported once until one succeeds again
        self._ack_failing = False  # likewise for acknowledgements
        # The segments this journal appended to: the run's summary already counts their
        # records, so finish() reads back only the others (forked children, joined workers).
        self.segments: set[str] = set()
        self.appended = 0  # records those segments hold (so finish() need not count them)
        # Sinks that store none of this journal's episodes (a rank's have no row in its
        # owner's sample table): each is settled as skipped as it is written, so neither
        # `prime-runs ls` nor sync counts it as owed.
        self.skipped_by: tuple[str, ...] = ()

    def append(self, encoded: Encoded, *, online: bool) -> RecordKey | None:
        """The record's key, or None when the journal could not store it (counted)."""
        try:
            key = self.archive.append(encoded.kind, encoded.data)
        except OSError as exc:
            self._append_failed(encoded, exc, online)
            return None
        self.segments.add(key.segment)
        self.appended += 1
        if self._failing:
            self._append_resumed()
        if encoded.quotes_id and encoded.stamps:
            self._note_stamps(key, encoded.stamps)
        if self.skipped_by and encoded.kind == EPISODE:
            for sink in self.skipped_by:
                self._ack(settled_name(sink, SKIPPED), sink, [key])
        return key

    def _note_stamps(self, key: RecordKey, stamps: tuple[int, ...]) -> None:
        # For `prime-runs sync`, which cannot tell these stamps from the content by counting.
        try:
            self.archive.note_stamps(key, stamps)
        except OSError as exc:  # sync then decodes and encodes the record to restamp it
            logger.debug("prime-runs: could not note a record's stamps: %s", exc)

    def _append_failed(self, encoded: Encoded, exc: OSError, online: bool) -> None:
        self._counters.count("unjournaled")
        with self._lock:
            first = not self._failing
            self._failing = True
        if not first:
            return
        where = "it was still sent to the platform" if online else "it is lost"
        reason = exc if isinstance(exc, JournalError) else f"{exc.strerror or exc}"
        error = JournalError(
            f"the run's journal could not store record {record_id(encoded.record)!r} "
            f"({reason}); {where}. Later failures are counted until the journal "
            "accepts writes again (see the finish report)"
        )
        error.errno = exc.errno
        self._report(str(error), error)

    def _append_resumed(self) -> None:
        with self._lock:
            self._failing = False
        logger.warning(
            "prime-runs: the run's journal accepts writes again (%s could not be stored so far)",
            quantity(self._counters.unjournaled, "record"),
        )

    def settle(self, sink: str, outcome: Outcome) -> None:
        """Journal what ``sink`` settled: stored, rejected for its content, or not for it.
        Settled records are not pending: `prime-runs sync` never resends them, and the
        batch notes that named them close (``_journal/batches``)."""
        written: list[RecordKey] = []
        for name, items in (
            (sink, outcome.acked),
            (settled_name(sink, REJECTED), [i for i, _ in outcome.rejected]),
            (settled_name(sink, SKIPPED), outcome.skipped if not outcome.quiet else []),
        ):
            keys = record_keys(items)
            if self._ack(name, sink, keys):
                written += keys
        # Only what the acks hold: a batch whose ack was lost stays noted, for sync.
        _batches.settled(self.archive.path, sink, written)

    def _ack(self, name: str, sink: str, keys: list[RecordKey]) -> bool:
        if not keys:
            return False
        try:
            self.archive.ack(name, keys)
        except OSError as exc:
            self._ack_failed(sink, exc)
            return False
        self._ack_failing = False
        return True

    def settle_late(self, sink: str, outcome: Outcome) -> None:
        """What landed after ``finish()`` gave up on it: only the archive learns of it."""
        keys = record_keys(outcome.acked)
        if not keys:
            return
        try:
            self.archive.ack(sink, keys)
        except OSError:
            logger.debug("prime-runs: could not journal a late acknowledgement", exc_info=True)
            return
        _batches.settled(self.archive.path, sink, keys)

    def _ack_failed(self, sink: str, exc: OSError) -> None:
        if self._ack_failing:
            logger.debug("prime-runs: could not record %s acknowledgements: %s", sink, exc)
            return
        self._ack_failing = True
        self._report(
            f"could not record {sink} acknowledgements in the archive: {exc} (the platform "
            "has those records; the archive does not know it, so `prime-runs sync` may "
            "offer them again)"
        )


def computed_summary(
    archive: RunArchive | None,
    counted: SummaryAccumulator,
    report: Report,
    *,
    skip: Container[str] = (),
) -> dict[str, Any]:
    """The summary of every record a run logged: ``counted`` (what this process tallied as
    it logged, including records the journal could not hold) plus the records of the
    journal's other segments, read back (forked children's and joined workers' records
    count too; ``skip`` names the segments ``counted`` covers). Records it cannot use are
    reported."""
    summary = SummaryAccumulator()
    summary.merge(counted)
    if archive is not None:
        try:
            for _, _, data in archive.iter_records(skip=skip):
                summary.add_encoded(data)
        except OSError as exc:
            report(f"could not read the journal to compute the summary: {exc}")
    if summary.skipped:
        message = (
            f"{quantity(summary.skipped, 'record was', 'records were')} left out of the run "
            "summary: a reward or "
            "metric is not a number that fits a float (e.g. 10**400 or a string)"
        )
        report(message, RecordError(message))
    return dict(summary.result())

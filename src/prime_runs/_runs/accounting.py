"""A run's loss and delivery accounting: the counters, their part of ``status.json``, the
one warning per kind of loss that ``finish()`` gives, and its last word on a run that
recorded nothing.

A run's contained failures are counted here too (``Reporter``): each one is an ``errors``
entry and (usually) a warning now, and under ``on_error="raise"`` the first is raised
later, once, from the producer's next call into the run (never from a delivery thread).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prime_runs._plural import quantity
from prime_runs._records.item import Outcome
from prime_runs.errors import PrimeRunsError

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")


@dataclass
class Counters:
    """Loss and delivery accounting, per sink where it matters. It owns its lock: every
    change goes through a method here (reads of a single count need no lock)."""

    logged: int = 0
    dropped: int = 0  # queue full: reached no sink during the run (still archived)
    invalid: int = 0  # bad input, or logged after finish(): never logged at all
    failed: dict[str, int] = field(default_factory=dict)
    # The part of ``failed`` the sink refused for the records' own sake: final, never owed.
    rejected: dict[str, int] = field(default_factory=dict)
    acked: dict[str, int] = field(default_factory=dict)
    # Rows the sinks stored where a record can be several (``Outcome.rows``): the sample
    # table's, which the owner's finish compares with the evaluation's (``_coverage``).
    rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    # Items handed to a sink that are not the run's records (a training run's metrics
    # rows): the "of N" of that sink's counts, where ``logged`` is the others'.
    given: dict[str, int] = field(default_factory=dict)
    traces_episodes_written: int = 0
    restamped: int = 0  # records that named another run id (their copies carry this one)
    unjournaled: int = 0  # records the journal could not hold (disk full, size limit, link)
    late: int = 0  # records refused because they were logged after finish() began
    errors: list[str] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    _late_entry: int | None = field(default=None, repr=False, compare=False)  # in ``errors``

    @staticmethod
    def add(counter: dict[str, int], key: str, n: int) -> None:
        counter[key] = counter.get(key, 0) + n

    def count(self, name: str, n: int = 1) -> int:
        """Add ``n`` to the plain count ``name`` (``logged``, ``invalid``, ``unjournaled``,
        ``restamped``, ``dropped``); its new value."""
        with self.lock:
            value = getattr(self, name) + n
            setattr(self, name, value)
            return value

    def count_sink(self, kind: str, sink: str, n: int = 1) -> None:
        """Add ``n`` to the per-sink count ``kind`` (``failed``, ``skipped``, ``given``)."""
        with self.lock:
            self.add(getattr(self, kind), sink, n)

    def count_logged(self, *, held: bool, retired: list[tuple[str, bool]]) -> None:
        """One record logged online: ``held`` (False: it reaches no sink), and the sinks
        that had stopped for the run, as ``(name, quiet)``."""
        with self.lock:
            self.logged += 1
            if not held:
                self.dropped += 1
            for name, quiet in retired:
                # A retired sink's refusal is that sink's failure (or a quiet skip).
                self.add(self.skipped if quiet else self.failed, name, 1)

    def count_late(self, records: int) -> int:
        """Records refused because they came after finish() began; the total so far."""
        with self.lock:
            self.late += records
            self.invalid += records
            return self.late

    def note_late(self, records: int, run_id: str) -> None:
        """Count records logged after ``finish()`` began: one ``errors`` entry, kept up to
        date, and one warning per run."""
        with self.lock:
            late = self.count_late(records)
            message = (
                f"run {run_id} has finished; {quantity(late, 'record')} logged after "
                f"finish() {'was' if late == 1 else 'were'} not recorded. Log every record "
                "before calling finish()."
            )
            first = self._late_entry is None
            self._late_entry = self.note_error(message, self._late_entry)
        if first:
            logger.warning(
                "prime-runs: records were logged after run %s finished and were not recorded "
                "(counted in dropped_records; this warning is given once per run)",
                run_id,
            )

    def note_restamp(self, run_id: str) -> None:
        """A record that named another run id: counted, and said once per run."""
        if self.count("restamped") == 1:
            logger.warning(
                "prime-runs: a record named a different run id; its uploaded copy carries "
                "this run's id %s (the count is in the finish report)",
                run_id,
            )

    def note_error(self, message: str, replace: int | None = None) -> int:
        """Append ``message`` to ``errors`` (or replace entry ``replace``); its index."""
        with self.lock:
            if replace is not None and replace < len(self.errors):
                self.errors[replace] = message
                return replace
            self.errors.append(message)
            return len(self.errors) - 1

    def stored_any(self) -> bool:
        with self.lock:
            return any(self.acked.values())

    def count_outcome(self, sink: str, outcome: Outcome) -> None:
        """Count one settled batch of ``sink``."""
        with self.lock:
            self._count_outcome(sink, outcome)

    def _count_outcome(self, sink: str, outcome: Outcome) -> None:
        if outcome.rows:
            self.add(self.rows, sink, outcome.rows)
        if outcome.acked:
            self.add(self.acked, sink, len(outcome.acked))
            if sink == "traces":
                self.traces_episodes_written += sum(1 for i in outcome.acked if i.kind == "episode")
        if outcome.skipped:
            self.add(self.skipped, sink, len(outcome.skipped))
        if outcome.rejected or outcome.unsent:
            self.add(self.failed, sink, len(outcome.rejected) + len(outcome.unsent))
        if outcome.rejected:
            self.add(self.rejected, sink, len(outcome.rejected))

    def total(self, sink: str) -> int:
        """What ``sink`` was given: the run's records, or its own items (``given``)."""
        return self.given.get(sink, self.logged)

    def owed(self) -> dict[str, int]:
        """Per sink, records it has not stored that a later delivery may still store: its
        failures but the refused ones (a sink that stopped, a deadline that came first)."""
        with self.lock:
            owed = {sink: n - self.rejected.get(sink, 0) for sink, n in self.failed.items()}
        return {sink: n for sink, n in owed.items() if n > 0}

    def status_fields(self) -> dict[str, Any]:
        """The counts ``status.json`` records."""
        return {
            "logged": self.logged,
            "acked": dict(self.acked),
            "failed": dict(self.failed),
            "dropped": self.dropped,
            "invalid": self.invalid,
            "unjournaled": self.unjournaled,
        }

    def warn_losses(self, *, run_id: str, where: str, online: bool) -> None:
        """One warning per kind of loss; ``where`` names the archive (or is empty)."""
        if self.restamped:
            logger.warning(
                "prime-runs: %s named a different run id; their uploaded copies carry "
                "this run's id %s",
                quantity(self.restamped, "record"),
                run_id,
            )
        if self.invalid:
            logger.warning(
                "prime-runs: %s not logged: %d refused as bad input and %d "
                "logged after finish() (run.errors says why each was refused)",
                quantity(self.invalid, "record was", "records were"),
                self.invalid - self.late,
                self.late,
            )
        if self.unjournaled:
            logger.warning(
                "prime-runs: %s could not be written to the run's journal%s (see run.errors); %s",
                quantity(self.unjournaled, "record"),
                where,
                "they were sent to the platform but sync cannot resend them"
                if online
                else "they are lost",
            )
        if self.dropped:
            logger.warning(
                "prime-runs: %d of %s reached no sink because the upload queue was "
                "full; they are in the archive for `prime-runs sync`%s",
                self.dropped,
                quantity(self.logged, "record"),
                where,
            )
        for sink, n in sorted(self.failed.items()):
            # stored + kept + refused + skipped = what the sink was given.
            refused = self.rejected.get(sink, 0)
            parts = [
                f"{count} {what}"
                for count, what in (
                    (n - refused, "kept in the archive for `prime-runs sync`"),
                    (refused, "refused (run.errors says why)"),
                    (self.skipped.get(sink, 0), "not for this sink"),
                )
                if count > 0
            ]
            noun = "metrics row" if sink in self.given else "record"
            logger.warning(
                "prime-runs: %s stored %d of %s: %s%s",
                sink,
                self.acked.get(sink, 0),
                quantity(self.total(sink), noun),
                ", ".join(parts),
                where,
            )


RAISE = "raise"


class Reporter:
    """Thread-safe."""

    def __init__(self, counters: Counters, on_error: str) -> None:
        self._counters = counters
        self._on_error = on_error
        self._lock = threading.Lock()
        self._first: BaseException | None = None
        self._raised = False

    def report(self, message: str, exc: BaseException | None = None, *, warn: bool = True) -> None:
        self._counters.note_error(message)
        with self._lock:
            if self._first is None and self._on_error == RAISE:
                self._first = exc if exc is not None else PrimeRunsError(message)
        if warn:
            logger.warning("prime-runs: %s", message)

    def raise_pending(self) -> None:
        with self._lock:
            if self._first is None or self._raised:
                return
            self._raised = True
            error = self._first
        raise error


def warn_if_empty(state: RunState) -> None:
    """A run that ends with no records says so; its refused records are in ``run.errors``
    and counted (``invalid``) in ``status.json``."""
    if not state.owner or state.forked or _recorded_any(state):
        return
    refused = state.counters.invalid
    if refused:
        why = (
            f"{'the one record' if refused == 1 else f'all {refused} records'} logged into "
            f"it {'was' if refused == 1 else 'were'} refused: invalid, cut or dropped by "
            "an OpenTelemetry attribute or event limit, or logged after finish() (see run.errors)"
        )
    else:
        why = (
            "nothing was logged into it. Log with run.log_episodes() or "
            "pr.log_episodes(), or as `episode` spans or span events carrying "
            "prime.record under the `run` span"
        )
        reported = len(state.counters.errors)
        if reported:  # e.g. events dropped by a limit, records perhaps among them
            why += f" (see run.errors: {reported} problem{'' if reported == 1 else 's'} reported)"
    logger.warning("prime-runs: run %s ended with no records: %s", state.run_id, why)


def _recorded_any(state: RunState) -> bool:
    if state.counters.logged or state.records_summarized:
        return True  # (the second: workers elsewhere logged what the platform holds)
    if state.archive is None:
        return False
    try:  # forked children journal records this process never counted
        return next(iter(state.archive.iter_records()), None) is not None
    except OSError:
        return True  # cannot tell: claim nothing

"""One run's engine: identity, journal, delivery and counters; its flush and finish are
``FinishSequence``'s (``_runs/finish_sequence``).

``Run`` (the handle), ``RunProcessor`` (raw spans) and ``prime-runs sync`` all
drive a run through this object, so the three entry points behave the same.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import prime_runs._runs.rerun as _retry
from prime_runs._delivery.delivery import Delivery
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.journal import Journal
from prime_runs._records.encode import Encoded, encode
from prime_runs._records.item import Outcome, Sink
from prime_runs._runs.accounting import Counters, Reporter
from prime_runs._runs.finish_sequence import FinishSequence, LogGate, Pending
from prime_runs.exporters._channel import Channel
from prime_runs.metrics import SummaryAccumulator
from prime_runs.settings import OFFLINE, ONLINE
from prime_runs.status import RunStatus

if TYPE_CHECKING:
    from prime_runs._runs.training import TrainingSide
    from prime_runs.run import Run

logger = logging.getLogger("prime_runs")

WARN = "warn"


Closer = Callable[["RunState", RunStatus, dict[str, Any], "str | None", float], None]


@dataclass
class Identity:
    run_id: str
    name: str
    mode: str
    url: str | None = None
    kind: str = "eval"
    local: bool = False  # an online run's local id, until the platform registers the run

    @property
    def may_change(self) -> bool:
        """Whether records stamped with this id may be sent under another (the platform's,
        once it registers the run): the encoder then says where the stamps lie."""
        return self.mode != ONLINE or self.local


class RunState(FinishSequence):
    """Everything one run needs after registration. Thread-safe."""

    def __init__(
        self,
        identity: Identity,
        *,
        description: dict[str, Any],
        config: dict[str, Any],
        archive: RunArchive | None,
        on_error: str = WARN,
        closer: Closer | None = None,
        owner: bool = True,
    ) -> None:
        self.identity = identity
        self.description = description
        self.config = config
        self.archive = archive
        self.on_error = on_error
        self.owner = owner  # only the owning process closes the run out
        self.counters = Counters()
        self._reporter = Reporter(self.counters, on_error)
        self.summary_acc = SummaryAccumulator()
        # Only the owner computes the summary; its finish() reads others' segments back.
        self._summarizes = owner
        self.journal = Journal(archive, self.counters, self.report) if archive is not None else None
        # The sinks, attached by the online wiring (none offline).
        self.delivery = Delivery(
            identity.run_id,
            archive,
            on_outcome=self.on_outcome,
            on_late=self.on_late_outcome,
            on_retired=self._on_retired,
        )
        self.records_summarized = 0  # records the summary covers, wherever logged (_coverage)
        # A join's ids an earlier, crashed attempt on this host already stored (_retry).
        self.stored_ids: frozenset[str] = frozenset()
        self.already_stored = 0
        self._pid = os.getpid()
        self.span: Any = None
        # Set once there is one: a training run's metrics side (``_runs/train_kind``,
        # ``_runs/join``) and the ``Run`` handle on this state (``api``).
        self.training: TrainingSide | None = None
        self.handle: Run | None = None
        # A raw run span's registration under way (``_registering``); finish() waits for it.
        self.registering: Pending | None = None
        self.gate = LogGate()  # finish() waits for log calls in flight, then refuses more
        self._handles = 1  # Run handles on this state (a join shared by several, see _join)
        self._init_finish(closer)  # status, summary and close-out (_runs/finish_sequence)
        self._write_status()  # a full disk at the start is reported, not fatal

    # -- identity ------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    @property
    def workers(self) -> list[Channel]:
        """The run's sink channels (empty offline)."""
        return list(self.delivery.channels.values())

    @property
    def forked(self) -> bool:
        return os.getpid() != self._pid

    def take_handle(self) -> bool:
        """One more handle on this state; False once it is finishing (or in a forked child)."""
        with self._finish_lock:
            if self.finishing or self.finished or self.forked:
                return False
            self._handles += 1
            return True

    def release_handle(self) -> int:
        """A handle is done with this state; how many others still hold it."""
        with self._finish_lock:
            self._handles = max(0, self._handles - 1)
            return self._handles

    # -- errors --------------------------------------------------------------------

    def report(self, message: str, exc: BaseException | None = None, *, warn: bool = True) -> None:
        """Record a contained failure: a warning now, raised later under ``on_error="raise"``."""
        self._reporter.report(message, exc, warn=warn)

    def raise_pending(self) -> None:
        """Under ``on_error="raise"``, raise the first contained error, once."""
        self._reporter.raise_pending()

    # -- logging -------------------------------------------------------------------

    def count_invalid(self, records: int) -> None:
        self.counters.count("invalid", records)

    def encode(self, record: object) -> Encoded:
        """``record`` encoded for every sink, stamped with the run's id as it is now.
        Raises ``RecordError`` for bad input."""
        identity = self.identity  # read once: a registration may replace it meanwhile
        return encode(record, identity.run_id, identity.kind, locate=identity.may_change)

    def ingest(self, encoded: Encoded, *, origin: tuple[int, int] | None = None) -> None:
        """Journal a record, account it in the summary, and hand it to every sink.

        A journal failure is counted and reported, never raised: the record still goes
        to the sinks (offline, there are none, and it is lost, so it is not summarized)."""
        if self.stored_ids and _retry.skip(self, encoded.record):
            return
        key = None
        if self.journal is not None:
            key = self.journal.append(encoded, online=self.delivery.online)
        if self._summarizes and (key is not None or self.workers or self.archive is None):
            # Tallied now, as its journal line would read back (a few microseconds): finish()
            # never re-reads this process's records, whatever the run's size.
            self.summary_acc.add_logged(encoded.record, encoded.data)
        if encoded.restamped:
            self._note_restamp()
        channels = self.delivery.channels
        if not self.delivery.online:
            if key is not None or self.archive is None:
                self.counters.count("logged")
            return
        held = self.delivery.hand(encoded.for_delivery(key), origin)
        # Not held: not in the journal and over the memory bound, so it reaches no sink.
        retired = [(c.name, c.quiet) for c in channels.values() if c.retired is not None]
        self.counters.count_logged(held=held, retired=retired)

    # -- log calls and finish() -----------------------------------------------------

    def refuse_late(self, records: int) -> None:
        """Count records logged after ``finish()`` began; one warning per run."""
        self.counters.note_late(records, self.run_id)

    def _note_restamp(self) -> None:
        self.counters.note_restamp(self.run_id)

    # -- sink outcomes (delivery threads) -------------------------------------------

    def on_outcome(self, channel: Channel, outcome: Outcome) -> None:
        sink = channel.name
        if self.journal is not None:
            self.journal.settle(sink, outcome)
        self.counters.count_outcome(sink, outcome)
        for item, reason in outcome.rejected:
            self.report(f"{sink}: record {item.record_id!r} was not stored: {reason}", warn=False)
        if outcome.retire is not None and not outcome.quiet:
            self.report(f"{sink}: sink stopped for this run: {outcome.retire}")
        elif outcome.retire is not None:
            logger.info("prime-runs: %s sink switched off: %s", sink, outcome.retire)

    def _on_retired(self, channel: Channel, left: int) -> None:
        """Records still waiting for a sink that stopped: its failures (or quiet skips)."""
        self.counters.count_sink("skipped" if channel.quiet else "failed", channel.name, left)

    def on_late_outcome(self, channel: Channel, outcome: Outcome) -> None:
        """A batch that settled after ``finish()`` gave up on it: the counters already hold
        it as unsent, so only the archive learns what landed (sync will not resend it)."""
        if self.journal is not None:
            self.journal.settle_late(channel.name, outcome)
        self._release_journal()

    # -- a registration that lands later (raw `run` spans) ---------------------------

    def registered(
        self, identity: Identity, closer: Closer, sinks: Sequence[Sink], local_id: str
    ) -> None:
        """The platform registered the run (``_registering``): its id and sinks from now on;
        records logged under ``local_id`` are stamped with the platform's as they are sent."""
        self.identity = identity
        self._closer = closer
        self.description["platform"] = {"id": identity.run_id, "url": identity.url}
        self.delivery.attach(sinks, restamp=(local_id, identity.run_id))

    def went_offline(self, reason: str) -> None:
        """The platform did not register the run: it goes on offline, for `prime-runs sync`."""
        self.identity = dataclasses.replace(self.identity, mode=OFFLINE)
        self.description.update(mode=OFFLINE, offline_because=reason)
        self.delivery.forget_expected()

    # -- fork --------------------------------------------------------------------

    def after_fork(self) -> None:
        """In a forked child: own nothing of the parent's but the run's identity."""
        self._finish_after_fork()
        self.counters = Counters()
        self._reporter = Reporter(self.counters, self.on_error)
        self.summary_acc = SummaryAccumulator()
        self._summarizes = False  # the parent reads this process's segments back at finish
        self.gate = LogGate()
        if self.archive is not None:
            self.journal = Journal(self.archive, self.counters, self.report)
        self.delivery.after_fork()

"""One run's engine: identity, journal, delivery, counters and the finish sequence.

``Run`` (the handle), ``RunProcessor`` (raw spans) and ``prime-runs sync`` all
drive a run through this object, so the three entry points behave the same.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import prime_runs._runs.finishing as _finishing
import prime_runs._runs.rerun as _retry
from prime_runs._delivery.delivery import Delivery
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.journal import Journal, computed_summary
from prime_runs._records.encode import Encoded
from prime_runs._records.item import Outcome
from prime_runs._records.jsonio import sanitize_nonfinite
from prime_runs._runs.accounting import Counters
from prime_runs._runs.finishing import DEFAULT_FINISH_TIMEOUT
from prime_runs._runs.latch import Pending
from prime_runs._runs.loggate import LogGate
from prime_runs._runs.reporting import Reporter
from prime_runs.errors import describe
from prime_runs.metrics import SummaryAccumulator
from prime_runs.settings import OFFLINE
from prime_runs.status import RunStatus

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


class RunState:
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
        self._closer = closer
        self._lock = threading.RLock()
        self._finish_lock = threading.RLock()  # a signal handler may re-enter
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
        self.status = RunStatus.RUNNING
        self.finishing = False
        self.finished = False
        self.summary: dict[str, Any] | None = None
        self.summary_updates: dict[str, Any] = {}  # Run.update_summary(), merged at finish
        self.summary_given = False  # finish(summary=...): the producer's numbers win
        self.records_summarized = 0  # records the summary covers, wherever logged (_coverage)
        # A join's ids an earlier, crashed attempt on this host already stored (_retry).
        self.stored_ids: frozenset[str] = frozenset()
        self.already_stored = 0
        # A join's last step at finish (_late: records that landed after the finalize).
        self.after_finish: Callable[[RunState, float], None] | None = None
        self.error: str | None = None
        self._pid = os.getpid()
        self.span: Any = None
        # A raw run span's registration under way (``_registering``); finish() waits for it.
        self.registering: Pending | None = None
        self.gate = LogGate()  # finish() waits for log calls in flight, then refuses more
        self._handles = 1  # Run handles on this state (a join shared by several, see _join)
        self._status_lock = threading.Lock()
        self._closed = False  # the platform confirmed the close-out
        if archive is not None and owner:
            try:
                archive.write_status(self._status_doc())
            except OSError as exc:  # a full disk at the start is reported, not fatal
                self.report(f"could not write the run's status to the archive: {exc}")

    # -- identity ------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    @property
    def workers(self) -> list[Any]:
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

    def on_outcome(self, channel: Any, outcome: Outcome) -> None:
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

    def _on_retired(self, channel: Any, left: int) -> None:
        """Records still waiting for a sink that stopped: its failures (or quiet skips)."""
        self.counters.count_sink("skipped" if channel.quiet else "failed", channel.name, left)

    def on_late_outcome(self, channel: Any, outcome: Outcome) -> None:
        """A batch that settled after ``finish()`` gave up on it: the counters already hold
        it as unsent, so only the archive learns what landed (sync will not resend it)."""
        if self.journal is not None:
            self.journal.settle_late(channel.name, outcome)
        self._release_journal()

    # -- flush and finish ---------------------------------------------------------

    def registered(
        self, identity: Identity, closer: Closer, sinks: list[Any], local_id: str
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

    def flush(self, timeout: float | None) -> bool:
        deadline = time.monotonic() + _finishing.budget(timeout, DEFAULT_FINISH_TIMEOUT)
        if self.registering is not None:
            self.registering.wait(deadline)
        self.delivery.drain(deadline)
        # Stored everywhere: nothing waits, and no sink gave up on (or refused) a record.
        return not self.delivery.pending() and not any(self.counters.failed.values())

    def finish(
        self,
        status: RunStatus,
        summary: dict[str, Any] | None,
        error: str | None,
        timeout: float | None,
    ) -> bool:
        """Close the run once; later calls return False. Never raises (see ``raise_pending``).

        Returns within ``timeout`` (default 300 s) plus ``_finishing.CLOSE_MARGIN``, and
        within about ``SILENT_GRACE + DOWN_CLOSE_BUDGET`` when the platform accepts nothing.
        """
        with self._finish_lock:
            if self.finished or self.finishing:
                return False
            self.finishing = True
            self.gate.close()
        started = time.monotonic()
        deadline = started + _finishing.budget(timeout, DEFAULT_FINISH_TIMEOUT)
        # Keep part of the budget for the close-out, so a stalled upload cannot leave the
        # run RUNNING on the platform; unsent records stay in the journal for sync.
        send_by = deadline - min(5.0, (deadline - started) / 3)
        self.gate.wait_idle(send_by)
        self._await_registration(send_by)
        self.status = status
        self.error = error
        self._settle_summary(summary)
        # Drain before closing: the platform computes statistics at finalize.
        # Whatever the live queues have not delivered (dropped, failed, still queued) goes
        # now, from the ledger (bytes in memory or in the journal), through the same sinks.
        self.delivery.stop_by(send_by)
        silent = self.delivery.drain(
            send_by,
            started=started,
            stored_any=self._stored_any,
            silent_after=_finishing.SILENT_GRACE,
        )
        down = silent or self.delivery.platform_down()
        if down:
            deadline = min(deadline, time.monotonic() + _finishing.DOWN_CLOSE_BUDGET)
        _finishing.close_sinks(self.delivery, self.counters, self.report)
        if down:
            _finishing.report_down(self.counters, self.archive, self.report)
        closed = self._close_out(status, error, deadline)
        if self.after_finish is not None and not self.owner and not self.forked:
            self.after_finish(self, deadline)
        with self._status_lock:
            self.finished = True
            self._closed = closed
            self._write_final_status()
        self._warn_losses()
        self._release_journal()
        return True

    def _await_registration(self, until: float) -> None:
        """A raw run span's registration still under way: wait for it until ``until``."""
        if self.registering is not None and not self.registering.settle(until):
            self.report(
                "the run was not registered on the platform before the finish deadline; "
                "`prime-runs sync` registers it and uploads its records"
            )

    def _settle_summary(self, given: dict[str, Any] | None) -> None:
        """The run's final numbers: the producer's, else (the owner) computed from every
        worker's records, with ``update_summary()``'s values merged in."""
        self.summary_given = given is not None
        computed = None
        if given is None and self.owner and not self.forked:
            own = set(self.journal.segments) if self.journal is not None else set()
            computed = computed_summary(self.archive, self.summary_acc, self.report, skip=own)
        self.summary = _finishing.final_summary(given, dict(self.summary_updates), computed)

    def _release_journal(self) -> None:
        """Once the run is finished and no request of its is in flight: close its journal
        files and give up its segments' leases, so `prime-runs sync` may deliver what is
        left. A request still in flight keeps them until it settles (``on_late_outcome``)."""
        if self.archive is None or not self.finished:
            return
        if any(c.delivering() for c in self.delivery.channels.values()):
            return
        # A request that went unanswered may still land: sync waits a while before it
        # takes those segments over.
        channels = self.delivery.channels.values()
        self.archive.close(linger=any(c.in_doubt for c in channels))

    def _stored_any(self) -> bool:
        return self.counters.stored_any()

    def _close_out(self, status: RunStatus, error: str | None, deadline: float) -> bool:
        """Close the run on the platform within ``deadline`` (plus ``CLOSE_MARGIN``)."""
        closer = self._closer
        if closer is None or not self.owner or self.forked:
            return False
        summary = self._summary_for_platform()
        close = _finishing.CloseOut(
            lambda: closer(self, status, summary, error, deadline), self._closed_late
        )
        outcome = close.run(deadline + _finishing.CLOSE_MARGIN)
        if outcome is None:
            self.report(
                "the platform did not confirm the run's close-out before the finish deadline; "
                "`prime-runs sync` closes it if it stays open"
            )
            return False
        if not outcome and close.error is not None:
            self.report(
                f"could not close the run on the platform: {describe(close.error)}", close.error
            )
        return outcome

    def _closed_late(self, ok: bool) -> None:
        """The close-out ended after finish() returned: record a success in status.json."""
        if not ok:
            return
        with self._status_lock:
            self._closed = True
            if self.finished:
                self._write_final_status()

    def _write_final_status(self) -> None:
        if self.archive is None or not self.owner or self.forked:
            return
        try:
            self.archive.write_status(self._status_doc(closed=self._closed))
        except OSError as exc:
            self.report(f"could not write the run's status to the archive: {exc}")

    def _summary_for_platform(self) -> dict[str, Any]:
        written = self.counters.traces_episodes_written
        online = self.identity.mode == "online"
        return _finishing.platform_summary(self.summary, written if online else None)

    def _status_doc(self, *, closed: bool = False) -> dict[str, Any]:
        summary = sanitize_nonfinite(self.summary) if self.summary is not None else None
        finished_at = time.time() if self.finished else None
        return {
            **{"status": self.status.value, "summary": summary, "error": self.error},
            **{"finished_at": finished_at, "closed": closed, "pid": self._pid},
            **self.counters.status_fields(),
        }

    def _warn_losses(self) -> None:
        where = f" (archive: {self.archive.path})" if self.archive is not None else ""
        self.counters.warn_losses(run_id=self.run_id, where=where, online=bool(self.workers))

    # -- fork --------------------------------------------------------------------

    def after_fork(self) -> None:
        """In a forked child: own nothing of the parent's but the run's identity."""
        self._lock = threading.RLock()
        self._finish_lock = threading.RLock()  # a signal handler may re-enter
        self.counters = Counters()
        self._reporter = Reporter(self.counters, self.on_error)
        self.summary_acc = SummaryAccumulator()
        self._summarizes = False  # the parent reads this process's segments back at finish
        self.gate = LogGate()
        self._status_lock = threading.Lock()
        if self.archive is not None:
            self.journal = Journal(self.archive, self.counters, self.report)
        self.delivery.after_fork()

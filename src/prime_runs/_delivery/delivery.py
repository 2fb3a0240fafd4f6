"""One run's delivery: its ledger (the queue of every sink) and a channel per sink.

A record handed to the delivery waits in the ledger for each sink; the process's worker of
the sink (``_delivery/workers``) claims it and sends it through the run's channel
(:meth:`Delivery.serve`). ``flush()``/``finish()`` (:meth:`Delivery.drain`) rush those
workers and wait on the ledger within the caller's deadline. A user's exporter that sees a
raw record span claims the same record from the ledger (:meth:`Delivery.export`), so the
two deliver it once between them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import prime_runs._delivery.registry as _registry
import prime_runs._delivery.workers as _workers
import prime_runs._journal.batches as _batches
import prime_runs.platform.retry as retry
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.ledger import Ledger
from prime_runs._records.item import Item, Outcome, Sink
from prime_runs._records.restamp import Restamp
from prime_runs.exporters._channel import Channel

logger = logging.getLogger("prime_runs")

# One delivery takes at most this much of a batch (a flush or finish too): a stalled
# request then holds a bounded part of the run's records and their projected rows.
BATCH_ITEMS = 2_000
BATCH_BYTES = 4 * 1024 * 1024
_POLL = 0.25  # how often a drain looks at the sinks' progress

OutcomeHandler = Callable[[Channel, Outcome], None]


class Delivery:
    """Thread-safe. ``on_outcome``/``on_late`` account a settled delivery (journal acks,
    counters); the ledger is updated here, after them."""

    def __init__(
        self,
        run_id: str,
        archive: RunArchive | None,
        *,
        on_outcome: OutcomeHandler,
        on_late: OutcomeHandler,
        on_retired: Callable[[Channel, int], None] | None = None,
        pause: float | None = None,
    ) -> None:
        self.run_id = run_id
        self._pause = pause  # how its sinks retry (training metrics pause: ``Channel``)
        self._archive = archive
        self._on_outcome = on_outcome
        self._on_late = on_late
        self._on_retired = on_retired
        self.channels: dict[str, Channel] = {}
        self.ledger = Ledger((), archive)
        # Sinks attached later (a raw run span's run still registering): records wait in
        # the ledger for them meanwhile.
        self._expected: tuple[str, ...] = ()
        # Records logged under the run's local id before it was registered are sent with
        # the platform's in their stamps (``Item.stamps``).
        self._restamp: Restamp | None = None
        self._attached = threading.Event()
        self._turns: dict[str, threading.Lock] = {}  # see ``_turn``
        self._turns_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Delivery({self.run_id!r}, sinks={list(self.channels)})"

    # -- wiring ------------------------------------------------------------------------

    @property
    def online(self) -> bool:
        """Records go to sinks: attached ones, or ones expected once the run is registered."""
        return bool(self.channels or self._expected)

    def expect(self, names: list[str]) -> None:
        """Hold records for sinks ``names``, attached later (called before the first record)."""
        self._expected = tuple(names)
        self.ledger = Ledger(names, self._archive)

    def forget_expected(self) -> None:
        """The expected sinks will not come (the run went offline): the journal keeps its
        records, the ledger lets them go."""
        self._expected = ()
        self.ledger = Ledger((), self._archive)
        self._attached.set()

    def attach(self, sinks: Sequence[Sink], *, restamp: tuple[str, str] | None = None) -> None:
        """Deliver to ``sinks`` (called once: before the first record, or after ``expect``,
        when the records already held are queued for them). ``restamp``: the local and
        the platform run id, for records stamped with the first."""
        channels: dict[str, Channel] = {}
        for sink in sinks:
            channels[sink.name] = Channel(
                sink, on_outcome=self._settled, on_late=self._late, pause=self._pause
            )
            keep_notes = getattr(sink, "keep_notes", None)
            if keep_notes is not None and self._archive is not None:
                # Each batch noted before it is sent: see ``_journal/batches``.
                keep_notes(_batches.notebook(self._archive.path, sink.name))
        if restamp is not None:
            self._restamp = Restamp.between(*restamp)
        # Published whole, and only now: a record handed meanwhile (another thread) waits
        # for every sink, and an export that finds a channel finds its stamps too.
        expected = self._expected
        if not expected:
            self.ledger = Ledger(list(channels), self._archive)
        self.channels = channels
        for name in expected:
            if name not in self.channels:
                self.ledger.abandon(name)  # a sink the registration did not give
        if self.channels:
            _registry.register(self)
        self._expected = ()
        self._attached.set()
        if expected:
            # False at interpreter shutdown: finish() delivers on its own thread.
            _workers.kick(list(self.channels))

    # -- the live path -----------------------------------------------------------------

    def hand(self, item: Item, origin: tuple[int, int] | None = None) -> bool:
        """Hold ``item`` for every open sink and wake their workers. False when it cannot be
        held (no journal, memory bound). ``origin``: the raw span (id, event index or -1)
        the record came from."""
        expected = self._expected  # read first: ``attach`` clears it after the channels
        open_ = [c.name for c in self.channels.values() if c.retired is None]
        open_ = open_ or list(expected)
        if not open_:
            return True
        ref = self.ledger.add(item, sinks=open_)
        if ref is None:
            return False
        if origin is not None:
            _registry.note_origin(origin, self, ref)
        if self.channels:  # else sinks not attached yet: ``attach`` wakes the workers
            _workers.kick(open_)
        return True

    def export(self, sink: str, refs: list[int], until: float) -> bool:
        """Deliver the records ``refs`` to ``sink`` (a user's exporter saw their raw spans)
        until ``until`` (``time.monotonic()``); False when some of them are not stored
        (yet): they stay owed, for the sink's worker."""
        channel = self.channels.get(sink)
        if channel is None and sink in self._expected:
            # The run is being registered (in well under a second, usually): wait for its
            # sinks within this export's time, else the records stay owed.
            self._attached.wait(max(0.0, until - time.monotonic()))
            channel = self.channels.get(sink)
            if channel is None:
                return False
        if channel is None:
            return True
        limits = {"max_items": BATCH_ITEMS, "max_bytes": BATCH_BYTES}
        remaining = iter(refs)  # each claim takes the next requests' worth
        claim = lambda: self._stamped(self.ledger.claim(sink, remaining, **limits))  # noqa: E731
        return self._deliver_claims(channel, claim, until)

    def serve(self, sink: str, until: float, *, drain: bool = True) -> bool:
        """The sink's worker: deliver the oldest records waiting for ``sink`` until none is
        left or ``until`` passes; False when some stay owed (a back-off, out of time).
        ``drain=False``: stop once a claim took every record waiting, so those logged
        during its request wait for the next batch rather than leave in a trickle of
        small requests."""
        channel = self.channels.get(sink)
        if channel is None or channel.retired is not None:
            return True  # not attached yet (``attach`` wakes the worker), or stopped
        claim = lambda: self._stamped(  # noqa: E731
            self.ledger.claim(sink, max_items=BATCH_ITEMS, max_bytes=BATCH_BYTES)
        )
        return self._deliver_claims(channel, claim, until, drain=drain)

    def _stamped(self, items: list[Item]) -> list[Item]:
        restamp = self._restamp
        if restamp is None:
            return items
        return [restamp.item(item) for item in items]

    def _deliver_claims(
        self,
        channel: Channel,
        claim: Callable[[], list[Item]],
        until: float,
        *,
        drain: bool = True,
    ) -> bool:
        """Deliver what ``claim`` gives until it gives nothing or ``until`` passes (and the
        records the channel keeps for a resend); False when some are not stored (yet).
        ``drain=False``: stop after a claim that left no record waiting."""
        # A request may take MIN_ATTEMPT_TIMEOUT whatever is left: none starts later than
        # that before ``until`` (but one, when the whole budget is shorter), so an export
        # ends by its time. What is not sent stays owed.
        start_by = until - retry.MIN_ATTEMPT_TIMEOUT
        now = time.monotonic()
        if now >= until:
            return False
        turn = self._turn(channel.name)
        if not turn.acquire(timeout=max(0.0, start_by - now)):
            return False  # another delivery of this sink kept it busy all the while
        try:
            items = claim()
            if not items and not channel.held():
                return True
            ok = True
            while True:
                more = drain or self.ledger.claimable(channel.name)
                ok = not channel.deliver(items, until).unsent and ok
                # Let this batch (and its outcome) go before the next claim reads records
                # back: a sink holds one claim's records, not two.
                items = []
                if time.monotonic() >= until:
                    return False  # out of time: what is left stays owed
                if not more:
                    return ok and not channel.held()
                items = claim()
                if not items:
                    return ok and not channel.held()
                if time.monotonic() >= start_by:  # no time for another request
                    self.ledger.release(channel.name, items)
                    return False
        finally:
            turn.release()

    def _turn(self, sink: str) -> threading.Lock:
        """The sink's turn: one delivery claims its records at a time (a live export or a
        drain), so the records a sink holds in memory are one claim's, never two."""
        with self._turns_lock:
            return self._turns.setdefault(sink, threading.Lock())

    # -- outcomes ----------------------------------------------------------------------

    def _settled(self, channel: Channel, outcome: Outcome) -> None:
        try:
            self._on_outcome(channel, outcome)
        finally:
            self._settle_ledger(channel.name, outcome)
        if outcome.retire is not None:
            # What still waits for the sink will not reach it during the run (the journal
            # keeps it for `prime-runs sync`): counted now, as the old queue's leftovers were.
            left = self.ledger.abandon(channel.name)
            if left and self._on_retired is not None:
                self._on_retired(channel, left)

    def _late(self, channel: Channel, outcome: Outcome) -> None:
        self._on_late(channel, outcome)

    def _settle_ledger(self, sink: str, outcome: Outcome) -> None:
        done = [*outcome.acked, *outcome.skipped]
        done += [item for item, _ in outcome.rejected]
        done += [item for item, _ in outcome.unsent]
        self.ledger.settle(sink, done)
        if outcome.retry:  # not kept by the channel: another delivery may take them
            self.ledger.release(sink, outcome.retry)

    # -- flush and finish --------------------------------------------------------------

    def pending(self) -> int:
        return sum(self.ledger.waiting(name) for name in self._names())

    def _names(self) -> list[str]:
        return list(self.channels) or list(self._expected)

    def drain(
        self,
        until: float,
        *,
        started: float | None = None,
        stored_any: Callable[[], bool] | None = None,
        silent_after: float = 0.0,
    ) -> bool:
        """Have the sinks' workers deliver every record a sink has not settled, and wait for
        them until ``until``. True when it gave up early because the platform stored nothing
        during the whole run (``stored_any``) for ``silent_after`` seconds since ``started``
        while records were pending."""
        owed = self._owed()
        if not owed:
            return False
        if not _workers.kick(owed, rush=True):
            # Interpreter shutdown (Python 3.12+ refuses new threads in exit hooks): the
            # sinks are served one after the other on this thread instead.
            for name in owed:
                self.serve(name, until)
            return False
        while self._owed():
            now = time.monotonic()
            if now >= until:
                return False
            if started is not None and stored_any is not None and now - started >= silent_after:
                if not stored_any():
                    self.stop_by(now)
                    return True
            self.ledger.wait_change(min(_POLL, until - now))
        return False

    def _owed(self) -> list[str]:
        """The open sinks that have records to settle (waiting, or kept for a resend)."""
        return [
            c.name
            for c in self.channels.values()
            if c.retired is None and (self.ledger.waiting(c.name) or c.held())
        ]

    def stop_by(self, at: float) -> None:
        for channel in self.channels.values():
            channel.stop_by(at)

    def platform_down(self) -> bool:
        """Every sink that matters stopped after repeated transient failures."""
        relevant = [c for c in self.channels.values() if not c.quiet]
        return bool(relevant) and all(c.failing for c in relevant)

    def close(self) -> dict[str, int]:
        """Stop every sink; per sink, how many records it never settled."""
        left: dict[str, int] = {}
        for channel in self.channels.values():
            channel.close()
        for name in self._names():
            n = self.ledger.close(name)
            if n:
                left[name] = n
        _registry.unregister(self)
        _registry.forget_origins(self)
        return left

    def after_fork(self) -> None:
        """In a forked child: the parent's records are the parent's; the workers start
        afresh (``_delivery/workers``)."""
        self.ledger.after_fork()
        self._turns, self._turns_lock = {}, threading.Lock()  # a parent thread's are stale
        for channel in self.channels.values():
            channel.after_fork()

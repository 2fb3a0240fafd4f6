"""One run's records on their way to the sinks: what travels beside each record's span.

A record's span carries only a small handle (``ref``). The ledger holds the record for it:
the encoded bytes while they fit the memory bound, else only the journal key (the bytes are
read back from the journal when a sink needs them). Per sink it knows which records still
wait for a settled answer (stored, rejected for their own sake, or given up on) and which
of those a delivery has claimed, so the live queue, ``flush()``/``finish()`` and a user's
exporter never send one record twice, and ``finish()`` delivers what the queue dropped
without reading the whole journal.

Without a journal the bytes are the only copy: a record that does not fit the bound is
refused (``add`` returns None) and counted as dropped by the caller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

from ._archive import RunArchive
from .exporters._base import Item

logger = logging.getLogger("prime_runs")

MAX_HELD_ITEMS = 100_000
MAX_HELD_BYTES = 64 * 1024 * 1024
# Decoded records (which spare the sample projection a decode) are kept only while the
# held bytes are this few: a decoded dict is several times its JSON.
MAPPING_BYTES = 4 * 1024 * 1024


class Ledger:
    """Thread-safe. ``sinks``: the names records may wait for."""

    def __init__(self, sinks: Sequence[str], archive: RunArchive | None) -> None:
        self._archive = archive
        self._cond = threading.Condition()
        self._next = 0
        self._entries: dict[int, Item] = {}
        self._held = 0  # records whose bytes are in memory
        self._held_bytes = 0
        self._waiting: dict[str, dict[int, None]] = {s: {} for s in sinks}
        self._busy: dict[str, set[int]] = {s: set() for s in sinks}
        self._live: dict[str, set[int]] = {s: set() for s in sinks}  # claimed by live exports
        self.taken_over: dict[str, int] = dict.fromkeys(sinks, 0)  # see ``claim``
        self._closed: set[str] = set()

    def add(
        self,
        kind: str,
        data: bytes,
        key: object,
        problem: str | None,
        record_id: str | None,
        mapping: object,
        sinks: Iterable[str],
    ) -> int | None:
        """Hold a record for ``sinks``; its handle, or None when it cannot be held (no
        journal key and the memory bound is reached)."""
        with self._cond:
            hold = self._held < MAX_HELD_ITEMS and self._held_bytes + len(data) <= MAX_HELD_BYTES
            if not hold and key is None:
                return None
            ref = self._next
            self._next += 1
            if hold:
                self._held += 1
                self._held_bytes += len(data)
                if self._held_bytes > MAPPING_BYTES:
                    mapping = None
                item = Item(kind, data, key, problem, record_id, mapping, ref)  # type: ignore[arg-type]
            else:
                item = Item(kind, b"", key, problem, record_id, None, ref)  # type: ignore[arg-type]
            self._entries[ref] = item
            for sink in sinks:
                if sink not in self._closed:
                    self._waiting[sink][ref] = None
            return ref

    def claim(
        self,
        sink: str,
        refs: Iterable[int] | None = None,
        *,
        max_items: int = 2_000,
        max_bytes: int = 8 * 1024 * 1024,
    ) -> list[Item]:
        """Records waiting for ``sink`` that no delivery holds (``refs`` only: a live export;
        else the oldest: a flush or finish), now held by the caller until settled or
        released. ``taken_over`` counts the records a flush or finish claimed that no live
        export ever had (the queue dropped them, or had not sent them yet)."""
        with self._cond:
            waiting, busy = self._waiting.get(sink), self._busy.get(sink)
            live = self._live.get(sink)
            if waiting is None or busy is None or live is None:
                return []
            out: list[Item] = []
            size = 0
            for ref in waiting if refs is None else refs:
                if ref in busy or ref not in waiting:
                    continue
                busy.add(ref)
                if refs is not None:
                    live.add(ref)
                elif ref not in live:
                    self.taken_over[sink] += 1
                item = self._entries[ref]
                out.append(item)
                size += len(item.data) or 1024
                if len(out) >= max_items or size >= max_bytes:
                    break
        return self._load(sink, out)

    def _load(self, sink: str, items: list[Item]) -> list[Item]:
        """Items with their bytes: those only in the journal are read back."""
        if self._archive is None or all(i.data for i in items):
            return items
        by_segment: dict[str, list[Item]] = {}
        for item in items:
            if not item.data:
                by_segment.setdefault(item.key.segment, []).append(item)  # type: ignore[union-attr]
        loaded: dict[int, Item] = {}
        for segment, lite in by_segment.items():
            wanted = {i.key.offset: i for i in lite}  # type: ignore[union-attr]
            try:
                for key, data in self._archive.read_many(segment, sorted(wanted)):
                    i = wanted[key.offset]
                    loaded[i.ref] = Item(i.kind, data, i.key, i.problem, i.record_id, None, i.ref)  # type: ignore[index]
            except OSError as exc:
                # Left claimed: counted as not sent at finish, and pending for sync.
                logger.warning("prime-runs: could not read records back from the journal: %s", exc)
        return [loaded.get(i.ref, i) for i in items if i.data or i.ref in loaded]  # type: ignore[arg-type]

    def release(self, sink: str, items: Iterable[Item]) -> None:
        """No delivery holds these any more; they still wait for ``sink``."""
        with self._cond:
            busy = self._busy.get(sink, set())
            for item in items:
                busy.discard(item.ref)  # type: ignore[arg-type]
            self._cond.notify_all()

    def settle(self, sink: str, items: Iterable[Item]) -> None:
        """``sink`` is done with these; a record no sink waits for is let go."""
        with self._cond:
            waiting, busy = self._waiting.get(sink), self._busy.get(sink)
            if waiting is None or busy is None:
                return
            for item in items:
                ref = item.ref
                if ref is None or ref not in waiting:
                    continue
                del waiting[ref]
                busy.discard(ref)
                self._live[sink].discard(ref)
                if not any(ref in w for w in self._waiting.values()):
                    self._forget(ref)
            self._cond.notify_all()

    def _forget(self, ref: int) -> None:
        item = self._entries.pop(ref, None)
        if item is not None and item.data:
            self._held -= 1
            self._held_bytes -= len(item.data)

    def waiting(self, sink: str) -> int:
        with self._cond:
            return len(self._waiting.get(sink, ()))

    def claimable(self, sink: str) -> int:
        """Records waiting for ``sink`` that no delivery holds."""
        with self._cond:
            return len(self._waiting.get(sink, ())) - len(self._busy.get(sink, ()))

    def wait_change(self, timeout: float) -> None:
        """Wait (at most ``timeout``) for a settle or release."""
        with self._cond:
            self._cond.wait(max(0.0, timeout))

    def close(self, sink: str) -> int:
        """Stop waiting for ``sink``; how many records it never settled."""
        with self._cond:
            self._closed.add(sink)
            left = list(self._waiting.get(sink, {}))
            self._waiting[sink] = {}
            self._busy[sink] = set()
            self._live[sink] = set()
            for ref in left:
                if not any(ref in w for w in self._waiting.values()):
                    self._forget(ref)
            self._cond.notify_all()
            return len(left)

    def after_fork(self) -> None:
        """In a forked child: the parent's records are the parent's to deliver."""
        self._cond = threading.Condition()
        self._entries = {}
        self._held = self._held_bytes = 0
        self._waiting = {s: {} for s in self._waiting}
        self._busy = {s: set() for s in self._busy}
        self._live = {s: set() for s in self._live}
        self.taken_over = dict.fromkeys(self.taken_over, 0)

"""One run's records on their way to the sinks: the queue each sink's worker takes from.

Each record has a handle (``ref``, a sequence number). The ledger holds the record for it:
the encoded bytes while they fit the memory bound, else where the journal holds it (8 bytes;
16 for an episode, with where its id lies, ``readback.head``). Per sink it keeps
one byte per record while any record before it is unsettled (stored, rejected for its own
sake, or given up on) and knows which records a delivery has claimed, so the sink's worker
and a user's exporter never send one record twice. A burst therefore costs about thirty
bytes a record beyond the bytes kept in memory, and a claim reads back at most its byte
budget (or one record larger than it).

A record read back is made an item again by ``_journal/readback``.

A record whose run id may still change (a raw ``run`` span's run, registering) also has
where its stamps lie (``Item.stamps``), kept beside the journal key of one not held in
memory: only for the few seconds a registration takes.

Without a journal the bytes are the only copy: a record that does not fit the bound is
refused (``add`` returns None) and counted as dropped by the caller.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import prime_runs._journal.readback as _readback
from prime_runs._journal.archive import RecordKey, RunArchive
from prime_runs._records.item import Item

logger = logging.getLogger("prime_runs")

# Records whose bytes stay in memory. Without a journal that is the only copy, so the bound
# is generous; with one, a burst keeps only part in memory and the rest costs about ten
# bytes each until it is read back.
MAX_HELD_ITEMS = 100_000
MAX_HELD_ITEMS_JOURNALED = 20_000
MAX_HELD_BYTES = 64 * 1024 * 1024
# With a journal, a record beyond this is read back from it (the page cache, usually):
# a stalled platform then costs a burst little memory.
MAX_HELD_BYTES_JOURNALED = 16 * 1024 * 1024
# Decoded records (which spare the sample projection a decode) are kept only while the
# held bytes are this few: a decoded dict is several times its JSON.
MAPPING_BYTES = 4 * 1024 * 1024
# Records read back for one sink are kept a moment for the others, which claim the same
# records at about the same time: each is read and checked once, not once per sink.
RECENT_BYTES = 8 * 1024 * 1024
_OFFSET_BITS = 40  # a journal key packed as segment number << 40 | offset
_NONE = -1  # no journal key: the record is held in memory
_COMPACT = 65_536  # settled slots dropped from the front at a time
_MAX_SIZE = 2**32 - 1  # what a size slot holds (records are far smaller)


class Ledger:
    """Thread-safe. ``sinks``: the names records may wait for."""

    def __init__(self, sinks: Sequence[str], archive: RunArchive | None) -> None:
        self._archive = archive
        self._cond = threading.Condition()
        self._sinks = list(sinks)
        self._reset(0)
        self._closed: set[str] = set()
        self._segments: list[str] = []
        self._segment_no: dict[str, int] = {}

    def _reset(self, base: int) -> None:
        self._base = self._next = base  # slot 0 is record ``base``
        self._held: dict[int, Item] = {}
        self._held_bytes = 0
        self._lite = array("q")  # per slot: the packed journal key, or _NONE
        # Per slot: the record's size, so a claim of journal-only records is bounded in
        # bytes before they are read back (a 20 MB record is claimed alone).
        self._sizes = array("I")
        # Per slot: where an episode's id lies (see ``readback.head``), or 0.
        self._ids = array("q")
        self._waiting = {s: bytearray() for s in self._sinks}  # per slot: 1 while waiting
        self._count = dict.fromkeys(self._sinks, 0)
        self._low = dict.fromkeys(self._sinks, base)  # no record before it waits
        # A worker's scan starts here: every record before it is settled or claimed.
        self._cursor = dict.fromkeys(self._sinks, base)
        self._busy: dict[str, set[int]] = {s: set() for s in self._sinks}
        self._recent: OrderedDict[int, Item] = OrderedDict()  # see RECENT_BYTES
        self._stamps: dict[int, tuple[int, ...]] = {}  # of records held as a journal key
        self._recent_bytes = 0

    def add(self, item: Item, *, sinks: Iterable[str]) -> int | None:
        """Hold ``item`` for ``sinks``; its handle, or None when it cannot be held (no
        journal key and the memory bound is reached)."""
        journaled = self._archive is not None
        limit = MAX_HELD_ITEMS_JOURNALED if journaled else MAX_HELD_ITEMS
        max_bytes = MAX_HELD_BYTES_JOURNALED if journaled else MAX_HELD_BYTES
        wanted = set(sinks)
        size = len(item.data)
        with self._cond:
            hold = len(self._held) < limit and self._held_bytes + size <= max_bytes
            if not hold and not isinstance(item.key, RecordKey):
                return None
            ref = self._next
            self._next += 1
            if hold:
                self._held_bytes += size
                mapping = item.mapping if self._held_bytes <= MAPPING_BYTES else None
                # Built directly (in ``Item``'s order): ``dataclasses.replace`` costs twice
                # as much (~3 µs).
                self._held[ref] = Item(
                    *(item.kind, item.data, item.key, item.problem, item.record_id),
                    *(mapping, ref, item.exact, item.stamps),
                )
                self._lite.append(_NONE)
            else:
                assert isinstance(item.key, RecordKey)
                self._lite.append(self._pack(item.key, item.exact))
                if item.stamps is not None:
                    self._stamps[ref] = item.stamps
            self._ids.append(0 if hold else _readback.head(item))
            self._sizes.append(min(size, _MAX_SIZE))
            for sink in self._sinks:
                flag = sink in wanted and sink not in self._closed
                self._waiting[sink].append(flag)
                self._count[sink] += flag
            return ref

    def _waits(self, sink: str, ref: int) -> bool:
        slot = ref - self._base
        flags = self._waiting[sink]
        return 0 <= slot < len(flags) and flags[slot] == 1

    def claim(
        self,
        sink: str,
        refs: Iterable[int] | None = None,
        *,
        max_items: int = 2_000,
        max_bytes: int = 8 * 1024 * 1024,
    ) -> list[Item]:
        """Records waiting for ``sink`` that no delivery holds (``refs`` only: a user's
        exporter; else the oldest: the sink's worker), now held by the caller until settled
        or released."""
        with self._cond:
            if sink not in self._waiting:
                return []
            if refs is None:
                start = max(self._low[sink], self._cursor[sink])
                candidates: Iterable[int] = range(start, self._next)
                taken = self._take(sink, candidates, self._cursor, max_items, max_bytes)
            else:
                taken = self._take(sink, refs, None, max_items, max_bytes)
            segments = list(self._segments)
        return self._loaded(*taken, segments)

    def _take(
        self,
        sink: str,
        candidates: Iterable[int],
        cursor: dict[str, int] | None,
        max_items: int,
        max_bytes: int,
    ) -> tuple[list[Item], list[tuple[int, int]]]:
        """Claim from ``candidates`` (under the lock): the records held in memory, and the
        (ref, packed key) of those to read back. ``cursor`` moves past each candidate seen."""
        busy = self._busy[sink]
        out: list[Item] = []
        lite: list[tuple[int, int]] = []
        size = 0
        for ref in candidates:
            if cursor is not None:
                cursor[sink] = ref + 1
            if ref in busy or not self._waits(sink, ref):
                continue
            busy.add(ref)
            item = self._held.get(ref)
            if item is not None:
                out.append(item)
                size += len(item.data)
            else:
                lite.append((ref, self._lite[ref - self._base]))
                size += self._sizes[ref - self._base]
            if len(out) + len(lite) >= max_items or size >= max_bytes:
                break
        return out, lite

    def _loaded(
        self, out: list[Item], lite: list[tuple[int, int]], segments: list[str]
    ) -> list[Item]:
        """``out`` with the claimed journal-only records read back (outside the lock)."""
        if lite:
            out.extend(self._load(lite, segments))
            # Every item the ledger hands out has its ref (``Item.ref`` is None elsewhere).
            out.sort(key=lambda i: i.ref or 0)
        return out

    def _pack(self, key: RecordKey, exact: bool) -> int:
        """``segment number << 41 | offset << 1 | exact``: an int, not an object per record."""
        number = self._segment_no.get(key.segment)
        if number is None:
            number = self._segment_no[key.segment] = len(self._segments)
            self._segments.append(key.segment)
        return (number << _OFFSET_BITS | key.offset) << 1 | exact

    def _load(self, lite: list[tuple[int, int]], segments: list[str]) -> list[Item]:
        """Records only in the journal, read back and checked again as at log time.
        One that cannot be read stays claimed: counted as not sent at finish, and pending
        for ``prime-runs sync``."""
        assert self._archive is not None
        by_segment: dict[str, dict[int, _Pending]] = {}
        items: list[Item] = []
        with self._cond:
            for ref, packed in lite:
                item = self._recent.get(ref)
                if item is not None:
                    items.append(item)
                    continue
                exact, packed = bool(packed & 1), packed >> 1
                segment = segments[packed >> _OFFSET_BITS]
                offset = packed & ((1 << _OFFSET_BITS) - 1)
                slot = ref - self._base
                head = self._ids[slot]
                stamps = self._stamps.get(ref)
                pending = (ref, exact, self._sizes[slot], stamps, head)
                by_segment.setdefault(segment, {})[offset] = pending
        read: list[Item] = []
        for segment, refs in by_segment.items():
            try:
                sized = [(offset, entry[2]) for offset, entry in refs.items()]
                for key, data in self._archive.read_many(segment, sized):
                    ref, exact, _size, stamps, head = refs[key.offset]
                    read.append(
                        _readback.from_head(data, key, ref, stamps, head)
                        or _readback.recovered(data, key, ref, exact, stamps)
                    )
            except OSError as exc:
                logger.warning("prime-runs: could not read records back from the journal: %s", exc)
        self._remember(read)
        return items + read

    def _remember(self, items: list[Item]) -> None:
        with self._cond:
            for item in items:
                assert item.ref is not None
                self._recent[item.ref] = item
                self._recent_bytes += len(item.data)
            while self._recent_bytes > RECENT_BYTES and self._recent:
                _, old = self._recent.popitem(last=False)
                self._recent_bytes -= len(old.data)

    def release(self, sink: str, items: Iterable[Item]) -> None:
        """No delivery holds these any more; they still wait for ``sink``."""
        with self._cond:
            busy = self._busy.get(sink)
            if busy is None:
                return
            for item in items:
                if item.ref is not None:
                    busy.discard(item.ref)
                    self._cursor[sink] = min(self._cursor[sink], item.ref)
            self._cond.notify_all()

    def settle(self, sink: str, items: Iterable[Item]) -> None:
        """``sink`` is done with these; a record no sink waits for is let go."""
        with self._cond:
            if sink not in self._waiting:
                return
            flags = self._waiting[sink]
            for item in items:
                ref = item.ref
                if ref is None or not self._waits(sink, ref):
                    continue
                flags[ref - self._base] = 0
                self._count[sink] -= 1
                self._busy[sink].discard(ref)
                self._forget_if_done(ref)
            self._advance(sink)
            self._cond.notify_all()

    def _forget_if_done(self, ref: int) -> None:
        if any(self._waits(s, ref) for s in self._sinks):
            return
        item = self._held.pop(ref, None)
        if item is not None:
            self._held_bytes -= len(item.data)
        self._stamps.pop(ref, None)

    def _advance(self, sink: str) -> None:
        """Move ``sink``'s low mark past settled records; drop slots no sink needs."""
        flags, low = self._waiting[sink], self._low[sink]
        while low < self._next and not flags[low - self._base]:
            low += 1
        self._low[sink] = low
        cut = min(self._low.values()) - self._base
        if cut >= _COMPACT:
            del self._lite[:cut]
            del self._sizes[:cut]
            del self._ids[:cut]
            for s in self._sinks:
                del self._waiting[s][:cut]
            self._base += cut

    def waiting(self, sink: str) -> int:
        with self._cond:
            return self._count.get(sink, 0)

    def claimable(self, sink: str) -> bool:
        """Whether a record waits for ``sink`` that no delivery holds."""
        with self._cond:
            return self._count.get(sink, 0) > len(self._busy.get(sink, ()))

    def wait_change(self, timeout: float) -> None:
        """Wait (at most ``timeout``) for a settle or release."""
        with self._cond:
            self._cond.wait(max(0.0, timeout))

    def abandon(self, sink: str) -> int:
        """``sink`` stopped for the run: stop waiting for the records no delivery holds (the
        ones held settle through their own outcome); how many there were."""
        with self._cond:
            if sink not in self._waiting:
                return 0
            self._closed.add(sink)
            flags, busy = self._waiting[sink], self._busy[sink]
            left = 0
            for ref in range(self._low[sink], self._next):
                if flags[ref - self._base] and ref not in busy:
                    flags[ref - self._base] = 0
                    left += 1
                    self._forget_if_done(ref)
            self._count[sink] -= left
            self._advance(sink)
            self._cond.notify_all()
            return left

    def close(self, sink: str) -> int:
        """Stop waiting for ``sink``; how many records it never settled."""
        with self._cond:
            if sink not in self._waiting:
                return 0
            self._closed.add(sink)
            left = self._count[sink]
            self._waiting[sink] = bytearray(len(self._lite))
            self._count[sink] = 0
            self._busy[sink] = set()
            for ref in list(self._held):
                self._forget_if_done(ref)
            self._advance(sink)
            self._cond.notify_all()
            return left

    def after_fork(self) -> None:
        """In a forked child: the parent's records are the parent's to deliver."""
        self._cond = threading.Condition()
        self._reset(self._next)


_Pending = tuple[int, bool, int, tuple[int, ...] | None, int]  # ref ... head

"""One run's records on their way to the sinks: what travels beside each record's span.

A record's span carries only a small handle (``ref``). The ledger holds the record for it:
the encoded bytes while they fit the memory bound, else only where the journal holds it (a
packed integer: the bytes are read back, and the record checked again, when a sink needs
them). Per sink it knows which records still
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

from ._archive import RecordKey, RunArchive
from ._encode import kind_of, record_id, traces_problem
from ._lines import parse_record
from .exporters._base import Item

logger = logging.getLogger("prime_runs")

# Records whose bytes stay in memory. Without a journal that is the only copy, so the bound
# is generous; with one, a burst keeps only the newest part in memory and the rest costs
# a few dozen bytes each until it is read back.
MAX_HELD_ITEMS = 100_000
MAX_HELD_ITEMS_JOURNALED = 20_000
MAX_HELD_BYTES = 64 * 1024 * 1024
_OFFSET_BITS = 40  # a journal key packed as segment number << 40 | offset
# Decoded records (which spare the sample projection a decode) are kept only while the
# held bytes are this few: a decoded dict is several times its JSON.
MAPPING_BYTES = 4 * 1024 * 1024


class Ledger:
    """Thread-safe. ``sinks``: the names records may wait for."""

    def __init__(self, sinks: Sequence[str], archive: RunArchive | None) -> None:
        self._archive = archive
        self._cond = threading.Condition()
        self._next = 0
        self._entries: dict[int, Item | int] = {}  # an int: only in the journal (packed key)
        self._segments: list[str] = []
        self._segment_no: dict[str, int] = {}
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
        limit = MAX_HELD_ITEMS if self._archive is None else MAX_HELD_ITEMS_JOURNALED
        with self._cond:
            hold = self._held < limit and self._held_bytes + len(data) <= MAX_HELD_BYTES
            if not hold and not isinstance(key, RecordKey):
                return None
            ref = self._next
            self._next += 1
            if hold:
                self._held += 1
                self._held_bytes += len(data)
                if self._held_bytes > MAPPING_BYTES:
                    mapping = None
                entry: Item | int = Item(kind, data, key, problem, record_id, mapping, ref)  # type: ignore[arg-type]
            else:
                entry = self._pack(key)  # type: ignore[arg-type]
            self._entries[ref] = entry
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
            lite: list[tuple[int, int]] = []
            for ref in waiting if refs is None else refs:
                if ref in busy or ref not in waiting:
                    continue
                busy.add(ref)
                if refs is not None:
                    live.add(ref)
                elif ref not in live:
                    self.taken_over[sink] += 1
                entry = self._entries[ref]
                if isinstance(entry, Item):
                    out.append(entry)
                    size += len(entry.data)
                else:
                    lite.append((ref, entry))
                    size += 1024
                if len(out) + len(lite) >= max_items or size >= max_bytes:
                    break
            segments = list(self._segments)
        if lite:
            out.extend(self._load(lite, segments))
            out.sort(key=lambda i: i.ref)  # type: ignore[arg-type,return-value]
        return out

    def _pack(self, key: RecordKey) -> int:
        number = self._segment_no.get(key.segment)
        if number is None:
            number = self._segment_no[key.segment] = len(self._segments)
            self._segments.append(key.segment)
        return number << _OFFSET_BITS | key.offset

    def _load(self, lite: list[tuple[int, int]], segments: list[str]) -> list[Item]:
        """Records only in the journal, read back and checked again as at log time.
        One that cannot be read stays claimed: counted as not sent at finish, and pending
        for ``prime-runs sync``."""
        assert self._archive is not None
        by_segment: dict[str, dict[int, int]] = {}
        for ref, packed in lite:
            segment = segments[packed >> _OFFSET_BITS]
            by_segment.setdefault(segment, {})[packed & ((1 << _OFFSET_BITS) - 1)] = ref
        items: list[Item] = []
        for segment, refs in by_segment.items():
            try:
                for key, data in self._archive.read_many(segment, sorted(refs)):
                    items.append(_recovered(data, key, refs[key.offset]))
            except OSError as exc:
                logger.warning("prime-runs: could not read records back from the journal: %s", exc)
        return items

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
        entry = self._entries.pop(ref, None)
        if isinstance(entry, Item):
            self._held -= 1
            self._held_bytes -= len(entry.data)

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


def _recovered(data: bytes, key: RecordKey, ref: int) -> Item:
    """A record read back from the journal, with what was found at log time found again."""
    record, _problem = parse_record(data)
    if record is None:
        return Item("trace", data, key, None, None, None, ref)  # the sink rejects it
    kind = kind_of(record)
    return Item(kind, data, key, traces_problem(kind, record), record_id(record), None, ref)

"""Records a full queue refused during a run: their journal offsets, and the resend from the
journal at ``finish()`` (the producer has stopped by then, so the queues drain)."""

from __future__ import annotations

import json
import threading
import time
from array import array
from collections.abc import Sequence
from typing import Any

from ._accounting import Counters
from ._archive import RecordKey, RunArchive
from ._encode import record_id, traces_problem
from .exporters._base import Item

# (segment, kind, sinks whose queue was full, whether no sink took it)
Group = tuple[str, str, tuple[str, ...], bool]


class RefusedRecords:
    """Journal offsets grouped by ``Group``: 8 bytes a record, so a long outage stays flat.
    Guarded by its owner's lock."""

    def __init__(self) -> None:
        self._groups: dict[Group, array[int]] = {}

    def note(self, key: RecordKey, kind: str, sinks: tuple[str, ...], dropped: bool) -> None:
        group = (key.segment, kind, sinks, dropped)
        offsets = self._groups.get(group)
        if offsets is None:
            offsets = self._groups[group] = array("q")
        offsets.append(key.offset)

    def take(self) -> dict[Group, array[int]]:
        groups, self._groups = self._groups, {}
        return groups


def resend(
    groups: dict[Group, array[int]],
    archive: RunArchive,
    workers: Sequence[Any],
    counters: Counters,
    lock: threading.RLock,
    deadline: float,
) -> None:
    """Queue the refused records again (waiting for room until ``deadline``) and undo their
    loss counts; those that still do not fit are counted as failures again."""
    by_name = {w.name: w for w in workers}
    for (segment, kind, sinks, dropped), offsets in sorted(groups.items()):
        for key, data in archive.read_many(segment, offsets):
            if time.monotonic() >= deadline:
                break
            with lock:
                # Retired sinks' refusals stay counted as failures (as at refusal).
                if dropped:
                    counters.dropped -= 1
                else:
                    for name in sinks:
                        Counters.add(counters.failed, name, -1)
            item = _recovered_item(kind, data, key)
            for name in sinks:
                if not by_name[name].put_wait(item, deadline):
                    with lock:
                        Counters.add(counters.failed, name, 1)
    with lock:  # a record refused and then recovered is no loss at all
        for name in [n for n, v in counters.failed.items() if v == 0]:
            del counters.failed[name]
    for worker in workers:
        worker.drain(deadline)


def _recovered_item(kind: str, data: bytes, key: RecordKey) -> Item:
    """An item re-read from the journal, validated like one handed over at log time."""
    try:
        record = json.loads(data)
    except ValueError:
        return Item(kind, data, key)
    if not isinstance(record, dict):
        return Item(kind, data, key)
    return Item(kind, data, key, traces_problem(kind, record), record_id(record))

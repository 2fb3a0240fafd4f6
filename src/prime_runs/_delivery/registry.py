"""The runs this process delivers: every open delivery, which the sinks' workers serve.

Entries go when the run's delivery closes (or is collected). Two deliveries of one run id
may be open at once (an owner and a join of its run in one process): both are served.
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol

import prime_runs._forking as _forking


class Served(Protocol):
    """What the registry holds: a run's delivery (``_delivery/delivery``), as the sinks'
    workers and a user's exporters use it."""

    def serve(self, sink: str, until: float, *, drain: bool = True) -> bool: ...

    def export(self, sink: str, refs: list[int], until: float) -> bool: ...

    def drain(self, until: float) -> bool: ...

    def pending(self) -> int: ...


_lock = threading.Lock()
_open: weakref.WeakSet[Served] = weakref.WeakSet()


def register(delivery: Served) -> None:
    with _lock:
        _open.add(delivery)


def unregister(delivery: Served) -> None:
    with _lock:
        _open.discard(delivery)


def deliveries() -> list[Served]:
    """Every open delivery of the process."""
    with _lock:
        return list(_open)


def after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread
    _origins.clear()


# -- raw record spans a user's exporter may deliver ---------------------------------------
# A record logged as a raw span (or span event) is journaled by the run processor and
# held in the run's ledger; a user-placed exporter that later sees the same span claims
# the record through its origin, (span id, event index or -1), so the run's own workers
# and the user's exporter deliver it once between them. Noted only while such an exporter
# exists; the newest MAX_ORIGINS are kept (an unclaimed record is still delivered by the
# run itself). A finished run's origins stay, without their delivery, so its late spans are
# known as delivered rather than as spans of no run.
MAX_ORIGINS = 100_000
_origins: dict[tuple[int, int], tuple[Served | None, int]] = {}
_user_exporters = 0


def user_exporter_created() -> None:
    global _user_exporters
    with _lock:
        _user_exporters += 1


def note_origin(origin: tuple[int, int], delivery: Served | None, ref: int) -> None:
    if not _user_exporters:
        return
    with _lock:
        if len(_origins) >= MAX_ORIGINS:
            del _origins[next(iter(_origins))]
        _origins[origin] = (delivery, ref)


def take_origin(origin: tuple[int, int]) -> tuple[Served | None, int] | None:
    if not _origins:
        return None
    with _lock:
        return _origins.pop(origin, None)


def forget_origins(delivery: Served) -> None:
    """``delivery`` closed: its records are settled; keep only that its spans were known."""
    with _lock:
        for origin, (d, ref) in list(_origins.items()):
            if d is delivery:
                _origins[origin] = (None, ref)


_forking.in_child(after_fork)

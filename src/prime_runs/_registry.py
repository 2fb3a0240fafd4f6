"""The runs this process delivers, by run id: how an exporter finds a span's run.

An exporter may see spans of several runs (one instance on a user's provider serves every
run); each record span names its run (``prime.run.id``), and the run's delivery holds the
record and the sinks. Entries go when the run's delivery closes (or is collected).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_lock = threading.Lock()
_runs: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def register(run_id: str, delivery: Any) -> None:
    with _lock:
        _runs[run_id] = delivery


def unregister(run_id: str, delivery: Any) -> None:
    with _lock:
        if _runs.get(run_id) is delivery:
            del _runs[run_id]


def lookup(run_id: object) -> Any:
    """The delivery of ``run_id``, or None."""
    if not isinstance(run_id, str):
        return None
    return _runs.get(run_id)


def deliveries() -> list[Any]:
    with _lock:
        return list(_runs.values())


def after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread

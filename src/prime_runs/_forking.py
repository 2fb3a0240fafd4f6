"""The one fork hook of the process: what each module resets in a forked child.

Modules that keep process-wide state (the delivery pipeline, the run registry, leases,
open joins, close-outs, id generators, training sides, the exit hooks' trackers) say so
with :func:`in_child` at import; a single ``os.register_at_fork`` hook runs them in the
child, in the order the modules were imported (a lower layer is imported, so reset, before
the layers that use it). A reset that fails is logged and never stops the others.

:func:`held_across_fork` names a lock no thread may hold while the process forks: the fork
waits for it and the child gets it released. A thread inside a C library's setup (OpenSSL
loading a CA bundle) holds that library's own locks, which a child could never release;
its exit-time cleanup then waits on them forever.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

logger = logging.getLogger("prime_runs")

_resets: list[Callable[[], None]] = []
_held: list[threading.Lock] = []


def in_child(reset: Callable[[], None]) -> None:
    """Run ``reset`` in every forked child of this process."""
    _resets.append(reset)


def held_across_fork(lock: threading.Lock) -> threading.Lock:
    """Take ``lock`` before every fork and release it after, in the parent and the child."""
    _held.append(lock)
    return lock


def _before_fork() -> None:
    for lock in _held:
        lock.acquire()


def _release_held() -> None:
    for lock in reversed(_held):
        lock.release()


def _after_fork_in_child() -> None:
    _release_held()
    for reset in list(_resets):
        try:
            reset()
        except Exception:  # one module's reset must not leave the others undone
            logger.debug("prime-runs: a reset after fork failed", exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork, after_in_parent=_release_held, after_in_child=_after_fork_in_child
    )

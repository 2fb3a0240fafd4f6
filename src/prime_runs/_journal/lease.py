"""Segment leases: one deliverer per journal segment at a time, across processes.

The process that writes a segment (``records/<kind>-<pid>-<nonce>.jsonl``) may have a
request for its records in flight until its run's journal closes, even after ``finish()``
gave up waiting for it. ``prime-runs sync`` must not send those records beside it: it
cannot see a request that has not landed, and it batches differently, so the platform
would store them twice. The writer therefore holds a lease on each of its segments (a POSIX
record lock on ``leases/<segment>``) from the segment's first line until its journal
closes; sync delivers a segment only when nobody holds its lease.

POSIX record locks belong to a process: a forked child does not inherit them and the
kernel drops them when the holder exits, SIGKILL included, so a lease expires with its
process and never outlives it. The catch is that closing *any* descriptor of the file drops
the process's lock, so within the holding process the file is never opened a second time:
:func:`holder` answers from the process's own table first.

A request that timed out or lost its connection may still be stored by the platform some
time later, after its process gave the lease up or died. That is not the lease's concern:
each request's batch is noted in the run folder before it is sent (``_journal/batches``),
and sync settles those batches first, whoever sent them and whenever they land.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import prime_runs._forking as _forking
from prime_runs._journal.nofollow import open_in_run

try:
    import fcntl
except ImportError:  # no POSIX locks on this platform: leases are not enforced
    fcntl = None  # type: ignore[assignment]  # the module's stand-in: no module

LEASES_DIR = "leases"
SYNC_LOCK_FILE = ".sync.lock"

SYNC_WAIT = 5.0  # how long a sync waits for a live process to finish delivering a segment
_POLL = 0.1  # how often a waiting sync looks at a lease again

_lock = threading.Lock()
_held: dict[str, int] = {}  # lease path -> the descriptor holding its lock


def _path(run_dir: Path, segment: str) -> Path:
    return Path(run_dir) / LEASES_DIR / segment


def _open(run_dir: Path, segment: str, flags: int) -> int:
    """Open ``leases/<segment>`` without following a symbolic link below ``run_dir``."""
    if flags & os.O_CREAT:
        (run_dir / LEASES_DIR).mkdir(exist_ok=True)
    return open_in_run(run_dir, f"{LEASES_DIR}/{segment}", flags)


def hold(run_dir: Path, segment: str) -> None:
    """Take the lease of ``segment`` (a segment this process writes). Best effort: a lease
    that cannot be taken (no locks, a read-only folder) only weakens sync's guard."""
    if fcntl is None:
        return
    path = _path(run_dir, segment)
    try:
        fd = _open(Path(run_dir), segment, os.O_RDWR | os.O_CREAT)
    except OSError:
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid()}).encode(), 0)
    except OSError:
        os.close(fd)
        return
    with _lock:
        _held[str(path)] = fd


def release(run_dir: Path, segments: list[str]) -> None:
    """Give up the leases of ``segments``: nothing of theirs is in flight any more."""
    for segment in segments:
        _drop(_path(run_dir, segment))


def _drop(path: Path) -> None:
    with _lock:
        fd = _held.pop(str(path), None)
    if fd is None:
        return
    try:
        os.unlink(path)  # before the close: a reader that opened it meets a free lock
    except OSError:
        pass
    os.close(fd)


def holder(run_dir: Path, segment: str) -> int | None:
    """The pid of the live process that holds ``segment``'s lease, else None."""
    path = _path(run_dir, segment)
    with _lock:
        if str(path) in _held:
            return os.getpid()
    if fcntl is None:
        return None
    try:
        fd = _open(Path(run_dir), segment, os.O_RDWR)
    except OSError:
        return None  # no lease file (a link is not one of ours either): nobody holds it
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            return None
        return _busy_pid(fd)
    finally:
        os.close(fd)  # drops the probe's own lock, never another process's
    return None


def _busy_pid(fd: int) -> int:
    """The holder's pid from its lease file (-1 when it cannot be read)."""
    try:
        doc = json.loads(os.pread(fd, 256, 0) or b"{}")
        pid = doc.get("pid")
        return pid if isinstance(pid, int) else -1
    except (OSError, ValueError, AttributeError):
        return -1


@contextmanager
def sync_lock(run_dir: Path) -> Iterator[bool]:
    """Held by one `prime-runs sync` of a run at a time (an advisory lock on the run
    folder's ``.sync.lock``); yields whether it was got."""
    if fcntl is None:  # no advisory locks here: rely on the user not racing two syncs
        yield True
        return
    fd = open_in_run(Path(run_dir), SYNC_LOCK_FILE, os.O_RDWR | os.O_CREAT)  # never via a link
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def _after_fork() -> None:
    # The child holds none of its parent's locks; its copies of their descriptors go.
    global _lock
    _lock = threading.Lock()
    for fd in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


_forking.in_child(_after_fork)


def wait_free(run_dir: Path, segments: list[str], wait: float) -> dict[str, int]:
    """The segments among ``segments`` whose lease a live process still holds after up to
    ``wait`` seconds, with the holder's pid (-1 when it could not be read)."""
    deadline = time.monotonic() + wait
    while True:
        busy = {s: pid for s in segments if (pid := holder(run_dir, s)) is not None}
        if not busy or time.monotonic() >= deadline:
            return busy
        time.sleep(min(_POLL, max(0.0, deadline - time.monotonic())))

"""Batch notes: what a deliverer is about to send, durable before the request goes out.

A request may be stored by the platform after its sender stopped waiting for it (a
``finish()`` that gave up, an exit, a SIGKILL). Whoever delivers those records next
(``prime-runs sync``) must then not send them in another batch: Prime Traces would store a
second copy under a second key, the sample table a second row. So before each request a
deliverer writes the batch's identity into the run folder, and keeps it until its records
are settled in the journal's acks::

    batches/<sink>-<pid>-<nonce>.json   {"sink", "pid", "batches": [
        {"n", "until", "segs": [segment, ...], "keys": [[seg index, offset], ...], ...}]}

``keys`` are the batch's records in the order they were sent; ``until`` (``time.time()``)
is when no request of the batch can still be stored (its last attempt's start plus the
request timeout, ``_envnumbers.inflight_window``); the rest is the sink's: the traces sink
notes the Idempotency-Key of the exact bytes, the sample sink the rows' ids and the
evaluation's row count before the append. Sync reads the notes of writers that are gone
(``noted``) and settles each batch the sink's way before it sends anything else.

One file per writer and sink, replaced whole (write, then rename) whenever a batch opens
or settles; it goes away when nothing is open. A SIGKILL leaves it as it was last written.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import prime_runs._forking as _forking
from prime_runs._journal.nofollow import open_for_reading, open_in_run
from prime_runs._records.item import RecordKey

logger = logging.getLogger("prime_runs")

NOTES_DIR = "batches"
_SUFFIX = ".json"


@dataclass
class Noted:
    """One open batch: its records (in the order sent), until when a request of it may
    still be stored (``time.time()``), and the sink's own fields."""

    keys: tuple[RecordKey, ...]
    until: float
    data: dict[str, Any] = field(default_factory=dict)
    n: int = 0  # its number in its writer's file
    sink: str = ""
    pid: int = 0  # the writer
    path: Path | None = None  # the writer's file (read back by sync)


def _encode(batch: Noted) -> dict[str, Any]:
    segments: dict[str, int] = {}
    keys = [[segments.setdefault(k.segment, len(segments)), k.offset] for k in batch.keys]
    return {"n": batch.n, "until": batch.until, "segs": list(segments), "keys": keys, **batch.data}


def _decode(doc: Any, sink: str, pid: int, path: Path) -> Noted | None:
    try:
        segs = [str(s) for s in doc["segs"]]
        keys = tuple(RecordKey(segs[int(i)], int(o)) for i, o in doc["keys"])
        until = float(doc["until"])
        n = int(doc["n"])
    except (TypeError, ValueError, KeyError, IndexError):
        return None  # not ours (edited by hand): its records go as if never sent
    data = {k: v for k, v in doc.items() if k not in ("n", "until", "segs", "keys")}
    return Noted(keys, until, data, n, sink, pid, path)


class Notebook:
    """The batches one process has open for one sink of one run. Thread-safe."""

    def __init__(self, run_dir: Path, sink: str) -> None:
        self._run_dir = Path(run_dir)
        self._sink = sink
        self._lock = threading.Lock()
        self._open: dict[int, Noted] = {}
        self._count = 0
        self._pid = os.getpid()
        self._name = self._new_name()
        self._failing = False

    def __repr__(self) -> str:
        return f"Notebook({self._sink!r}, open={len(self._open)})"

    def _new_name(self) -> str:
        return f"{NOTES_DIR}/{self._sink}-{os.getpid()}-{secrets.token_hex(3)}{_SUFFIX}"

    def _check_process(self) -> None:
        # A forked child writes a file of its own; the parent's batches are the parent's.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._open = {}
            self._name = self._new_name()

    def open(self, keys: Iterable[RecordKey], until: float, **data: Any) -> int | None:
        """Note a batch about to be sent; durable when this returns. The same records with
        the same fields (a resend of the same bytes) keep their entry, with the later
        ``until``. None when the note could not be written (said once): the batch is sent
        all the same, as records are when their ack cannot be journaled."""
        batch = Noted(tuple(keys), until, data, sink=self._sink)
        if not batch.keys:
            return None
        with self._lock:
            self._check_process()
            for n, noted in self._open.items():
                if noted.keys == batch.keys and noted.data == batch.data:
                    noted.until = max(noted.until, until)
                    return n if self._write() else None
            self._count += 1
            batch.n = self._count
            self._open[batch.n] = batch
            return batch.n if self._write() else None

    def extend(self, n: int | None, until: float) -> None:
        """A new attempt of batch ``n`` starts: it may be stored until ``until``."""
        with self._lock:
            self._check_process()
            batch = self._open.get(n) if n is not None else None
            if batch is not None and until > batch.until:
                batch.until = until
                self._write()

    def forget(self, n: int | None) -> None:
        """Batch ``n`` was certainly not stored (refused before any work): nothing to settle."""
        with self._lock:
            self._check_process()
            if n is not None and self._open.pop(n, None) is not None:
                self._write()

    def settled(self, keys: Iterable[RecordKey]) -> None:
        """These records are settled in the journal: batches with nothing else unsettled
        are closed."""
        with self._lock:
            self._check_process()
            if not self._open:
                return
            done = set(keys)
            closing = [n for n, b in self._open.items() if done.issuperset(b.keys)]
            changed = False
            for n, batch in list(self._open.items()):
                if n in closing:
                    del self._open[n]
                    changed = True
                elif done.intersection(batch.keys):
                    batch.keys = tuple(k for k in batch.keys if k not in done)
                    changed = True
            if changed:
                self._write()

    def _write(self) -> bool:
        """Replace this writer's file with the open batches (or remove it). Caller locks."""
        try:
            if self._open:
                doc = {
                    "sink": self._sink,
                    "pid": self._pid,
                    "batches": [_encode(b) for b in self._open.values()],
                }
                _replace(self._run_dir, self._name, json.dumps(doc).encode())
            else:
                _unlink(self._run_dir / self._name)
        except OSError as exc:
            if not self._failing:
                self._failing = True
                logger.warning(
                    "prime-runs: could not note a %s batch in the run's archive (%s); it is "
                    "sent all the same, and `prime-runs sync` may send it again",
                    self._sink,
                    exc,
                )
            return False
        self._failing = False
        return True


def _replace(run_dir: Path, relative: str, data: bytes) -> None:
    (run_dir / NOTES_DIR).mkdir(exist_ok=True)
    tmp = f"{NOTES_DIR}/.{Path(relative).name}.{secrets.token_hex(3)}.tmp"
    fd = open_in_run(run_dir, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(run_dir / tmp, run_dir / relative)
    except BaseException:
        _unlink(run_dir / tmp)
        raise


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -- the process's notebooks ---------------------------------------------------------------

_lock = threading.Lock()
_books: dict[tuple[str, str], Notebook] = {}


def notebook(run_dir: Path, sink: str) -> Notebook:
    """This process's notebook for ``sink`` of the run in ``run_dir``."""
    key = (str(run_dir), sink)
    with _lock:
        book = _books.get(key)
        if book is None:
            book = _books[key] = Notebook(Path(run_dir), sink)
        return book


def settled(run_dir: Path, sink: str, keys: Iterable[RecordKey]) -> None:
    """Records of ``sink`` settled in the journal: close this process's batches of them."""
    with _lock:
        book = _books.get((str(run_dir), sink))
    if book is not None:
        book.settled(keys)


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # the notebooks check their process themselves


_forking.in_child(_after_fork)


# -- reading the notes of other writers (sync) ---------------------------------------------


def noted(run_dir: Path) -> list[Noted]:
    """Every open batch in the run folder's notes, oldest file first (a live deliverer's
    too: the caller leaves the batches of segments whose lease is held). A file that
    cannot be read notes nothing."""
    directory = Path(run_dir) / NOTES_DIR
    if directory.is_symlink() or not directory.is_dir():
        return []
    found: list[Noted] = []
    paths = [p for p in directory.glob(f"*{_SUFFIX}") if not p.is_symlink()]
    for path in sorted(paths, key=_mtime):
        try:
            with open_for_reading(path) as f:
                doc = json.loads(f.read())
            sink, pid = str(doc["sink"]), int(doc["pid"])
            entries = list(doc["batches"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for entry in entries:
            batch = _decode(entry, sink, pid, path)
            if batch is not None:
                found.append(batch)
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def prune(run_dir: Path, batches: list[Noted], done: Mapping[str, set[RecordKey]]) -> None:
    """Take the batches among ``batches`` whose records are all settled (``done``, per
    sink) out of their writers' files (a file left with none is removed). Best effort: a
    batch left behind is settled again next time."""
    by_path: dict[Path, list[Noted]] = {}
    for batch in batches:
        if batch.path is not None:
            by_path.setdefault(batch.path, []).append(batch)
    for path, mine in by_path.items():
        closed = {b.n for b in mine if done.get(b.sink, set()).issuperset(b.keys)}
        if not closed:
            continue
        try:
            with open_for_reading(path) as f:
                doc = json.loads(f.read())
            left = [e for e in doc["batches"] if e.get("n") not in closed]
            relative = f"{NOTES_DIR}/{path.name}"
            if left:
                _replace(Path(run_dir), relative, json.dumps(dict(doc, batches=left)).encode())
            else:
                _unlink(path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue


def window_left(batch: Noted) -> float:
    """Seconds until no request of ``batch`` can still be stored (0 when none can)."""
    return max(0.0, batch.until - time.time())

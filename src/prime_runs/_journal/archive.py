"""The run's local archive: description, status, encoded records, and what each sink acknowledged.

Layout of one run (one folder per run, named by its id)::

    <root>/<run-id>/
      run.json                          description: name, environments, model, framework,
                                        config, mode, kind, platform id/url, created_at
      status.json                       status, summary, error, finished_at, closed
      records/<kind>-<pid>-<nonce>.jsonl  encoded records, one per line, as logged
      acks/<pid>-<nonce>.jsonl          {"s": sink, "f": segment, "o": [offsets]} per acked batch;
                                        "s" is "<sink>:rejected" / "<sink>:skipped" for records
                                        a sink settled without storing them (see ``settled_name``)
      stamps/<pid>-<nonce>.jsonl        where a record's run stamps lie, for the few records
                                        whose content names the run id too (``_stampnotes``)
      sync.json                         `prime-runs sync` progress for runs created offline
      batches/<sink>-<pid>-<nonce>.json  the batches a deliverer is sending, noted before
                                        each request until their records are settled
                                        (see ``batches``)

Why this shape: every process (a forked child, a joined worker) appends to
segments of its own, so no two writers share a file offset and a record's key
``(segment, offset)`` is stable. Lines are written with one unbuffered
``os.write`` each, so a SIGKILL at any instant leaves at most one torn last
line, which readers skip (the producer had not been told it was logged). A write
that fails part-way (disk full, file size limit) is cut back to the last line
boundary before the error is raised, so the next line starts a line and every
offset handed out points at one. JSON documents are replaced atomically (write,
then rename). Nothing is written through a symbolic link inside a run folder.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import Any

import prime_runs._journal.lease as _lease
import prime_runs._journal.stampnotes as _stampnotes
from prime_runs._journal.linereader import read_line
from prime_runs._journal.nofollow import entries, open_for_reading, open_in_run, segment_paths
from prime_runs._records.item import RecordKey
from prime_runs._runid import check_run_id

RUN_FILE = "run.json"
STATUS_FILE = "status.json"
SYNC_FILE = "sync.json"
RECORDS_DIR = "records"
ACKS_DIR = "acks"


REJECTED = "rejected"  # refused for its own sake: resending the same bytes cannot succeed
SKIPPED = "skipped"  # the sink does not store this kind of record (not a loss)


def settled_name(sink: str, how: str) -> str:
    """The ack-journal name under which ``sink`` records settled without storing them."""
    return f"{sink}:{how}"


def run_folder(root: Path, run_id: str) -> Path:
    """``<root>/<run_id>``: the one way a run id becomes a path. An id that is not one
    (``..``, ``/abs``, a NUL: see ``_runid``) raises ``ConfigurationError``, so no folder
    named by an id lies outside ``root``."""
    check_run_id(run_id, source="the run id", fix="a run folder is named by a run id only")
    return Path(root) / run_id


def write_json_atomic(path: Path, value: Any) -> None:
    """Replace ``path`` (a document directly in a run folder) atomically. The temporary
    file is created exclusively and the rename replaces a link rather than its target,
    so no symbolic link is followed; a failed write leaves no temporary file behind."""
    path = Path(path)
    tmp = f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp"
    data = json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8")
    fd = open_in_run(path.parent, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(path.parent / tmp, path)
    except BaseException:
        try:
            os.unlink(path.parent / tmp)
        except OSError:
            pass
        raise


def read_json(path: Path) -> dict[str, Any]:
    try:
        with open_for_reading(path) as f:
            value = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Appender:
    """An append-only file of this process inside a run folder (never through a link).

    ``offset`` is where the next line starts. A write that fails part-way is cut back
    to it before the error propagates; if even that fails, ``broken`` is set and the
    owner starts a fresh file, so a torn fragment never prefixes the next line.
    """

    def __init__(self, run_dir: Path, relative: str) -> None:
        self.path = run_dir / relative
        self._fd = open_in_run(run_dir, relative, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.offset = os.fstat(self._fd).st_size
        self.broken = False

    def write(self, data: bytes) -> int:
        """``data`` (whole lines) appended; returns where it starts."""
        start = self.offset
        try:
            _write_all(self._fd, data)
        except OSError:
            self._restore(start)
            raise
        self.offset = start + len(data)
        return start

    def write_line(self, data: bytes) -> int:
        """``data`` plus a newline in one system call, without copying ``data``."""
        start = self.offset
        try:
            written = os.writev(self._fd, (data, b"\n"))
            if written < len(data) + 1:  # rare: finish what the kernel did not take
                _write_all(self._fd, memoryview(data + b"\n")[written:])
        except OSError:
            self._restore(start)
            raise
        self.offset = start + len(data) + 1
        return start

    def _restore(self, start: int) -> None:
        # Shrinking a file needs no space and no size allowance, so this works on a
        # full disk; appends (O_APPEND) then continue at ``start`` again.
        try:
            os.ftruncate(self._fd, start)
            self.broken = os.fstat(self._fd).st_size != start
        except OSError:
            self.broken = True

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


class RunArchive:
    """One run's folder. Thread-safe; after ``os.fork()`` each process writes its own files."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._nonce = secrets.token_hex(3)
        self._segments: dict[str, _Appender] = {}
        self._side: dict[str, _Appender] = {}  # per folder (acks, stamps): this process's file
        self._files = 0  # appenders opened by this process, for fresh names after a failure
        self._leased: list[str] = []  # segments of this process whose lease it holds

    # -- documents ---------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, run_id: str, description: dict[str, Any]) -> RunArchive:
        path = run_folder(root, run_id)
        (path / RECORDS_DIR).mkdir(parents=True, exist_ok=True)
        (path / ACKS_DIR).mkdir(exist_ok=True)
        archive = cls(path)
        if not (path / RUN_FILE).exists():
            archive.write_description(description)
        return archive

    @property
    def run_id(self) -> str:
        return self.path.name

    def description(self) -> dict[str, Any]:
        return read_json(self.path / RUN_FILE)

    def write_description(self, description: dict[str, Any]) -> None:
        write_json_atomic(self.path / RUN_FILE, description)

    def status(self) -> dict[str, Any]:
        return read_json(self.path / STATUS_FILE)

    def write_status(self, status: dict[str, Any]) -> None:
        write_json_atomic(self.path / STATUS_FILE, status)

    def sync_state(self) -> dict[str, Any]:
        return read_json(self.path / SYNC_FILE)

    def write_sync_state(self, state: dict[str, Any]) -> None:
        write_json_atomic(self.path / SYNC_FILE, state)

    # -- appends -----------------------------------------------------------------

    def _check_process(self) -> None:
        # A forked child must never write through its parent's descriptors.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._nonce = secrets.token_hex(3)
            self._segments = {}
            self._side = {}
            self._files = 0
            self._leased = []
            self._lock = threading.Lock()

    def append(self, kind: str, data: bytes) -> RecordKey:
        """Write one encoded record (without newline); durable once this returns.

        Raises ``OSError`` (``JournalError`` for a link in the way) when the record could
        not be written; the segment is left ending on a line boundary either way."""
        self._check_process()
        with self._lock:
            segment = self._segments.get(kind)
            if segment is None:
                segment = self._segments[kind] = _Appender(
                    self.path, self._new_name(RECORDS_DIR, f"{kind}-")
                )
                # Until this journal closes, only this process delivers the segment.
                _lease.hold(self.path, segment.path.name)
                self._leased.append(segment.path.name)
            try:
                offset = segment.write_line(data)
            except OSError:
                if segment.broken:  # could not cut the torn line off: start a new segment
                    segment.close()
                    del self._segments[kind]
                raise
            return RecordKey(segment.path.name, offset)

    def _new_name(self, directory: str, prefix: str) -> str:
        self._files += 1
        suffix = "" if self._files == 1 else f"-{self._files}"
        return f"{directory}/{prefix}{self._pid}-{self._nonce}{suffix}.jsonl"

    def ack(self, sink: str, keys: list[RecordKey]) -> None:
        """Record that ``sink`` acknowledged these records."""
        if not keys:
            return
        by_segment: dict[str, list[int]] = {}
        for key in keys:
            by_segment.setdefault(key.segment, []).append(key.offset)
        lines = b"".join(
            json.dumps({"s": sink, "f": seg, "o": offs}, separators=(",", ":")).encode() + b"\n"
            for seg, offs in by_segment.items()
        )
        self._write_side(ACKS_DIR, lines)

    def note_stamps(self, key: RecordKey, stamps: tuple[int, ...]) -> None:
        """Note where the run stamps of the record at ``key`` lie (see ``_stampnotes``)."""
        self._write_side(_stampnotes.STAMPS_DIR, _stampnotes.note_line(key, stamps))

    def _write_side(self, directory: str, lines: bytes) -> None:
        """Append whole lines to this process's file of ``directory``."""
        self._check_process()
        with self._lock:
            side = self._side.get(directory)
            if side is None:
                (self.path / directory).mkdir(exist_ok=True)  # stamps/: made when first needed
                side = self._side[directory] = _Appender(self.path, self._new_name(directory, ""))
            try:
                side.write(lines)
            except OSError:
                if side.broken:
                    side.close()
                    del self._side[directory]
                raise

    def close(self) -> None:
        """Close this process's files and give up its segments' leases (nothing of theirs
        is in flight any more); a later append or ack opens fresh files."""
        with self._lock:
            for appender in (*self._segments.values(), *self._side.values()):
                appender.close()
            self._segments = {}
            self._side = {}
            leased, self._leased = self._leased, []
        _lease.release(self.path, leased)

    # -- reading -----------------------------------------------------------------

    def iter_records(self, skip: Container[str] = ()) -> Iterator[tuple[RecordKey, str, bytes]]:
        """Every complete record line, segment by segment (but the segments named in
        ``skip``); a torn last line is skipped."""
        for path in segment_paths(self.path / RECORDS_DIR):
            if path.name in skip:
                continue
            kind = path.name.split("-", 1)[0]
            offset = 0
            try:
                f = open_for_reading(path)
            except OSError:
                continue  # replaced by a link, or removed, since it was listed
            with f:
                while True:
                    data, taken = read_line(f)
                    if taken == 0:
                        break
                    if taken > len(data):  # it ends with its newline: complete
                        yield RecordKey(path.name, offset), kind, data
                    del data  # not kept alive while the next line is read
                    offset += taken

    def read(self, key: RecordKey) -> bytes:
        """The record stored at ``key`` (without its newline)."""
        with open_for_reading(self.path / RECORDS_DIR / key.segment) as f:
            f.seek(key.offset)
            return read_line(f)[0]

    def count_records(self, skip: Container[str] = ()) -> dict[str, int]:
        """Complete record lines per kind, counted without decoding them (a torn tail is not
        counted, as in ``iter_records``), but those of the segments named in ``skip``."""
        counts: dict[str, int] = {}
        for path in segment_paths(self.path / RECORDS_DIR):
            if path.name in skip:
                continue
            kind = path.name.split("-", 1)[0]
            lines = 0
            try:
                with open_for_reading(path) as f:
                    while chunk := f.read(1 << 20):
                        lines += chunk.count(b"\n")
            except OSError:
                continue
            counts[kind] = counts.get(kind, 0) + lines
        return counts

    def read_many(
        self, segment: str, sized: Iterable[tuple[int, int]]
    ) -> Iterator[tuple[RecordKey, bytes]]:
        """The records of one segment at ``(offset, size)``, in offset order; unreadable
        ones skipped. Each is read in one allocation of its own size (a record of 20 MB
        costs 20 MB, not a buffered line and a copy without its newline)."""
        try:
            f = open_for_reading(self.path / RECORDS_DIR / segment)
        except OSError:
            return
        with f:
            fd = f.fileno()
            for offset, size in sorted(sized):
                data = os.pread(fd, size, offset)
                if len(data) == size and os.pread(fd, 1, offset + size) == b"\n":
                    yield RecordKey(segment, offset), data

    def noted_stamps(self) -> dict[RecordKey, tuple[int, ...]]:
        """Where the journal noted a record's run stamps (see ``_stampnotes``)."""
        return _stampnotes.read_notes(self.path / _stampnotes.STAMPS_DIR)

    def acknowledged(self) -> dict[str, set[RecordKey]]:
        """Sink name -> keys it acknowledged."""
        acked: dict[str, set[RecordKey]] = {}
        for entry in entries(self.path / ACKS_DIR):
            try:
                keys = acked.setdefault(entry["s"], set())
                keys.update(RecordKey(entry["f"], int(o)) for o in entry["o"])
            except (KeyError, TypeError, ValueError):
                continue  # not an ack line this version wrote
        return acked


def list_runs(root: Path) -> list[RunArchive]:
    """Every run folder under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [RunArchive(p) for p in root.iterdir() if (p / RUN_FILE).is_file()]
    runs.sort(key=lambda a: (a.description().get("created_at") or 0, a.run_id))
    return runs

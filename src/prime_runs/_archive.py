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
      sync.json                         `prime-runs sync` progress for runs created offline

Why this shape: every process (a forked child, a joined worker) appends to
segments of its own, so no two writers share a file offset and a record's key
``(segment, offset)`` is stable. Lines are written with one unbuffered
``os.write`` each, so a SIGKILL at any instant leaves at most one torn last
line, which readers skip (the producer had not been told it was logged). JSON
documents are replaced atomically (write, then rename).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

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


class RecordKey(NamedTuple):
    segment: str
    offset: int


def write_json_atomic(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    tmp.write_bytes(json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8"))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Appender:
    """An append-only file of this process, opened lazily."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.offset = os.fstat(self._fd).st_size

    def write(self, data: bytes) -> int:
        start = self.offset
        _write_all(self._fd, data)
        self.offset = start + len(data)
        return start

    def write_line(self, data: bytes) -> int:
        """``data`` plus a newline in one system call, without copying ``data``."""
        start = self.offset
        written = os.writev(self._fd, (data, b"\n"))
        if written < len(data) + 1:  # rare: finish what the kernel did not take
            _write_all(self._fd, (data + b"\n")[written:])
        self.offset = start + len(data) + 1
        return start

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
        self._acks: _Appender | None = None

    # -- documents ---------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, run_id: str, description: dict[str, Any]) -> RunArchive:
        path = Path(root) / run_id
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
            self._acks = None
            self._lock = threading.Lock()

    def append(self, kind: str, data: bytes) -> RecordKey:
        """Write one encoded record (without newline); durable once this returns."""
        self._check_process()
        with self._lock:
            segment = self._segments.get(kind)
            if segment is None:
                name = f"{kind}-{self._pid}-{self._nonce}.jsonl"
                segment = _Appender(self.path / RECORDS_DIR / name)
                self._segments[kind] = segment
            offset = segment.write_line(data)
            return RecordKey(segment.path.name, offset)

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
        self._check_process()
        with self._lock:
            if self._acks is None:
                self._acks = _Appender(self.path / ACKS_DIR / f"{self._pid}-{self._nonce}.jsonl")
            self._acks.write(lines)

    def close(self) -> None:
        with self._lock:
            for segment in self._segments.values():
                segment.close()
            if self._acks is not None:
                self._acks.close()
            self._segments = {}
            self._acks = None

    # -- reading -----------------------------------------------------------------

    def iter_records(self) -> Iterator[tuple[RecordKey, str, bytes]]:
        """Every complete record line, segment by segment; a torn last line is skipped."""
        records = self.path / RECORDS_DIR
        if not records.is_dir():
            return
        for path in sorted(records.glob("*.jsonl")):
            kind = path.name.split("-", 1)[0]
            offset = 0
            with path.open("rb") as f:
                for line in f:
                    if line.endswith(b"\n"):
                        yield RecordKey(path.name, offset), kind, line[:-1]
                    offset += len(line)

    def read(self, key: RecordKey) -> bytes:
        """The record stored at ``key`` (without its newline)."""
        with (self.path / RECORDS_DIR / key.segment).open("rb") as f:
            f.seek(key.offset)
            return f.readline().rstrip(b"\n")

    def count_records(self) -> dict[str, int]:
        """Complete record lines per kind, counted without decoding them (a torn tail is not
        counted, as in ``iter_records``)."""
        counts: dict[str, int] = {}
        records = self.path / RECORDS_DIR
        if not records.is_dir():
            return counts
        for path in sorted(records.glob("*.jsonl")):
            kind = path.name.split("-", 1)[0]
            lines = 0
            try:
                with path.open("rb") as f:
                    while chunk := f.read(1 << 20):
                        lines += chunk.count(b"\n")
            except OSError:
                continue
            counts[kind] = counts.get(kind, 0) + lines
        return counts

    def read_many(self, segment: str, offsets: Iterable[int]) -> Iterator[tuple[RecordKey, bytes]]:
        """The records of one segment at ``offsets``, in offset order; unreadable ones skipped."""
        try:
            f = (self.path / RECORDS_DIR / segment).open("rb")
        except OSError:
            return
        with f:
            for offset in sorted(offsets):
                f.seek(offset)
                line = f.readline()
                if line.endswith(b"\n"):
                    yield RecordKey(segment, offset), line[:-1]

    def acknowledged(self) -> dict[str, set[RecordKey]]:
        """Sink name -> keys it acknowledged."""
        acked: dict[str, set[RecordKey]] = {}
        acks = self.path / ACKS_DIR
        if not acks.is_dir():
            return acked
        for path in sorted(acks.glob("*.jsonl")):
            for line in path.read_bytes().splitlines(keepends=True):
                if not line.endswith(b"\n"):
                    continue  # torn by a kill mid-write: that batch was not recorded
                try:
                    entry = json.loads(line)
                    keys = acked.setdefault(entry["s"], set())
                    keys.update(RecordKey(entry["f"], int(o)) for o in entry["o"])
                except (ValueError, KeyError, TypeError):
                    continue
        return acked


def list_runs(root: Path) -> list[RunArchive]:
    """Every run folder under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [RunArchive(p) for p in root.iterdir() if (p / RUN_FILE).is_file()]
    runs.sort(key=lambda a: (a.description().get("created_at") or 0, a.run_id))
    return runs

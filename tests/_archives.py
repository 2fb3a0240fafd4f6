"""A run's local archive read as ``docs/concepts.md`` lays it out: JSON documents and one
encoded record per line.

Tests read it this way, as a user or a tool beside the SDK would, rather than through the
SDK's own reader: a change to the documented layout then fails them. Writes are what a
user editing the documents by hand would do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple


class Key(NamedTuple):
    """Where a record line lies: its segment's name and the line's byte offset in it."""

    segment: str
    offset: int


def _document(path: Path) -> dict[str, Any]:
    """A run folder's JSON document; {} when it is missing or not a JSON object."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Archive:
    """One run folder: ``run.json``, ``status.json``, ``sync.json``, ``records/*.jsonl``."""

    path: Path

    @classmethod
    def create(cls, root: Path, run_id: str, description: dict[str, Any]) -> Archive:
        """A run folder made by hand: its ``run.json`` and an empty ``records/``."""
        archive = cls(Path(root) / run_id)
        (archive.path / "records").mkdir(parents=True, exist_ok=True)
        archive.write_description(description)
        return archive

    @property
    def run_id(self) -> str:
        return self.path.name

    def description(self) -> dict[str, Any]:
        return _document(self.path / "run.json")

    def status(self) -> dict[str, Any]:
        return _document(self.path / "status.json")

    def sync_state(self) -> dict[str, Any]:
        return _document(self.path / "sync.json")

    def write_description(self, description: dict[str, Any]) -> None:
        (self.path / "run.json").write_text(json.dumps(description))

    def write_sync_state(self, state: dict[str, Any]) -> None:
        (self.path / "sync.json").write_text(json.dumps(state))

    def iter_records(self) -> Iterator[tuple[Key, str, bytes]]:
        """``((segment, offset), kind, line)`` for every whole line, segment by segment in
        name order; a torn last line (no newline yet) is left out."""
        for segment in sorted((self.path / "records").glob("*.jsonl")):
            kind = segment.name.split("-", 1)[0]
            offset = 0
            with segment.open("rb") as f:
                for line in f:
                    if line.endswith(b"\n"):
                        yield Key(segment.name, offset), kind, line[:-1]
                    offset += len(line)

    def records(self) -> list[dict[str, Any]]:
        """Every whole record, decoded."""
        return [json.loads(data) for _, _, data in self.iter_records()]

    def count_records(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, kind, _ in self.iter_records():
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def runs(root: Path) -> list[Archive]:
    """Every run folder under ``root`` (a folder with a ``run.json``), oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [Archive(p) for p in root.iterdir() if (p / "run.json").is_file()]
    found.sort(key=lambda a: (a.description().get("created_at") or 0, a.run_id))
    return found


def only(root: Path) -> Archive:
    """The one run folder under ``root``."""
    (archive,) = runs(root)
    return archive

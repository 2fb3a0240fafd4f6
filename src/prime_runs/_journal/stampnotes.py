"""The journal's notes of where a record's run stamps lie, kept for the records whose
content names the run's id too (``Encoded.quotes_id``).

``prime-runs sync`` sends a record journaled under a run's local id with the platform's id
written at its stamps (``_records/restamp``), as the live delivery does. Most records need
no note: the id occurs in them only as their stamps, and sync finds those as the encoder
did, by counting the id (``encode.stamp_sites``). A record whose content names the id is
noted, one line each in ``stamps/<pid>-<nonce>.jsonl``:
``{"f": segment, "o": offset, "at": [offsets of its stamps]}``. A note a kill tore, or one
never written, costs that record a decode and an encode at sync time, nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

from prime_runs._journal.nofollow import entries
from prime_runs._records.item import RecordKey

STAMPS_DIR = "stamps"


def note_line(key: RecordKey, stamps: tuple[int, ...]) -> bytes:
    entry = {"f": key.segment, "o": key.offset, "at": list(stamps)}
    return json.dumps(entry, separators=(",", ":")).encode() + b"\n"


def read_notes(directory: Path) -> dict[RecordKey, tuple[int, ...]]:
    """Every complete note under ``directory`` (a run folder's ``stamps/``)."""
    notes: dict[RecordKey, tuple[int, ...]] = {}
    for entry in entries(directory):
        try:
            stamps = tuple(int(at) for at in entry["at"])
            notes[RecordKey(str(entry["f"]), int(entry["o"]))] = stamps
        except (KeyError, TypeError, ValueError):
            continue
    return notes

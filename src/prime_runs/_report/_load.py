"""Read one archived run for the report: what ``inspect`` says about it, a summary of every
readable record, and how many lines could not be read (a torn last line left by a kill, or
a line that is not a JSON object).

Records are read once, in archive order, and only their summaries are kept; the few the
episode browser embeds are read again by key (:func:`read_record`), so memory stays
proportional to the summaries, not to the archive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .. import metrics
from .._archive import RECORDS_DIR, RecordKey, RunArchive
from .._runinfo import RunInfo, inspect
from ._episode import EpisodeSummary, summarize


@dataclass
class LoadedRun:
    info: RunInfo
    episodes: list[EpisodeSummary]
    keys: list[RecordKey]  # where each summarized record lives, same order as ``episodes``
    computed_summary: dict[str, Any]  # the summary recomputed from the records
    bad_lines: int  # complete lines that are not a JSON object
    torn_lines: int  # segments that end in a partial line

    @property
    def archive(self) -> RunArchive:
        return self.info.archive


def load_run(archive: RunArchive) -> LoadedRun:
    info = inspect(archive)
    episodes: list[EpisodeSummary] = []
    keys: list[RecordKey] = []
    accumulator = metrics.SummaryAccumulator()
    bad = 0
    for key, _kind, data in archive.iter_records():
        record = decode(data)
        if record is None:
            bad += 1
            continue
        episodes.append(summarize(record))
        keys.append(key)
        try:
            accumulator.add(record)
        except (AttributeError, TypeError, KeyError, IndexError):
            pass  # a malformed score leaves the recomputed summary without this record
    return LoadedRun(
        info=info,
        episodes=episodes,
        keys=keys,
        computed_summary=dict(accumulator.result()),
        bad_lines=bad,
        torn_lines=count_torn(archive),
    )


def decode(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:  # includes UnicodeDecodeError
        return None
    return value if isinstance(value, dict) else None


def read_record(archive: RunArchive, key: RecordKey) -> dict[str, Any] | None:
    try:
        return decode(archive.read(key))
    except OSError:
        return None


def count_torn(archive: RunArchive) -> int:
    """Record segments whose last line has no newline (``iter_records`` skips that line)."""
    torn = 0
    for path in sorted((archive.path / RECORDS_DIR).glob("*.jsonl")):
        try:
            with path.open("rb") as f:
                size = f.seek(0, 2)
                if size:
                    f.seek(size - 1)
                    torn += f.read(1) != b"\n"
        except OSError:
            continue
    return torn

"""Read one archived run for the report: what ``inspect`` says about it, a summary of every
readable record, and how many lines could not be read (a torn last line left by a kill, or
a line that is not a JSON object).

Records are read once, in archive order, and only their summaries are kept; the few the
episode browser embeds are read again by key (:func:`read_record`), so memory stays
proportional to the summaries, not to the archive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prime_runs import metrics
from prime_runs._journal.archive import RECORDS_DIR, RecordKey, RunArchive
from prime_runs._journal.nofollow import open_for_reading, segment_paths
from prime_runs._journal.runinfo import RunInfo, inspect
from prime_runs._records.lines import parse_record
from prime_runs._report._browse import input_target_output
from prime_runs._report._episode import EpisodeSummary, summarize


@dataclass
class LoadedRun:
    info: RunInfo
    episodes: list[EpisodeSummary]
    keys: list[RecordKey]  # where each summarized record lives, same order as ``episodes``
    computed_summary: dict[str, Any]  # the summary recomputed from the records
    bad_lines: int  # complete lines that are not a record (see ``_lines.parse_record``)
    torn_lines: int  # segments that end in a partial line
    # Per example key: input, target and output of its first episode (``input_target_output``)
    io: dict[str, list[str | None]]

    @property
    def archive(self) -> RunArchive:
        return self.info.archive


def load_run(archive: RunArchive) -> LoadedRun:
    info = inspect(archive)
    episodes: list[EpisodeSummary] = []
    keys: list[RecordKey] = []
    accumulator = metrics.SummaryAccumulator()
    bad = 0
    io: dict[str, list[str | None]] = {}
    for key, _kind, data in archive.iter_records():
        record = decode(data)
        try:
            summary = summarize(record) if record is not None else None
        except RecursionError:  # nested deeper than Python walks: counted, not fatal
            summary = None
        if summary is None or record is None:
            bad += 1
            continue
        episodes.append(summary)
        keys.append(key)
        if summary.example.key not in io:
            try:
                io[summary.example.key] = input_target_output(record)
            except RecursionError:
                io[summary.example.key] = [None, None, None]
        try:
            accumulator.add(record)
        except (AttributeError, TypeError, KeyError, IndexError, RecursionError):
            pass  # a malformed score leaves the recomputed summary without this record
    return LoadedRun(
        info=info,
        episodes=episodes,
        keys=keys,
        computed_summary=dict(accumulator.result()),
        bad_lines=bad,
        torn_lines=count_torn(archive),
        io=io,
    )


def decode(data: bytes) -> dict[str, Any] | None:
    """The record on a line, or None when it is not one (the rules ``show`` and ``sync``
    apply: not JSON, not an object, too deep, a lone surrogate, a number past a float)."""
    return parse_record(data)[0]


def read_record(archive: RunArchive, key: RecordKey) -> dict[str, Any] | None:
    try:
        return decode(archive.read(key))
    except OSError:
        return None


def count_torn(archive: RunArchive) -> int:
    """Record segments whose last line has no newline (``iter_records`` skips that line)."""
    torn = 0
    for path in segment_paths(archive.path / RECORDS_DIR):
        try:
            with open_for_reading(path) as f:
                size = f.seek(0, 2)
                if size:
                    f.seek(size - 1)
                    torn += f.read(1) != b"\n"
        except OSError:
            continue
    return torn

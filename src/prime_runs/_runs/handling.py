"""Helpers of the ``Run`` handle (``run.py``): reading what a log call was given, the
reward its span shows, and what an ignored ``finish()`` says."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import prime_runs._records.access as _records
from prime_runs._records.encode import EPISODE
from prime_runs.errors import RecordError
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")


def as_records(records: object) -> Iterable[object]:
    # One record or many: a mapping or an object with to_record() is one record.
    if isinstance(records, Mapping) or callable(getattr(records, "to_record", None)):
        return (records,)
    if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
        raise RecordError(
            f"log_episodes/log_traces take a record or an iterable of records, "
            f"not a {type(records).__name__}"
        )
    return records


def warn_ignored_finish(
    run_id: str, status: RunStatus, reason: str | None, summary: object
) -> None:
    """A later finish() that asks for something changes nothing: say so, or its status and
    error are lost without a trace. A plain repeat (``with run:`` after ``finish()``) is quiet."""
    if status is RunStatus.COMPLETED and reason is None and summary is None:
        return
    logger.warning(
        "prime-runs: run %s was already finished (or is finishing), so this finish(status=%s%s%s) "
        "is ignored: the first call's status, summary and error stand. Give the final status, "
        "summary and error to a single finish() (or use fail(error) instead of finish()).",
        run_id,
        status.value,
        f", error={reason!r}" if reason is not None else "",
        ", summary=..." if summary is not None else "",
    )


def span_reward(kind: str, record: Mapping[str, Any]) -> float | None:
    """The reward a reader would show: the summary trace's, for an episode."""
    try:
        if kind == EPISODE:
            traces = record.get("traces")
            if not isinstance(traces, list) or not traces:
                return None
            trace_record = traces[_records.summary_trace_index(traces)]
        else:
            trace_record = record
        value = _records.reward(trace_record)
        return float(value) if isinstance(value, (int, float)) else None
    except Exception:  # an odd record shape only costs the attribute
        return None

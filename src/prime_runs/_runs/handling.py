"""Helpers of the ``Run`` handle (``run.py``): reading what a log call was given, the
reward its span shows, what an ignored ``finish()`` says, and the run span's attributes."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import prime_runs._records.access as _records
from prime_runs import semconv
from prime_runs._records.encode import EPISODE
from prime_runs._runs.accounting import RAISE
from prime_runs._runs.state import RunState
from prime_runs.errors import PrimeRunsError, RecordError, RunFinishedError, describe
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


def run_span_attributes(state: RunState) -> dict[str, Any]:
    """The attributes ``init()`` starts its ``run`` span with: what describes the run."""
    d = state.description
    attrs: dict[str, Any] = {
        semconv.RUN_ID: state.run_id,
        semconv.RUN_MODE: state.identity.mode,
        semconv.RUN_TYPE: state.identity.kind,
        semconv.RUN_NAME: state.identity.name,
    }
    if state.identity.url:
        attrs[semconv.RUN_URL] = state.identity.url
    for key, attr in (
        ("model", semconv.RUN_MODEL),
        ("framework", semconv.RUN_FRAMEWORK),
        ("description", semconv.RUN_DESCRIPTION),
    ):
        if d.get(key):
            attrs[attr] = str(d[key])
    if d.get("environments"):
        attrs[semconv.RUN_ENVIRONMENTS] = [str(e) for e in d["environments"]]
    if d.get("tags"):
        attrs[semconv.RUN_TAGS] = [str(t) for t in d["tags"]]
    return attrs


def record_span_attributes(kind: str, record: Mapping[str, Any], size: int) -> dict[str, Any]:
    """What a record span of ``Run.log_episodes()`` shows (its payload travels beside it)."""
    attributes: dict[str, Any] = {semconv.RECORD_KIND: kind, semconv.RECORD_BYTES: size}
    record_id = record.get("id")
    if isinstance(record_id, str):
        attributes[semconv.RECORD_ID] = record_id
    env = record.get("env")
    if kind == EPISODE and isinstance(env, Mapping) and isinstance(env.get("id"), str):
        attributes[semconv.RECORD_ENV] = env["id"]
    reward = span_reward(kind, record)
    if reward is not None:
        attributes[semconv.RECORD_REWARD] = reward
    return attributes


def exit_outcome(exc: BaseException | None) -> tuple[RunStatus, str | BaseException | None]:
    """How ``with run:`` ends the run: completed, cancelled (Ctrl-C, asyncio
    cancellation) or failed with the exception as the reason."""
    import asyncio  # only when a block raised: not a cost of importing prime_runs

    if exc is None:
        return RunStatus.COMPLETED, None
    if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
        return RunStatus.CANCELLED, "interrupted"
    return RunStatus.FAILED, exc


def reason_of(error: str | BaseException | None) -> str | None:
    """A close-out's reason from ``finish(error=)``: an exception as ``Type: message``."""
    if error is None:
        return None
    return describe(error) if isinstance(error, BaseException) else str(error)


def refuse_late(state: RunState, records: int, what: str = "records") -> None:
    """Writes after ``finish()`` began: ``RunFinishedError`` under ``on_error="raise"`` (as
    0.1.4 always did), otherwise counted and reported (one warning per run)."""
    if state.on_error == RAISE:
        raise RunFinishedError(
            f"run {state.run_id} has finished; {what} logged after finish() are not "
            f"recorded. Log all {what} before calling finish()."
        )
    state.refuse_late(records)


def refuse_bad(state: RunState, exc: PrimeRunsError, what: str) -> None:
    """Input that is no record (or no metrics row): raised under ``on_error="raise"``,
    otherwise counted as invalid and reported."""
    if state.on_error == RAISE:
        raise exc
    state.count_invalid(1)
    state.report(f"{what} was not logged: {exc}")

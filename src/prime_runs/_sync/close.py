"""Closing a synced run on the platform with the status and summary its archive recorded.

``completed`` is finalized; ``failed`` and ``cancelled`` are closed out with their error; a
run whose process died without finishing, or whose status.json cannot be used, is closed as
``crashed``. A run without a recorded summary gets one computed from its readable records.
A run the platform already closed is only marked closed locally.
"""

from __future__ import annotations

import time
from typing import Any

import prime_runs._runs.late as _late
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import EPISODE_KIND, SAMPLES, TRACES, RunInfo
from prime_runs._records.jsonio import sanitize_nonfinite
from prime_runs._records.lines import parse_head
from prime_runs._runs.coverage import SUMMARIZED_KEY
from prime_runs.errors import PrimeRunsError, SyncError, describe
from prime_runs.metrics import SummaryAccumulator
from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.lifecycle import OnlineLifecycle, Registration
from prime_runs.settings import Settings
from prime_runs.status import RunStatus

CLOSE_TIMEOUT = 120.0


def close_run(
    info: RunInfo,
    description: dict[str, Any],
    settings: Settings,
    client: PlatformClient,
    eval_id: str,
    url: object,
) -> str:
    """Close ``eval_id`` as the run's archive says it ended; returns how, in words.
    Raises ``SyncError`` when the platform cannot be told."""
    archive = info.archive
    doc = dict(info.status_doc)
    status, reason = outcome(info, doc)
    deadline = time.monotonic() + CLOSE_TIMEOUT
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else None
    covered = None
    if summary is None:
        summary, covered = _covering_summary(archive, client, eval_id, deadline)
    metrics = dict(sanitize_nonfinite(summary))
    extra = metrics.get("prime_runs")
    extra = dict(extra) if isinstance(extra, dict) else {}
    extra["traces_episodes_written"] = episodes_written(archive)
    if covered is not None:
        extra[SUMMARIZED_KEY] = covered
    metrics["prime_runs"] = extra
    try:
        current = evaluations.get(client, eval_id, deadline=deadline)
        already = str(current.get("status") or "").upper() not in evaluations.OPEN_STATUSES
        if not already:
            config = description.get("config")
            OnlineLifecycle(settings, client=client).close(
                Registration(
                    eval_id,
                    str(description.get("name") or eval_id),
                    url if isinstance(url, str) else None,
                ),
                status=status,
                summary=metrics,
                reason=reason,
                config=dict(config) if isinstance(config, dict) else {},
                attached=bool(description.get("attached")),
                deadline=deadline,
            )
    except (PrimeRunsError, ValueError) as exc:
        raise SyncError(f"uploads done, but closing the run failed: {describe(exc)}") from exc
    doc.update(
        status=status.value,
        error=reason,
        summary=summary,
        closed=True,
        finished_at=doc.get("finished_at") or time.time(),
        synced_at=time.time(),
    )
    archive.write_status(doc)
    if already:
        return f"already closed on the platform ({current.get('status')})"
    return "finalized" if status is RunStatus.COMPLETED else f"closed as {status.value}"


def outcome(info: RunInfo, doc: dict[str, Any]) -> tuple[RunStatus, str | None]:
    status = RunStatus.coerce(doc.get("status") or RunStatus.CRASHED.value)
    reason = doc.get("error") if isinstance(doc.get("error"), str) else None
    if info.status_problem:  # how it ended is unknown; its process is gone
        return RunStatus.CRASHED, f"{info.status_problem}; closed by prime-runs sync as crashed"
    if status is RunStatus.RUNNING:  # the owner died without finishing
        return (
            RunStatus.CRASHED,
            f"the process (pid {doc.get('pid')}) exited without finishing the run",
        )
    return status, reason


def _covering_summary(
    archive: RunArchive, client: PlatformClient, eval_id: str, deadline: float
) -> tuple[dict[str, Any], int | None]:
    """A dead owner's summary: over its archive's records, and over what workers on other
    disks stored when the evaluation holds more rows than this archive sent (merged by
    record id, as a live owner's finish does); the local one when that cannot be read."""
    local = summary_from_records(archive)
    try:
        total = evaluations.get(client, eval_id, deadline=deadline).get("totalSamples")
        sent = len(archive.acknowledged().get(SAMPLES, ()))
        if isinstance(total, int) and total <= sent:
            return local, None
        records = (data for _, _, data in archive.iter_records())
        return _late.summary_over(client, eval_id, records, deadline)
    except Exception:  # the local numbers still close the run
        return local, None


def summary_from_records(archive: RunArchive) -> dict[str, Any]:
    """The summary over the records that can be read; a bad one is left out (the upload
    rejected and reported it), never fatal."""
    summary = SummaryAccumulator()
    for _key, _kind, data in archive.iter_records():
        record, _problem = parse_head(data)  # its long strings are not needed
        if record is None:
            continue
        try:
            summary.add(record)
        except (ArithmeticError, ValueError, TypeError, AttributeError, KeyError):
            continue  # malformed inside (rewards not a mapping, ...): not summarized
    try:
        return dict(summary.result())
    except ArithmeticError:  # a sum that overflowed: better no summary than no close
        return {}


def episodes_written(archive: RunArchive) -> int:
    """Episodes Prime Traces acknowledged, counted from the archive's acks."""
    stored = archive.acknowledged().get(TRACES, set())
    return sum(1 for key in stored if key.segment.startswith(EPISODE_KIND + "-"))


def late_records(
    archive: RunArchive, client: PlatformClient, eval_id: str, notes: list[str]
) -> int | None:
    """After uploading records of a run already closed on the platform: how many reached it
    after its finalize (their numbers folded in, ``_late``), said in ``notes``."""
    local = (data for _, _, data in archive.iter_records())
    try:
        found = _late.check(client, eval_id, local, time.monotonic() + CLOSE_TIMEOUT)
    except Exception as exc:  # the uploads stand; only the check is missing
        notes.append(f"could not check whether the run's finalized numbers cover them: {exc}")
        return None
    if found is None:
        return None
    message = found.message(eval_id)
    if message is not None:
        notes.append(message)
    return found.late

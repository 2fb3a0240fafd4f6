"""``prime-runs sync`` for a training run (contract Appendix A).

1. An offline run is registered once (``POST /rft/external-runs``, ``_runs/register_once``,
   shared with a raw ``run`` span's training run). As for an evaluation, an intent goes to
   sync.json before the request. The RFT API takes no id or key of ours and has no list or
   lookup of runs, so nothing can tell whether an earlier attempt landed: a rerun that finds
   an intent but no id does not register again when the earlier request may have landed (it
   failed ambiguously, or the sync was killed): it stops and says how to go on. A request
   that certainly did not land clears the intent.
2. Its episodes go to Prime Traces as any run's records do (``_Syncer.upload``), every
   metrics row no sink acknowledged (``_journal/metrics_rows``) is sent, with the platform's
   run id, and the sample table's objects no sink sent (``_sync/train_samples``); each lands
   in the journal's acks, so a second sync sends nothing.
3. A run nobody closed is finalized (completed) or given its status (failed, cancelled,
   crashed), once everything was sent: the platform closes the run's curves at finalize.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

import prime_runs._journal.metrics_rows as rows
from prime_runs._journal.runinfo import METRICS, RunInfo
from prime_runs._records.item import Item
from prime_runs._records.jsonio import encode_json
from prime_runs._runs.register_once import register_training
from prime_runs._sync.close import CLOSE_TIMEOUT, outcome
from prime_runs._sync.report import SyncReport, Tally, assemble
from prime_runs._sync.train_samples import send_samples
from prime_runs.errors import PrimeRunsError, SyncError, describe
from prime_runs.exporters.metrics import MetricsSink
from prime_runs.platform.training import TrainingPlatform
from prime_runs.settings import Settings
from prime_runs.status import RunStatus

CHUNK_ROWS = 256
CHUNK_TIMEOUT = 300.0


class Uploader(Tally, Protocol):
    """What of ``_Syncer`` a training sync uses: its record uploads and their counts."""

    eval_id: str

    def upload(self, eval_id: str, *, restamp: bool) -> list[str]: ...


def sync_training(syncer: Uploader, info: RunInfo, settings: Settings) -> SyncReport:
    """Sync one training run: register it if it never was, send what is left, close it."""
    platform = TrainingPlatform(settings)
    try:
        where = info.platform
        if where:
            run_id = info.platform_id()  # read from an archive file: checked
        else:
            if not (any(info.pending.values()) or info.needs_close):
                return SyncReport(info.run_id, True, "nothing to sync")
            where = register_training(info.archive, settings, platform)
            run_id = str(where["id"])  # checked where the platform answered it
        syncer.eval_id = run_id
        url = where.get("url") or platform.url_for(run_id)
        failures = syncer.upload(run_id, restamp=run_id != info.run_id)
        failures += send_metrics(info.archive.path, platform, run_id, syncer)
        failures += send_samples(info, platform, run_id, syncer)
        closed_how = None
        if info.needs_close and not failures:
            closed_how = close(info, platform, run_id)
    finally:
        platform.shutdown()
    return assemble(info, syncer, run_id, url, failures, closed_how)


def send_metrics(
    run_dir: Path, platform: TrainingPlatform, run_id: str, syncer: Uploader
) -> list[str]:
    """Send every pending metrics row of the run folder; the failures, in words."""
    sink = MetricsSink(platform, run_id, owns_client=False)
    chunk: list[Item] = []
    for journal, number, body in rows.pending(run_dir):
        chunk.append(Item("metrics", _restamped(body, run_id), (journal, number), None, None))
        if len(chunk) >= CHUNK_ROWS:
            failure = _send(run_dir, sink, chunk, syncer)
            if failure:
                return [failure]
            chunk = []
    failure = _send(run_dir, sink, chunk, syncer) if chunk else None
    return [failure] if failure else []


def _restamped(body: bytes, run_id: str) -> bytes:
    """The row with the platform's run id (an offline run's rows name its local id)."""
    try:
        row = json.loads(body)
    except ValueError:
        return body  # sent as is: the platform refuses it, and it is settled as refused
    if isinstance(row, dict) and row.get("run_id") != run_id:
        return encode_json(dict(row, run_id=run_id))
    return body


def _send(run_dir: Path, sink: MetricsSink, items: list[Item], syncer: Uploader) -> str | None:
    outcome_ = sink.export(items, time.monotonic() + CHUNK_TIMEOUT)
    for journal, numbers in _by_journal([i.key for i in outcome_.acked]).items():
        rows.settle(run_dir, journal, numbers)
    syncer.uploaded[METRICS] = syncer.uploaded.get(METRICS, 0) + len(outcome_.acked)
    refused = [item for item, _reason in outcome_.rejected]
    for journal, numbers in _by_journal([i.key for i in refused]).items():
        rows.settle(run_dir, journal, numbers, rejected=True)
    for _item, reason in outcome_.rejected:
        syncer.rejected.setdefault(METRICS, []).append(reason)
    if outcome_.retire or outcome_.retry:
        return f"metrics rows: {outcome_.retire or outcome_.retry_reason}"
    return None


def _by_journal(keys: list[Any]) -> dict[Path, list[int]]:
    out: dict[Path, list[int]] = {}
    for journal, number in keys:
        out.setdefault(journal, []).append(number)
    return out


def close(info: RunInfo, platform: TrainingPlatform, run_id: str) -> str:
    """Close the run as its archive says it ended; how, in words. Raises ``SyncError``."""
    doc = dict(info.status_doc)
    status, reason = outcome(info, doc)
    try:
        platform.close(run_id, status, reason, time.monotonic() + CLOSE_TIMEOUT)
    except PrimeRunsError as exc:
        raise SyncError(f"uploads done, but closing the run failed: {describe(exc)}") from exc
    doc.update(
        status=status.value,
        error=reason,
        closed=True,
        finished_at=doc.get("finished_at") or time.time(),
        synced_at=time.time(),
    )
    info.archive.write_status(doc)
    return "finalized" if status is RunStatus.COMPLETED else f"closed as {status.value}"

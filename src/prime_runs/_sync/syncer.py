"""``prime-runs sync``: upload what an archived run still owes the platform, then close it.

Per run, under an exclusive lock on the run folder:

1. An offline run is registered once. An intent (with its time) goes to sync.json before
   the create; a rerun that finds an intent but no id first looks for an evaluation created
   since then with the same name, model, framework and config, and adopts it. The id is
   stored in sync.json and run.json.
2. First the batches a deliverer that is gone (the producer, a worker, an earlier sync)
   noted before sending them and never settled (``_journal/batches``): each is sent again
   as the same bytes under the same key (Prime Traces), or looked up by its own rows
   (the sample table); an append that may still be stored keeps its records pending, and
   the report says when to sync again (``_sync/resume``). Then every other record a sink
   has not acknowledged is uploaded, re-stamped with the platform id (offline runs); they
   were never sent, so nothing is read back for them. Each chunk is noted before it is
   sent and acknowledged in the archive as it lands. A line that is not a record is
   rejected and counted.
3. A run nobody closed is closed with its recorded status and summary (completed ->
   finalize, otherwise close-out; a dead owner that never finished -> crashed), unless an
   upload failed: the platform computes statistics at close, so it waits for the rest.

A training run goes the same way through the RFT API (``_sync/training``): registered
once, its episodes and metrics rows sent, then finalized or given its status.

A run whose owner process is alive and still running is never touched. A run whose
status.json cannot be used (missing, not JSON, wrong types, unknown status) is treated as
dead and unfinished: uploaded, then closed as crashed with the reason, and reported as a
failure so the damage is seen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import prime_runs._journal.batches as _batches
import prime_runs._journal.lease as _lease
from prime_runs._delivery.provenance import from_resource, upload_context
from prime_runs._journal.archive import RECORDS_DIR, REJECTED, SKIPPED, RecordKey, settled_name
from prime_runs._journal.nofollow import segment_paths
from prime_runs._journal.runinfo import SAMPLES, SINK_LABELS, TRACES, RunInfo, inspect, sink_count
from prime_runs._plural import quantity
from prime_runs._progress import Progress
from prime_runs._records.item import Item, Outcome, record_key, record_keys
from prime_runs._records.restamp import Restamp
from prime_runs._runs.register_once import register_evaluation
from prime_runs._sync.close import close_run, late_records
from prime_runs._sync.outgoing import outgoing
from prime_runs._sync.readback import rollout_counters
from prime_runs._sync.report import SyncReport, assemble
from prime_runs._sync.resume import Resumed, resume
from prime_runs._sync.training import sync_training
from prime_runs.errors import PrimeRunsError, SyncError
from prime_runs.exporters._channel import Channel
from prime_runs.exporters._sinks import build_sinks
from prime_runs.exporters.samples import SamplesSink
from prime_runs.platform._http import PlatformClient
from prime_runs.settings import Settings

CHUNK_RECORDS = 256
CHUNK_BYTES = 16 * 1024 * 1024  # under the traces sink's 30 MiB target: one request a chunk
CHUNK_TIMEOUT = 300.0

logger = logging.getLogger("prime_runs")


def sync_run(
    info: RunInfo,
    settings: Settings,
    progress: Progress,
    *,
    claimed: set[str],
    environments: Sequence[str] = (),
) -> SyncReport:
    """Sync one run. ``claimed``: platform ids other local runs hold (never adopted).
    ``environments``: names to register the run under if its run.json has none.
    Never raises for the run's own failures (they are the report's message)."""
    run_id = info.run_id
    if info.running:
        return SyncReport(run_id, False, _still_running(info), skipped=True)
    try:
        with _lease.sync_lock(info.archive.path) as got:
            if not got:
                return SyncReport(
                    run_id, False, "another prime-runs sync is working on it", skipped=True
                )
            info = inspect(info.archive)  # fresh, under the lock
            if info.running:
                return SyncReport(run_id, False, _still_running(info), skipped=True)
            client = PlatformClient(settings)
            try:
                syncer = _Syncer(info, settings, client, progress, claimed)
                return syncer.run(environments)
            finally:
                client.close()
                info.archive.close()
                progress.finish()
    except SyncError as exc:
        return SyncReport(run_id, False, str(exc), platform_id=info.platform.get("id"))
    except (PrimeRunsError, OSError) as exc:
        return SyncReport(run_id, False, f"{type(exc).__name__}: {exc}")


def _still_running(info: RunInfo) -> str:
    if info.status_problem:
        return f"{info.status_problem}, and its process may still be running; not touched"
    return f"still running (pid {info.status_doc.get('pid')}); not touched"


class _Syncer:
    def __init__(
        self,
        info: RunInfo,
        settings: Settings,
        client: PlatformClient,
        progress: Progress,
        claimed: set[str],
    ) -> None:
        self.info = info
        self.archive = info.archive
        self.desc = info.description
        self.settings = settings
        self.client = client
        self.progress = progress
        self.claimed = claimed
        self.uploaded: dict[str, int] = {sink: 0 for sink in info.sinks}
        self.found: dict[str, int] = {sink: 0 for sink in info.sinks}
        self.late: int | None = None
        self.rejected: dict[str, list[str]] = {}
        self.notes: list[str] = []
        self.eval_id = ""
        self.busy: dict[str, int] = {}  # segment -> pid of the live process delivering it
        self.left = 0  # pending records left to that process
        self.done: dict[str, set[RecordKey]] = {}  # per sink, records settled in the journal

    # -- the whole run ------------------------------------------------------------------

    def run(self, environments: Sequence[str] = ()) -> SyncReport:
        info = self.info
        if not info.description:
            raise SyncError(
                "run.json cannot be read (not JSON, or not a JSON object): nothing says what "
                "this run is; restore it to sync the run"
            )
        if info.joined and info.mode != "online":
            raise SyncError(
                "joined part of an offline run owned by another process; sync the owner's "
                "archive (this folder has no registration of its own)"
            )
        if self.desc.get("kind") == "train":
            # Registered and closed through the RFT API, never as an evaluation.
            return sync_training(self, info, self.settings)
        platform = info.platform
        if platform:
            eval_id = info.platform_id()  # read from an archive file: checked
        else:
            if not (any(info.pending.values()) or info.needs_close):
                return SyncReport(info.run_id, True, "nothing to sync")
            self._ensure_environments(environments)
            platform = register_evaluation(
                self.archive, self.settings, self.client, claimed=self.claimed
            )
            self.desc = self.archive.description()
            eval_id = platform["id"]  # checked where the platform answered it
        self.eval_id = eval_id
        failures = self.upload(eval_id, restamp=eval_id != info.run_id)
        closed_how = None
        if info.needs_close and not failures:
            closed_how = close_run(
                self.info, self.desc, self.settings, self.client, eval_id, platform.get("url")
            )
        if closed_how is None and (any(self.uploaded.values()) or info.joined):
            self.late = late_records(self.archive, self.client, eval_id, self.notes)
        return assemble(
            info, self, eval_id, platform.get("url"), failures, closed_how, late=self.late
        )

    def _ensure_environments(self, names: Sequence[str]) -> None:
        """The platform registers an eval only under an environment (checked before any
        request): take the ones given to sync, else say exactly how to supply one."""
        desc = self.desc
        current = desc.get("environment_refs") or desc.get("environments")
        if (isinstance(current, list) and current) or (current and not names):
            return  # named already (a value of the wrong type is reported by register)
        if not names:
            raise SyncError(
                "the run names no environment, and the platform registers an evaluation only "
                "under one: run `prime-runs sync --environment NAME "
                f"{self.info.run_id}` (NAME as you would pass to init(environments=[...])), "
                f'or add "environments": ["NAME"] to {self.archive.path / "run.json"}'
            )
        desc = dict(desc, environments=list(names), environment_refs=[])
        self.archive.write_description(desc)  # a rerun registers under the same names
        self.desc = desc

    # -- uploads ------------------------------------------------------------------------

    def upload(self, eval_id: str, *, restamp: bool) -> list[str]:
        info = self.info
        active = [sink for sink in info.sinks if info.pending.get(sink)]
        if not active:
            return []
        acks = self.archive.acknowledged()
        done = self.done = {
            sink: acks.get(sink, set())
            | acks.get(settled_name(sink, REJECTED), set())
            | acks.get(settled_name(sink, SKIPPED), set())
            for sink in active
        }
        segments = [p.name for p in segment_paths(self.archive.path / RECORDS_DIR)]
        self.busy = _lease.wait_free(self.archive.path, segments, _lease.SYNC_WAIT)
        total = sum(info.pending[sink] for sink in active)
        what = ", ".join(sink_count(s, info.pending[s]) for s in active)
        self.progress.start(info.run_id, total, what)
        # The same sinks and delivery step (``Channel.deliver``) as a live run's exporters,
        # noting each batch before it is sent as they do.
        built = build_sinks(
            self.settings,
            eval_id,
            self._context(),
            traces=TRACES in active,
            samples=SAMPLES in active,
        )
        for sink in built:
            sink.keep_notes(_batches.notebook(self.archive.path, sink.name))
        sinks: dict[str, Channel] = {sink.name: Channel(sink) for sink in built}
        failures: list[str] = []
        stamp = None
        if restamp:
            stamp = Restamp.between(info.run_id, eval_id, self.archive.noted_stamps())
        try:
            # First what others may have in flight: sent again as it was, or looked up.
            resumed = resume(self, sinks, done, stamp, failures)
            for samples in (s for s in built if isinstance(s, SamplesSink)):
                samples.already_stored(resumed.rows)
                # Continue the run's rollout numbering after the rows already stored.
                samples.continue_numbering(
                    rollout_counters(self.archive, done[SAMPLES], resumed.rows)
                )
            self._stream(stamp, sinks, resumed, failures)
        finally:
            for channel in sinks.values():
                channel.close()
        _batches.prune(self.archive.path, resumed.notes, done)
        waiting = resumed.waiting()
        if waiting:
            failures.append(waiting)
        if self.left:
            pids = ", ".join(str(p) for p in sorted(set(self.busy.values())))
            failures.append(
                f"{quantity(self.left, 'record was', 'records were')} left to the live "
                f"process (pid {pids}) still delivering them; run `prime-runs sync` again "
                "once it has exited"
            )
        return failures

    def _stream(
        self,
        stamp: Restamp | None,
        sinks: dict[str, Any],
        resumed: Resumed,
        failures: list[str],
    ) -> None:
        chunks: dict[str, list[Item]] = {sink: [] for sink in sinks}
        sizes = dict.fromkeys(sinks, 0)
        done = self.done
        held = {sink: resumed.held.get(sink, set()) for sink in sinks}
        for key, _kind, data in self.archive.iter_records():
            wanted = [s for s in sinks if key not in done[s] and key not in held[s]]
            if not wanted:
                continue
            if key.segment in self.busy:  # another process may have it in flight
                self.left += 1
                continue
            item, sample_id, why = outgoing(key, data, stamp)
            del data  # a restamped record is a copy: the journal's bytes need not live on
            if item is None:
                for sink in wanted:
                    self._settle(sink, REJECTED, [key], why)
                continue
            for sink in wanted:
                if sink == SAMPLES and sample_id is not None and str(sample_id) in resumed.rows:
                    self.ack(sink, [item], found=True)  # stored already: never resend
                    continue
                chunks[sink].append(item)
                sizes[sink] += len(item.data)
                if len(chunks[sink]) >= CHUNK_RECORDS or sizes[sink] >= CHUNK_BYTES:
                    self.export(sinks, sink, chunks[sink], failures)
                    chunks[sink], sizes[sink] = [], 0
            item = None  # a record sent is not kept alive while the next one is read
        for sink in list(sinks):
            if chunks.get(sink):
                self.export(sinks, sink, chunks[sink], failures)

    def export(
        self, sinks: dict[str, Any], sink: str, items: list[Item], failures: list[str]
    ) -> None:
        """Deliver ``items`` to ``sink`` once and journal the outcome; a sink that failed
        stops for this sync (one round per sync)."""
        if sink not in sinks:
            return  # stopped earlier in this sync
        channel = sinks[sink]
        outcome: Outcome = channel.deliver(items, time.monotonic() + CHUNK_TIMEOUT)
        self.ack(sink, outcome.acked)
        for item, reason in outcome.rejected:
            self._settle(sink, REJECTED, record_keys([item]), reason)
        if outcome.skipped and not outcome.quiet:
            # As the live journal does: records a switched-off sink skipped stay pending,
            # for a later sync once the service is on.
            self._settle(sink, SKIPPED, record_keys(outcome.skipped), None)
        # One round per sync: what failed transiently stays pending for the next run.
        if outcome.retire is not None or channel.held():
            sinks.pop(sink).close()
            label = SINK_LABELS[sink]
            if outcome.quiet:
                self.notes.append(f"{label} not uploaded: {outcome.retire}")
            else:
                failures.append(f"{label}: {outcome.retire or outcome.retry_reason}")

    def ack(self, sink: str, items: list[Item] | list[RecordKey], *, found: bool = False) -> None:
        """Journal ``items`` (or their keys) as stored by ``sink``; ``found``: stored
        already, not sent by this sync."""
        given = (i if isinstance(i, RecordKey) else record_key(i) for i in items)
        keys = [k for k in given if k is not None]
        self._journaled(sink, sink, keys)
        counts = self.found if found else self.uploaded
        counts[sink] = counts.get(sink, 0) + len(keys)
        self.progress.advance(len(keys))

    def _settle(self, sink: str, how: str, keys: list[RecordKey], reason: str | None) -> None:
        self._journaled(sink, settled_name(sink, how), keys)
        self.progress.advance(len(keys))
        if how == REJECTED:
            self.rejected.setdefault(sink, []).extend([reason or how] * len(keys))

    def _journaled(self, sink: str, name: str, keys: list[RecordKey]) -> None:
        """Acks in the archive; then the batch notes that named those records close."""
        self.archive.ack(name, keys)
        if sink in self.done:
            self.done[sink].update(keys)
        _batches.settled(self.archive.path, sink, keys)

    def _context(self) -> dict[str, str]:
        resource = self.desc.get("resource")
        return upload_context(
            run_type=str(self.desc.get("kind") or "eval"),
            framework=self.desc.get("framework"),
            model=self.desc.get("model"),
            resource=from_resource(resource if isinstance(resource, dict) else {}),
        )

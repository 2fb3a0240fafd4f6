"""What a run folder in the local archive says about its run: identity, status (with a
liveness check of the process that owns it), and what is still to upload or close.

Read-only and cheap enough for ``prime-runs ls`` over many runs: records are counted,
never decoded. ``prime-runs sync`` recomputes the exact pending sets itself.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from prime_runs._journal.archive import (
    REJECTED,
    RUN_FILE,
    SKIPPED,
    STATUS_FILE,
    SYNC_FILE,
    RunArchive,
    settled_name,
)
from prime_runs._journal.liveness import pid_alive
from prime_runs._journal.metrics_rows import count_pending
from prime_runs._journal.nofollow import links_in, open_for_reading
from prime_runs._plural import quantity
from prime_runs._runid import check_run_id
from prime_runs.status import RunStatus

TRACES = "traces"
SAMPLES = "eval_samples"
SINKS = (TRACES, SAMPLES)
METRICS = "train_metrics"  # a training run's metrics rows (``metrics_rows``), not records
TRAIN_SAMPLES = "train_samples"  # a training run's sample table (exporters/train_samples)
SINK_LABELS = {
    TRACES: "traces",
    SAMPLES: "samples",
    METRICS: "metrics rows",
    TRAIN_SAMPLES: "sample-table episodes",
}
_SINK_NOUNS = {
    TRACES: "trace",
    SAMPLES: "sample",
    METRICS: "metrics row",
    TRAIN_SAMPLES: "sample-table episode",
}


def sink_count(sink: str, n: int) -> str:
    """``1 trace``, ``12 samples``: ``n`` records of ``sink``."""
    label = SINK_LABELS.get(sink, sink)
    return quantity(n, _SINK_NOUNS.get(sink, label), label)


EPISODE_KIND = "episode"
EPISODES = f"{EPISODE_KIND}-"  # how an episode segment's name begins


@dataclass
class RunInfo:
    """One archived run as ``ls``/``show``/``sync`` see it."""

    archive: RunArchive
    description: dict[str, Any]
    status_doc: dict[str, Any]
    sync_doc: dict[str, Any]
    records: dict[str, int]  # kind -> complete lines
    acked: dict[str, int]  # sink -> records it stored
    settled: dict[str, dict[str, int]]  # sink -> {"rejected"|"skipped": n}
    owner_alive: bool
    sinks: tuple[str, ...]
    pending: dict[str, int] = field(default_factory=dict)  # sink -> records still to upload
    # Why status.json cannot be used (missing, not JSON, wrong types, unknown status); the
    # run then counts as dead and unfinished: sync closes it as crashed, naming this.
    status_problem: str | None = None
    links: list[str] = field(default_factory=list)  # symbolic links in the folder, not read
    # Sinks whose pending count is an upper bound: the sample table's, counted without
    # reading the episodes (`show` reads them and knows which get a row).
    estimated: set[str] = field(default_factory=set)

    @property
    def run_id(self) -> str:
        return self.archive.run_id

    @property
    def name(self) -> str:
        return str(self.description.get("name") or self.run_id)

    @property
    def mode(self) -> str:
        return str(self.description.get("mode") or "?")

    @property
    def joined(self) -> bool:
        """A folder written only by a process that joined a run owned elsewhere."""
        return bool(self.description.get("joined")) and not self.status_doc

    @property
    def platform(self) -> dict[str, Any]:
        """``{"id", "url"}`` on the platform, once the run has one."""
        for source in (self.sync_doc, self.description):
            value = source.get("platform")
            if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
                return value
        # An online run's folder is named by its platform id, unless the run was still being
        # registered (an intent, no id): then its folder has a local id.
        if self.mode == "online" and "intent" not in self.sync_doc:
            return {"id": self.run_id, "url": None}
        return {}

    def platform_id(self) -> str:
        """``platform["id"]``, for the requests that name it. An archive file is input (it
        may be edited by hand): an id that is not one raises ``ConfigurationError``
        naming the file."""
        value = self.platform.get("id")
        for name, doc in ((SYNC_FILE, self.sync_doc), (RUN_FILE, self.description)):
            platform = doc.get("platform")
            if isinstance(platform, dict) and platform.get("id") == value:
                return check_run_id(
                    value,
                    source=f'{self.archive.path / name}: "platform": {{"id"}}',
                    fix="set it to the run's id on the platform (the last part of its "
                    "dashboard URL)",
                )
        return check_run_id(
            value,
            source=f"the online run folder {self.archive.path}'s name",
            fix=f'add "platform": {{"id": "<its id on the platform>"}} to its {RUN_FILE}',
        )

    @property
    def total_records(self) -> int:
        return sum(self.records.values())

    @property
    def recorded_status(self) -> str | None:
        value = self.status_doc.get("status")
        return value if isinstance(value, str) else None

    @property
    def running(self) -> bool:
        """The owner says it is running (or its status cannot be read) and its process is
        alive."""
        status_says = self.status_problem or self.recorded_status == RunStatus.RUNNING.value
        return bool(status_says) and self.owner_alive

    @property
    def status_label(self) -> str:
        if self.status_problem:
            return "invalid"
        status = self.recorded_status
        if status is None:
            return "joined" if self.joined else "unknown"
        if status == RunStatus.RUNNING.value and not self.owner_alive:
            return "crashed?"  # the owner died without finishing; sync closes it as crashed
        return status

    @property
    def closed(self) -> bool:
        return bool(self.status_doc.get("closed"))

    @property
    def needs_close(self) -> bool:
        """The run's owner never closed it on the platform and can no longer do so."""
        if self.status_problem:
            return not self.running
        return not (self.joined or not self.status_doc or self.closed or self.running)

    @property
    def needs_sync(self) -> bool:
        return not self.running and (any(self.pending.values()) or self.needs_close)

    @property
    def mean_reward(self) -> float | None:
        """The summary's ``avg_reward``; None without one, and for the summary of a run no
        record of which carried a reward score or metric (``avg_reward`` 0 over empty
        ``avg_metrics``: computed from nothing, not a mean of zeros)."""
        summary = self.status_doc.get("summary")
        if not isinstance(summary, dict):
            return None
        value = summary.get("avg_reward")
        if value == 0 and summary.get("avg_metrics") == {}:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer too large for a float: bad input, not shown
                return None
            return number if math.isfinite(number) else None  # 1e400 reads as inf
        return None

    @property
    def left_open(self) -> dict[str, int]:
        """What the owner's finish() left owed when it left the run open (sink -> records),
        until a sync closes the run; empty when it closed the run or did not say."""
        owed = self.status_doc.get("left_open")
        if self.closed or not isinstance(owed, dict):
            return {}
        return {
            str(k): v for k, v in owed.items() if isinstance(v, int) and not isinstance(v, bool)
        }

    def pending_text(self) -> str:
        """``-`` when nothing is left, else e.g. ``20 traces, 20 samples, close``."""
        parts = [
            f"{'up to ' if sink in self.estimated else ''}{sink_count(sink, n)}"
            for sink, n in self.pending.items()
            if n
        ]
        if self.needs_close:
            parts.append("close")
        return ", ".join(parts) if parts else "-"


def owed_text(owed: dict[str, int]) -> str:
    """``12 traces, 12 samples``: in the order `prime-runs ls` lists what is pending."""
    order = list(SINK_LABELS)
    ranked = sorted(owed.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99)
    return ", ".join(sink_count(sink, n) for sink, n in ranked)


def owed_were(owed: dict[str, int]) -> str:
    """``owed_text`` as the subject of ``were``: ``1 trace was``, ``1 trace, 1 sample were``."""
    one = list(owed.values()) == [1]
    return f"{owed_text(owed)} {'was' if one else 'were'}"


def closing_text(status: str) -> str:
    """How `prime-runs sync` closes a run that ended with ``status``."""
    return "finalizes it" if status == RunStatus.COMPLETED.value else f"closes it as {status}"


def sinks_of(description: dict[str, Any]) -> tuple[str, ...]:
    """The sinks a run uploads to: what run.json names (``"sinks"``), else both."""
    named = description.get("sinks")
    if isinstance(named, list):
        return tuple(s for s in SINKS if s in named)
    return SINKS


def inspect(archive: RunArchive) -> RunInfo:
    description = archive.description()
    status_doc, problem = read_status(archive, joined=bool(description.get("joined")))
    records = archive.count_records()
    acks = archive.acknowledged()
    sinks = sinks_of(description)
    acked = {sink: len(acks.get(sink, ())) for sink in sinks}
    settled = {
        sink: {how: len(acks.get(settled_name(sink, how), ())) for how in (REJECTED, SKIPPED)}
        for sink in sinks
    }
    info = RunInfo(
        archive=archive,
        description=description,
        status_doc=status_doc,
        sync_doc=archive.sync_state(),
        records=records,
        acked=acked,
        settled=settled,
        owner_alive=owner_alive(archive, status_doc),
        sinks=sinks,
        status_problem=problem,
        links=links_in(archive.path),
    )
    if problem:
        info.status_doc = {}  # nothing in it is trusted
        if problem == MISSING_STATUS and _just_created(description):
            info.owner_alive = True  # init() writes run.json a moment before status.json
    total = info.total_records
    episodes = records.get(EPISODE_KIND, 0)
    for sink in sinks:
        # Only episodes become sample rows (a bare trace is settled as skipped by sync).
        base = total if sink == TRACES else episodes
        done = acked[sink] + sum(settled[sink].values())
        info.pending[sink] = max(0, base - done)
    if description.get("kind") == "train":
        info.pending[METRICS] = count_pending(archive.path)
        named = description.get("sinks")
        if isinstance(named, list) and TRAIN_SAMPLES in named:
            # Episodes the table's sink neither stored nor settled (skipped: no row there;
            # the live sink settles bare traces too, which are not counted here).
            names = [TRAIN_SAMPLES, *(settled_name(TRAIN_SAMPLES, h) for h in (REJECTED, SKIPPED))]
            kept = {k for n in names for k in acks.get(n, ()) if k.segment.startswith(EPISODES)}
            info.pending[TRAIN_SAMPLES] = max(0, episodes - len(kept))
            info.estimated.add(TRAIN_SAMPLES)  # some may get no row (show tells)
    return info


_STATUS_TYPES: dict[str, tuple[type, ...]] = {
    "pid": (int, type(None)),
    "closed": (bool, type(None)),
    "summary": (dict, type(None)),
    "error": (str, type(None)),
    "finished_at": (int, float, type(None)),
}


MISSING_STATUS = "status.json is missing"
_STARTING = 60.0  # seconds after run.json's created_at a missing status.json may yet appear


def _just_created(description: dict[str, Any]) -> bool:
    created = description.get("created_at")
    if not isinstance(created, (int, float)) or isinstance(created, bool):
        return False
    return abs(time.time() - created) < _STARTING


def read_status(archive: RunArchive, *, joined: bool) -> tuple[dict[str, Any], str | None]:
    """status.json and, when it cannot be used, why. A folder only a joined process wrote
    has none (that is not a problem); the owner writes it before any record."""
    try:
        with open_for_reading(archive.path / STATUS_FILE) as f:
            doc = json.loads(f.read())
    except FileNotFoundError:
        return {}, None if joined else MISSING_STATUS
    except OSError as exc:
        if (archive.path / STATUS_FILE).is_symlink():
            return {}, "status.json is a symbolic link (not followed); replace it with the file"
        return {}, f"status.json cannot be read ({exc.strerror})"
    except (ValueError, RecursionError):
        return {}, "status.json is not valid JSON"
    if not isinstance(doc, dict):
        return {}, "status.json does not hold a JSON object"
    status = doc.get("status")
    allowed = [s.value for s in RunStatus]
    if status not in allowed:
        return doc, f"status.json: status {status!r} is not one of {', '.join(allowed)}"
    for key, types in _STATUS_TYPES.items():
        value = doc.get(key)
        if not isinstance(value, types) or (key == "pid" and isinstance(value, bool)):
            return doc, f"status.json: {key} has the wrong type ({type(value).__name__})"
    return doc, None


def owner_alive(archive: RunArchive, status_doc: dict[str, Any]) -> bool:
    """Whether the process that owns the run (status.json ``pid``) still runs."""
    try:
        since = (archive.path / STATUS_FILE).stat().st_mtime
    except OSError:
        since = None
    return pid_alive(status_doc.get("pid"), since=since)


def format_time(value: object) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))

"""The owner's summary over every record of the run, wherever a worker logged it.

At ``finish()`` (no ``summary=`` given) the owner knows its own records and those of the
processes that journal into its archive folder. Workers on other disks (node-local
archive roots, Ray's ``working_dir``) upload into the same evaluation, so the owner reads
back what the platform stored for it (``GET /evaluations/{id}/samples``, paged) and merges
the two by record id: a record seen both locally and on the platform counts once, and so
does a record a retried task logged twice.

- **Nothing read when nothing is elsewhere.** One small request (the evaluation's
  ``totalSamples``) against the rows this host's sinks stored (``Counters.rows``: an
  over-size episode is one row per trace) tells whether any other process stored rows;
  when none did, no page is read.
- **Bounded in bytes.** Pages start at one row and grow or shrink with the weight of the
  rows seen (about ``PAGE_BYTES`` a page); rows are handed on one at a time.
- **Partial, not zero.** When the read-back's time runs out (or a page cannot be read)
  part-way, the summary covers what was read, ``records_summarized`` counts it, the
  finalized ``prime_runs.summary_partial`` says the numbers are partial, and the finish
  report says so. When nothing could be read (a write-only token answers 403, the
  platform is down) the summary keeps the local records and the report says which
  records it may be missing and where they are.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prime_runs._plural import quantity
from prime_runs._records.jsonio import encode_json
from prime_runs._records.lines import id_of_line
from prime_runs._runs.finishing import platform_summary
from prime_runs.errors import PrimeRunsError, describe
from prime_runs.metrics import SummaryAccumulator
from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient

if TYPE_CHECKING:
    from prime_runs._journal.archive import RunArchive
    from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")

#: ``metrics.prime_runs.records_summarized``: how many records the sent summary covers.
SUMMARIZED_KEY = "records_summarized"
#: ``metrics.prime_runs.summary_partial``: the read-back stopped before the last row.
PARTIAL_KEY = "summary_partial"
PAGE_SIZE = 64  # at most (a power of two: see stored_rows)
FIRST_PAGE = 1  # a row's weight is unknown until one is seen: a row can be a whole episode
SAMPLES_SINK = "eval_samples"
PAGE_BYTES = 8 * 1024 * 1024  # what one page may weigh, about
READ_SHARE = 0.5  # at most this share of the close-out's time goes to reading back
MAX_READ_SECONDS = 60.0


class Unreadable(Exception):
    """The platform's copy of the run could not be read in time."""


@dataclass
class Coverage:
    """What the merged summary counts, by where each record was seen."""

    local: int = 0  # distinct records in this host's archive folder (and this process)
    remote: int = 0  # distinct records only the platform had (other disks, other hosts)
    unsummarized: int = 0  # stored rows that carry no whole record (split episodes)
    own_ids: set[str] = field(default_factory=set)  # what this process logged
    platform_ids: set[str] = field(default_factory=set)
    summary: dict[str, Any] | None = None
    rows_read: int = 0  # the platform's rows read back
    partial: str | None = None  # why the read-back stopped before the last row


def stored_rows(client: PlatformClient, eval_id: str, until: float) -> Iterator[dict[str, Any]]:
    """Every sample row the platform holds for ``eval_id``, page by page, by ``until``.

    A row can be megabytes (a whole episode), so the page size follows the largest row
    seen to keep a page near ``PAGE_BYTES``; sizes are powers of two so that every offset
    reached is a whole number of pages of the next size (the API pages by number)."""
    offset, limit = 0, FIRST_PAGE
    while True:
        if time.monotonic() >= until:
            raise Unreadable("the finish deadline came before the last page")
        reply = client.request(
            "GET",
            f"/evaluations/{eval_id}/samples",
            params={"page": offset // limit + 1, "limit": limit},
            idempotent=True,
            deadline=until,
            max_attempts=2,
        )
        rows = reply.pop("samples", None)
        if not isinstance(rows, list):
            raise Unreadable(f"a page had no samples list (keys {sorted(reply)})")
        largest = 1
        while rows:
            row = rows.pop(0)  # handed on one at a time: the page is not held twice
            largest = max(largest, len(encode_json(row)))
            if isinstance(row, dict):
                yield row
            del row
            offset += 1
        if not reply.get("hasMore"):
            return
        if offset % limit:
            raise Unreadable("a page held fewer rows than asked although more were said to follow")
        limit = _next_limit(limit, largest, offset)


def _next_limit(limit: int, largest: int, offset: int) -> int:
    fits = max(1, PAGE_BYTES // max(largest, 1))
    while limit > 1 and limit > fits:
        limit //= 2
    while limit < PAGE_SIZE and limit * 2 <= fits and offset % (limit * 2) == 0:
        limit *= 2
    return limit


def record_of(row: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The record id a stored row stands for, and the whole record when the row carries it.

    An episode's row carries the episode under ``info.native_wrapper``; a v0 row the
    producer logged as such is its own record; an over-size episode's per-trace rows name
    the episode (``episode_id``) but carry no whole record."""
    info = row.get("info")
    native = info.get("native_wrapper") if isinstance(info, dict) else None
    if isinstance(native, dict):
        rid = native.get("id", row.get("sample_id"))
        return (rid if isinstance(rid, str) else None), native
    episode_id = row.get("episode_id")
    if isinstance(episode_id, str) and episode_id != row.get("sample_id"):
        return episode_id, None
    rid = row.get("sample_id")
    return (rid if isinstance(rid, str) else None), row


def _local(
    archive: RunArchive | None, own: set[str], acc: SummaryAccumulator, cov: Coverage
) -> set[str]:
    """Add the archive's records that ``acc`` (this process's tally) lacks; the ids seen."""
    if archive is None:
        return set()
    for key, _, data in archive.iter_records():
        if key.segment not in own:
            continue
        rid = id_of_line(data)
        if rid is not None:
            cov.own_ids.add(rid)  # already in this process's tally
    ids = set(cov.own_ids)
    for _, _, data in archive.iter_records(skip=own):
        rid = id_of_line(data)
        if rid is not None and rid in ids:
            continue  # a copy of an id already counted (a retried task, say)
        if rid is not None:
            ids.add(rid)
        acc.add_encoded(data)
    return ids


def _nothing_elsewhere(state: RunState, client: PlatformClient, eval_id: str, until: float) -> bool:
    """Whether the evaluation holds no more sample rows than this host stored: then no
    worker elsewhere added any, and the pages need not be read (one small request).

    This process's rows are counted as its sink stored them (an episode too large for one
    row is one row per trace); the folder's other processes' as one row per acknowledged
    record, which can only undercount them (then the pages are read)."""
    if state.archive is None:
        return False
    current = evaluations.get(client, eval_id, deadline=until)
    total = current.get("totalSamples")
    if not isinstance(total, int) or isinstance(total, bool):
        return False
    own = state.journal.segments if state.journal is not None else set()
    acked = state.archive.acknowledged().get(SAMPLES_SINK, ())
    others = sum(1 for key in acked if key.segment not in own)
    return total <= state.counters.rows.get(SAMPLES_SINK, 0) + others


def merged(state: RunState, client: PlatformClient, eval_id: str, until: float) -> Coverage:
    """The summary over this host's records and the platform's, merged by record id.
    Raises ``Unreadable`` (or the client's ``APIError``) when the platform cannot be read."""
    cov = Coverage()
    if _nothing_elsewhere(state, client, eval_id, until):
        cov.summary = state.summary  # computed at finish over this host's records
        cov.local = _local_count(state) or 0
        return cov
    acc = SummaryAccumulator()
    acc.merge(state.summary_acc)
    own = set(state.journal.segments) if state.journal is not None else set()
    ids = _local(state.archive, own, acc, cov)
    cov.local = len(ids)
    seen_split: set[str] = set()
    try:
        for row in stored_rows(client, eval_id, until):
            cov.rows_read += 1
            rid, record = record_of(row)
            del row
            if rid is None:
                continue
            cov.platform_ids.add(rid)
            if rid in ids:
                continue
            if record is None:
                seen_split.add(rid)
                continue
            ids.add(rid)
            cov.remote += 1
            acc.add(record)
            del record
    except (Unreadable, PrimeRunsError) as exc:  # what was read so far still counts
        cov.partial = describe(exc)
    cov.unsummarized = len(seen_split - ids)
    cov.summary = dict(acc.result())
    return cov


def written(state: RunState, cov: Coverage | None) -> int:
    """``prime_runs.traces_episodes_written`` for the run: what this process's traces sink
    committed, plus the episodes other processes stored (seen on the platform). Workers
    write both stores, so an episode in the sample table is one their traces sink sent."""
    own = state.counters.traces_episodes_written
    if "traces" not in state.delivery.channels:
        return own
    if cov is not None and cov.platform_ids:
        return own + len(cov.platform_ids - cov.own_ids)
    # Not read back: what the traces sinks of every process of this folder committed.
    return max(own, _folder_episodes_written(state))


def _folder_episodes_written(state: RunState) -> int:
    if state.archive is None:
        return 0
    try:
        acked = state.archive.acknowledged().get("traces", set())
    except OSError:
        return 0
    return sum(1 for key in acked if key.segment.startswith("episode-"))


def _note(state: RunState, message: str) -> None:
    """Said in the finish report and the log; not an error a strict caller raises on."""
    state.counters.note_error(message)
    logger.warning("prime-runs: %s", message)


def cover(
    state: RunState, client: PlatformClient, eval_id: str, deadline: float
) -> Coverage | None:
    """Replace ``state.summary`` by the merged one, reporting what it could not see.

    Returns None (the local summary stands) when the platform could not be read."""
    now = time.monotonic()
    until = now + min(MAX_READ_SECONDS, max(0.0, deadline - now) * READ_SHARE)
    try:
        cov = merged(state, client, eval_id, until)
    except Exception as exc:  # whatever goes wrong, the local summary still closes the run
        _not_read(state, describe(exc))
        return None
    if cov.partial is not None and not cov.rows_read:
        _not_read(state, cov.partial)
    elif cov.partial is not None:
        _note(
            state,
            f"the run summary is partial: it covers {quantity(cov.local + cov.remote, 'record')}, "
            f"{cov.local} of this host and {cov.remote} more among the {cov.rows_read} "
            f"sample rows read back from the platform before the read-back stopped "
            f"({cov.partial}); the finalized numbers say so (prime_runs.{PARTIAL_KEY}). "
            "Give finish() a longer timeout to read every worker's records",
        )
    state.summary = cov.summary
    if state.summary_updates and state.summary is not None:  # Run.update_summary() on top
        state.summary = {**state.summary, **state.summary_updates}
    if cov.unsummarized:
        _note(
            state,
            f"{quantity(cov.unsummarized, 'record')} stored on the platform as per-trace rows "
            f"(episodes too large for one sample row) {'is' if cov.unsummarized == 1 else 'are'} "
            "not in the run summary",
        )
    return cov


def _not_read(state: RunState, why: str) -> None:
    where = state.archive.path if state.archive is not None else "this process"
    _note(
        state,
        "the run summary covers only the records in "
        f"{where}: the platform's copy of the run could not be read ({why}); "
        "records workers journaled elsewhere (other hosts, other PRIME_RUNS_DIR) are not "
        "counted until `prime-runs sync` runs there and brings the numbers up to date",
    )


def closing_summary(
    state: RunState,
    client: PlatformClient,
    eval_id: str,
    summary: dict[str, Any],
    deadline: float,
) -> dict[str, Any]:
    """The summary the close-out sends: ``summary`` when the producer gave one, else the
    merged one (see the module notes), with the run's ``traces_episodes_written``."""
    if state.summary_given or not state.owner or state.forked:
        return summary
    cov = cover(state, client, eval_id, deadline)
    if cov is not None and not cov.remote and SAMPLES_SINK not in state.delivery.channels:
        # Said in the log only: a run no worker joined (the usual one) has nothing missing.
        logger.info(
            "prime-runs: the run summary covers the records in %s: the run does not write "
            "the sample table (samples=False), which is where the owner reads back records "
            "workers logged elsewhere",
            state.archive.path if state.archive is not None else "this process",
        )
    out = platform_summary(state.summary, written(state, cov))
    counted = cov.local + cov.remote if cov is not None else _local_count(state)
    state.records_summarized = counted or 0
    if counted is not None:
        # Lets a worker or `prime-runs sync` that lands records later tell that the
        # finalized numbers missed them, and by how many (_late).
        out.setdefault("prime_runs", {})[SUMMARIZED_KEY] = counted
    if cov is not None and cov.partial is not None and cov.rows_read:
        out.setdefault("prime_runs", {})[PARTIAL_KEY] = True
    return out


def _local_count(state: RunState) -> int | None:
    """The records of this host's archive folder: this process's journal counted as it
    wrote them, the other processes' segments by their lines."""
    if state.archive is None:
        return None
    journal = state.journal
    own = journal.segments if journal is not None else set()
    try:
        others = sum(state.archive.count_records(skip=own).values())
    except OSError:
        return None
    return others + (journal.appended if journal is not None else 0)

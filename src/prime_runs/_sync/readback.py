"""Which of a run's unacknowledged records the platform already holds: Prime Traces
documents by id, and the sample table's ids.

A record can be stored without its acknowledgement reaching the archive: the producer (or an
earlier sync) was killed between the service's commit and the ack, or an ambiguous failure
(a 503 or a broken connection after the request went out) was counted as a loss. Uploads
are idempotent only per request (the key is the digest of the request's bytes), and sync
batches differently from the producer, so resending such a record would store it twice.
Before resending, sync therefore asks the service for each candidate by id
(``GET /episodes/{id}`` or ``GET /traces/{id}``) and acknowledges the ones it holds under
this run instead of uploading them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple
from urllib.parse import quote

from prime_runs._journal.archive import RecordKey, RunArchive
from prime_runs._journal.runinfo import EPISODE_KIND
from prime_runs._records.access import example_idx, summary_trace_index
from prime_runs._records.lines import parse_head
from prime_runs.errors import PrimeRunsError, SyncError, describe
from prime_runs.platform._http import user_agent
from prime_runs.settings import Settings

logger = logging.getLogger("prime_runs")

READ_WORKERS = 4  # lookups in flight at once: latency-bound, not CPU-bound
SAMPLES_PAGE = 100


class Candidate(NamedTuple):
    key: RecordKey
    kind: str  # "episode" or "trace"
    record_id: str


class Unreadable(Exception):
    """The key may upload but not read (hosted-eval keys are write-only): nothing can be
    checked, so the caller resends and says that copies may result."""


def held_by_traces(
    settings: Settings, eval_id: str, candidates: Sequence[Candidate]
) -> set[RecordKey]:
    """The keys among ``candidates`` whose record Prime Traces holds under ``eval_id``.

    Raises ``Unreadable`` when the key cannot read, and ``SyncError`` when the service
    cannot be asked (resending then could store copies, so sync stops until it can)."""
    if not candidates:
        return set()
    from prime_traces import TracesAPIClient  # only sync pays for importing it

    client = TracesAPIClient(
        api_key=settings.api_key or "",
        base_url=settings.traces_url,
        team_id=settings.team_id,
        user_agent=f"{user_agent()} prime-traces",
    )
    try:
        with ThreadPoolExecutor(READ_WORKERS, thread_name_prefix="prime-runs-readback") as pool:
            found = list(pool.map(lambda c: _holds(client, eval_id, c), candidates))
    finally:
        client.close()
    return {c.key for c, held in zip(candidates, found, strict=True) if held}


def _holds(client: Any, eval_id: str, candidate: Candidate) -> bool:
    from prime_traces import exceptions as pt_errors

    where = "episodes" if candidate.kind == "episode" else "traces"
    try:
        doc = client.get_json(f"/{where}/{quote(candidate.record_id, safe='')}")
    except pt_errors.NotFoundError:
        return False
    except pt_errors.ForbiddenError as exc:
        if getattr(exc, "code", None) == "service_not_enabled":
            return False  # no Prime Traces on this account: nothing of it was stored
        raise Unreadable(f"HTTP 403 {getattr(exc, 'code', None) or ''}: {exc}".strip()) from exc
    except pt_errors.APIError as exc:
        raise SyncError(
            f"traces: could not check which records already landed ({type(exc).__name__}: "
            f"{exc}); nothing was resent, run sync again"
        ) from exc
    stored_under = _run_id(doc)
    # A view without the run id is trusted: ids are uuid4s, so it is this record.
    return stored_under is None or stored_under == eval_id


def _run_id(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("run_id"), str):
        return str(doc["run_id"])
    run = doc.get("run")
    if isinstance(run, dict) and isinstance(run.get("id"), str):
        return str(run["id"])
    return None


def sample_ids(client: Any, eval_id: str) -> set[str]:
    """The sample ids the evaluation's sample table holds (read page by page).
    Raises ``SyncError`` when they cannot be read: appending again could store copies."""
    ids: set[str] = set()
    page = 1
    try:
        while True:
            listing = client.request(
                "GET",
                f"/evaluations/{eval_id}/samples",
                params={"page": page, "limit": SAMPLES_PAGE},
                idempotent=True,
            )
            rows = listing.get("samples") or []
            for row in rows:  # the same field names the live sink reads back
                if isinstance(row, dict):
                    value = row.get("sample_id", row.get("sampleId"))
                    if value is not None:
                        ids.add(str(value))
            if not rows or not listing.get("hasMore", len(rows) >= SAMPLES_PAGE):
                return ids
            page += 1
    except PrimeRunsError as exc:
        raise SyncError(
            f"samples: could not read back which rows already landed: {describe(exc)}"
        ) from exc


def rollout_counters(
    archive: RunArchive, stored: set[RecordKey], landed: set[str]
) -> dict[Any, int]:
    """Rollouts per example among the episodes whose rows the evaluation already has
    (acknowledged in the archive, or found among its sample ids), so a sync numbers the
    rest after them."""
    counters: dict[Any, int] = {}
    if not stored and not landed:
        return counters
    for key, kind, data in archive.iter_records():
        if kind != EPISODE_KIND:
            continue
        record, _problem = parse_head(data)  # its long strings are not needed
        if record is None or (key not in stored and str(record.get("id")) not in landed):
            continue
        traces = record.get("traces")
        if not traces:
            continue
        try:
            idx = example_idx(traces[summary_trace_index(traces)])
            counters[idx] = counters.get(idx, 0) + 1
        except (AttributeError, TypeError, KeyError, IndexError):
            continue  # a malformed episode has no example to number
    return counters

"""Which records of one noted Prime Traces batch the service already holds, by id; and
the rollout numbering a sync continues.

A noted batch (``_journal/batches``) is normally sent again as the same bytes under the
same key. When its bytes cannot be made again (a record of it unreadable now), sync asks
the service for each of its records by id (``GET /episodes/{id}`` or ``GET /traces/{id}``)
once no request of the batch can still land, and acknowledges the ones it holds under
this run instead of uploading them: a lookup bounded by the batch's own records.
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
from prime_runs.errors import SyncError
from prime_runs.platform._http import user_agent
from prime_runs.settings import Settings

logger = logging.getLogger("prime_runs")

READ_WORKERS = 4  # lookups in flight at once: latency-bound, not CPU-bound


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

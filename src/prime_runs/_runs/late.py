"""Records that reach a run after its evaluation was finalized: counted, said, and folded
into the evaluation's numbers where the platform allows it.

The owner's finalize sends ``metrics.prime_runs.records_summarized`` (how many records its
summary covers, see ``_coverage``). A worker finishing its join, and ``prime-runs sync``
after it uploaded records, look at the evaluation: if it is no longer open, they read what
the platform stored for it, and when that holds more records than the finalized numbers
covered, they say how many arrived late and send the summary over all of them (contract
§4.2 update; metrics are replaced whole). The platform's statistics task ran at finalize
and is not rerun: the dashboard's own aggregates may still lag (docs/distributed.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prime_runs._plural import quantity
from prime_runs._runs.coverage import PARTIAL_KEY, SUMMARIZED_KEY, record_of, stored_rows
from prime_runs.metrics import SummaryAccumulator
from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient

logger = logging.getLogger("prime_runs")

#: A worker's finish spends at most this on the check (it runs inside finish()'s budget).
WORKER_BUDGET = 20.0


@dataclass
class Late:
    """What the check found. ``late``: records stored beyond what the finalized numbers
    covered (None: the evaluation does not say what they covered)."""

    status: str
    stored: int
    late: int | None
    updated: bool

    def message(self, run_id: str) -> str | None:
        if self.late is None:
            return (
                f"run {run_id} was already {self.status} on the platform when these records "
                "landed; its numbers came from the owner's summary and were left as they are"
            )
        if not self.late:
            return None
        fixed = (
            "its metrics were brought up to date"
            if self.updated
            else "its metrics could not be updated"
        )
        return (
            f"{quantity(self.late, 'record')} reached run {run_id} after it was finalized (the "
            f"finalized numbers covered {self.stored - self.late} of {self.stored}); {fixed}"
        )


def _ids_and_records(
    client: PlatformClient, eval_id: str, local: Iterable[bytes], until: float
) -> tuple[set[str], SummaryAccumulator]:
    seen: set[str] = set()
    acc = SummaryAccumulator()
    for row in stored_rows(client, eval_id, until):
        rid, record = record_of(row)
        if rid is None or rid in seen:
            continue
        seen.add(rid)
        if record is not None:
            acc.add(record)
    for data in local:  # records here that the sample table does not hold (samples off)
        try:
            record = json.loads(data)
        except ValueError:
            continue
        rid = record.get("id") if isinstance(record, dict) else None
        if isinstance(rid, str) and rid not in seen:
            seen.add(rid)
            acc.add(record)
    return seen, acc


def summary_over(
    client: PlatformClient, eval_id: str, local: Iterable[bytes], until: float
) -> tuple[dict[str, Any], int]:
    """The summary over what the platform stored and the ``local`` records, merged by id,
    and how many records it covers."""
    seen, acc = _ids_and_records(client, eval_id, local, until)
    return dict(acc.result()), len(seen)


def check(
    client: PlatformClient, eval_id: str, local: Iterable[bytes], until: float
) -> Late | None:
    """Look at ``eval_id`` and fold late records in. None: still open (nothing is late).
    Raises the client's ``APIError`` (or ``_coverage.Unreadable``) when it cannot read."""
    current = evaluations.get(client, eval_id, deadline=until)
    status = str(current.get("status") or "").upper()
    if status in evaluations.OPEN_STATUSES:
        return None
    metrics = current.get("metrics")
    metrics = metrics if isinstance(metrics, dict) else {}
    extra = metrics.get("prime_runs")
    extra = extra if isinstance(extra, dict) else {}
    covered = extra.get(SUMMARIZED_KEY)
    seen, acc = _ids_and_records(client, eval_id, local, until)
    if not isinstance(covered, int) or isinstance(covered, bool):
        return Late(status.lower(), len(seen), None, False)
    if len(seen) <= covered:
        return Late(status.lower(), len(seen), 0, False)
    written = extra.get("traces_episodes_written")
    merged: dict[str, Any] = {**metrics, **acc.result()}
    merged["prime_runs"] = {
        **{k: v for k, v in extra.items() if k != PARTIAL_KEY},  # every row was read now
        SUMMARIZED_KEY: len(seen),
        "traces_episodes_written": max(len(seen), written if isinstance(written, int) else 0),
    }
    evaluations.update(client, eval_id, metrics=merged, deadline=until)
    return Late(status.lower(), len(seen), len(seen) - covered, True)


def after_join(state: Any, client: PlatformClient, deadline: float) -> None:
    """At the end of a worker's join: say (in its ``errors``) when its run was finalized
    before its records landed, and bring the numbers up to date. Never raises."""
    until = min(deadline, time.monotonic() + WORKER_BUDGET)
    try:
        local = (data for _, _, data in state.archive.iter_records()) if state.archive else ()
        found = check(client, state.run_id, local, until)
    except Exception as exc:  # a worker's finish never fails on this check
        logger.info("prime-runs: could not check run %s for late records: %s", state.run_id, exc)
        return
    message = found.message(state.run_id) if found is not None else None
    if message is not None:
        state.counters.note_error(message)
        logger.warning("prime-runs: %s", message)

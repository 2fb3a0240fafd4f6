"""A retried task does not store its records twice: the record id is the idempotency key.

A task that crashed and is re-run (Ray's default retry, a restarted rank) logs the same
record ids again. When the retry runs on the same host with the same archive root, the
crashed attempt's journal is in the run folder it joins: the ids of records that attempt
already got stored (acknowledged by every sink of the join; offline: journaled, so
`prime-runs sync` delivers them) are read once, when this process first joins the run,
and a record logged again with one of them is counted as ``already_stored`` and not sent
again. Only segments of processes that are gone are read, so live workers sharing the
folder cost nothing. A retry on another host cannot see that journal: Prime Traces keeps
one document per id, the sample table may get a second row, and the run's finalized
numbers count the id once (``_coverage``); docs/distributed.md says how to avoid it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from prime_runs._journal.archive import RECORDS_DIR, RunArchive
from prime_runs._journal.liveness import pid_alive
from prime_runs._journal.nofollow import segment_paths
from prime_runs._records.encode import record_id
from prime_runs._records.lines import id_of_line

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")

#: Past this many bytes of dead segments the check is skipped (it runs at join time).
MAX_READ_BYTES = 256 * 1024 * 1024


def _dead(segment: str) -> bool:
    """``<kind>-<pid>-<nonce>.jsonl`` written by a process that has exited."""
    parts = segment.split("-")
    return len(parts) >= 3 and parts[1].isdigit() and not pid_alive(int(parts[1]))


def stored_ids(archive: RunArchive | None, sinks: Collection[str]) -> frozenset[str]:
    """Ids of records an exited process of this host already got stored for the run (see
    the module notes). Never raises: a folder it cannot read gives no ids."""
    if archive is None:
        return frozenset()
    try:
        dead = [p for p in segment_paths(archive.path / RECORDS_DIR) if _dead(p.name)]
        if not dead or sum(p.stat().st_size for p in dead) > MAX_READ_BYTES:
            return frozenset()
        names = {p.name for p in dead}
        acks = archive.acknowledged() if sinks else {}
        done = [acks.get(sink, set()) for sink in sinks]
        ids: set[str] = set()
        skip = {p.name for p in segment_paths(archive.path / RECORDS_DIR)} - names
        for key, _, data in archive.iter_records(skip=skip):
            if all(key in acked for acked in done):
                rid = id_of_line(data)
                if rid is not None:
                    ids.add(rid)
        return frozenset(ids)
    except (OSError, ValueError) as exc:
        logger.info("prime-runs: could not read earlier attempts' records: %s", exc)
        return frozenset()


def skip(state: RunState, record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is one an earlier attempt already stored: then it is counted in
    ``state.already_stored`` (said once now, and in the finish report) and not sent."""
    if record_id(record) not in state.stored_ids:
        return False
    with state.counters.lock:
        state.already_stored += 1
        first = state.already_stored == 1
    if first:
        logger.warning(
            "prime-runs: run %s: a record an earlier attempt of this task already stored "
            "was logged again (a retry); it is not sent twice (counted in the finish report)",
            state.run_id,
        )
    return True

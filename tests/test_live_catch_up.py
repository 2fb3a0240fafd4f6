"""A full span queue drops its oldest spans; the next live export delivers their records
(it claims what waits below its own newest record), so a burst reaches the platform while
the run goes on, not only at flush()/finish()."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs._journal.ledger import Ledger
from prime_runs.testing import StandInPlatform


def _stored_within(prime_env: StandInPlatform, run_id: str, count: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len(prime_env.episodes) >= count and len(prime_env.samples(run_id)) >= count:
            return True
        time.sleep(0.05)
    return False


def test_a_burst_larger_than_the_span_queue_is_delivered_live(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    records = burst(300)
    run = pr.init(name="live-burst", environments=["gsm8k"], model="m", framework="f")
    run.log_episodes(records)  # one call: the 8-span queues drop most of the spans
    # No flush: the live exports alone store every record.
    assert _stored_within(prime_env, run.id, len(records), 30.0)
    run.finish(timeout=60)
    assert run.archive_path is not None
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert status["sent_by_flush"] == {}  # finish() found nothing left to send
    assert status["acked"] == {"traces": 300, "eval_samples": 300}
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}
    rows = Counter(r["sample_id"] for r in prime_env.samples(run.id))
    assert rows == Counter(r["id"] for r in records)


def _ledger(n: int) -> Ledger:
    ledger = Ledger(["traces"], None)
    for i in range(n):
        ledger.add("episode", b'{"id":"r%d"}' % i, None, None, f"r{i}", None, sinks=["traces"])
    return ledger


def test_catching_up_claims_only_older_records_no_delivery_holds() -> None:
    ledger = _ledger(10)
    live = ledger.claim("traces", [2, 3])  # a live export holds these
    caught = ledger.claim_dropped("traces", 8)
    assert [i.ref for i in live] == [2, 3]
    assert [i.ref for i in caught] == [0, 1, 4, 5, 6, 7]  # not 2, 3 (held) nor 8, 9 (newer)
    assert ledger.claim_dropped("traces", 8) == []  # claimed once
    ledger.settle("traces", [*live, *caught])
    assert [i.ref for i in ledger.claim("traces")] == [8, 9]
    assert ledger.taken_over == {"traces": 2}  # caught-up records count as live, not flushed


def test_a_released_record_is_caught_up_again() -> None:
    ledger = _ledger(4)
    caught = ledger.claim_dropped("traces", 4)
    ledger.settle("traces", caught[1:])
    ledger.release("traces", caught[:1])  # a delivery gave it back (not stored yet)
    assert [i.ref for i in ledger.claim_dropped("traces", 4)] == [0]


def test_catching_up_respects_the_claim_limits() -> None:
    ledger = _ledger(10)
    first = ledger.claim_dropped("traces", 10, max_items=4)
    second = ledger.claim_dropped("traces", 10, max_items=4)
    assert [i.ref for i in first] == [0, 1, 2, 3] and [i.ref for i in second] == [4, 5, 6, 7]

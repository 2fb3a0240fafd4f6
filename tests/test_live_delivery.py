"""The sinks' workers take a run's records from its ledger while the run goes on: a burst
reaches the platform before flush()/finish(), and a worker's claims skip what another
delivery holds, take a released record again and keep to their limits."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs._journal.ledger import Ledger
from prime_runs._records.item import Item
from prime_runs.testing import StandInPlatform


def _stored_within(prime_env: StandInPlatform, run_id: str, count: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len(prime_env.episodes) >= count and len(prime_env.samples(run_id)) >= count:
            return True
        time.sleep(0.05)
    return False


def test_a_burst_is_delivered_while_the_run_goes_on(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    records = burst(300)
    run = pr.init(name="live-burst", environments=["gsm8k"], model="m", framework="f")
    run.log_episodes(records)
    # No flush: the workers alone store every record.
    assert _stored_within(prime_env, run.id, len(records), 30.0)
    run.finish(timeout=60)
    assert run.archive_path is not None
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert status["acked"] == {"traces": 300, "eval_samples": 300}
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}
    rows = Counter(r["sample_id"] for r in prime_env.samples(run.id))
    assert rows == Counter(r["id"] for r in records)


def _ledger(n: int) -> Ledger:
    ledger = Ledger(["traces"], None)
    for i in range(n):
        ledger.add(Item("episode", b'{"id":"r%d"}' % i, None, None, f"r{i}"), sinks=["traces"])
    return ledger


def test_a_steady_producer_is_served_a_batch_per_schedule_delay(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A record every millisecond, quicker than a request: a worker that went on claiming
    # while records came would send them in a trickle of a few a request.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "300")
    records = burst(400)
    run = pr.init(name="steady", environments=["gsm8k"], model="m", framework="f")
    started = time.monotonic()
    for record in records:
        run.log_episodes(record)
        time.sleep(0.001)
    assert _stored_within(prime_env, run.id, len(records), 30.0)  # no flush: the workers
    batches = len(prime_env.receipts)
    elapsed = time.monotonic() - started
    # About one batch per delay (a slow machine stretches the loop, and so the count).
    assert batches <= elapsed / 0.3 + 2, (batches, elapsed)
    run.finish(timeout=60)
    assert Counter(r["sample_id"] for r in prime_env.samples(run.id)) == Counter(
        r["id"] for r in records
    )


def test_a_workers_claim_skips_records_another_delivery_holds() -> None:
    ledger = _ledger(10)
    held = ledger.claim("traces", [2, 3])  # a user's exporter holds these
    taken = ledger.claim("traces", max_items=6)
    assert [i.ref for i in held] == [2, 3]
    assert [i.ref for i in taken] == [0, 1, 4, 5, 6, 7]  # not 2, 3 (held)
    assert ledger.claim("traces", [2, 3, 4]) == []  # claimed once
    ledger.settle("traces", [*held, *taken])
    assert [i.ref for i in ledger.claim("traces")] == [8, 9]


def test_a_released_record_is_claimed_again() -> None:
    ledger = _ledger(4)
    taken = ledger.claim("traces")
    ledger.settle("traces", taken[1:])
    ledger.release("traces", taken[:1])  # a delivery gave it back (not stored yet)
    assert [i.ref for i in ledger.claim("traces")] == [0]
    assert ledger.waiting("traces") == 1


def test_a_workers_claims_keep_to_their_limits() -> None:
    ledger = _ledger(10)
    first = ledger.claim("traces", max_items=4)
    second = ledger.claim("traces", max_items=4)
    assert [i.ref for i in first] == [0, 1, 2, 3] and [i.ref for i in second] == [4, 5, 6, 7]

"""Records the live queue dropped during the run are sent from the journal (by the live
exports catching up, or at finish)."""

from __future__ import annotations

import prime_runs as pr
import prime_runs._journal.ledger as _ledger


def test_full_queue_drops_are_recovered_at_finish(prime_env, episodes, monkeypatch):
    # A 2-span BatchSpanProcessor queue and 2 payloads in memory: the rest is read back
    # from the journal at finish.
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 2)
    run = pr.init(name="r", environments=["e"], model="m", framework="f")
    prime_env.stall(None, 30)  # nothing is acknowledged while we log
    run.log_episodes(episodes)
    assert len(prime_env.episodes) == 0
    prime_env.unstall()
    run.finish(timeout=60)
    assert run.dropped_records == 0
    assert run.failed_records == {}
    assert run.acknowledged_records == {"traces": len(episodes), "eval_samples": len(episodes)}
    assert set(prime_env.episodes) == {e["id"] for e in episodes}
    assert all(n == 1 for n in prime_env.trace_writes.values())
    rows = prime_env.samples(run.id)
    assert sorted(r["sample_id"] for r in rows) == sorted(e["id"] for e in episodes)


def test_without_a_journal_drops_stay_dropped(prime_env, episodes, monkeypatch):
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS", 2)
    run = pr.init(name="r", environments=["e"], model="m", framework="f", journal=False)
    prime_env.stall(None, 30)
    run.log_episodes(episodes)
    dropped = run.dropped_records
    assert dropped > 0
    prime_env.unstall()
    run.finish(timeout=60)
    assert run.dropped_records == dropped
    lost_for_traces = dropped + run.failed_records.get("traces", 0)
    assert len(prime_env.episodes) == len(episodes) - lost_for_traces
    lost_for_samples = dropped + run.failed_records.get("eval_samples", 0)
    assert len(prime_env.samples(run.id)) == len(episodes) - lost_for_samples

"""The exporters' delivery step is the one path: a live run (under BatchSpanProcessor,
then flush/finish) and ``prime-runs sync`` hand records to the sinks only through
``Channel.deliver``, and both behave the same on a rejected record (split out) and on an
ambiguous append that landed (read back, never stored twice)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import prime_runs as pr
import prime_runs._journal.ledger as _ledger
from prime_runs._records.item import Outcome
from prime_runs.cli import main
from prime_runs.exporters import _channel
from prime_runs.exporters.samples import SamplesSink
from prime_runs.exporters.traces import TracesSink
from prime_runs.platform import evaluations, retry
from prime_runs.testing import StandInPlatform

MODES = ("live", "sync")


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(retry, "RESEND_FIRST", 0.005)
    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.0)
    evaluations._reset_variant_cache()
    yield
    evaluations._reset_variant_cache()


def _run(mode: str, records: list[dict[str, Any]]) -> pr.Run:
    run = pr.init(
        name="shared",
        environments=["gsm8k"],
        model="m",
        framework="f",
        mode="online" if mode == "live" else "offline",
    )
    run.log_episodes(records)
    run.finish(timeout=60)
    return run


def _eval_id(p: StandInPlatform) -> str:
    (eval_id,) = p.evaluations
    return eval_id


def test_live_delivery_and_sync_hand_records_to_sinks_only_through_the_channel(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = threading.local()
    delivered: list[str] = []
    outside: list[str] = []
    original = _channel.Channel.deliver

    def deliver(self: _channel.Channel, items: Any, deadline: Any = None) -> Outcome:
        inside.on = True
        try:
            return original(self, items, deadline)
        finally:
            inside.on = False

    def watch(cls: Any) -> None:
        export = cls.export

        def wrapped(self: Any, items: Any, deadline: Any) -> Outcome:
            (delivered if getattr(inside, "on", False) else outside).extend(
                f"{self.name}:{i.record_id}" for i in items
            )
            return export(self, items, deadline)

        monkeypatch.setattr(cls, "export", wrapped)

    monkeypatch.setattr(_channel.Channel, "deliver", deliver)
    watch(TracesSink)
    watch(SamplesSink)
    ids = {e["id"] for e in episodes}

    live = _run("live", episodes)
    assert live.acknowledged_records == {"traces": len(ids), "eval_samples": len(ids)}
    assert {d.split(":", 1)[1] for d in delivered} == ids
    delivered.clear()

    _run("sync", episodes)
    assert main(["sync"]) == 0
    assert {d for d in delivered if d.startswith("traces:")} == {f"traces:{i}" for i in ids}
    assert {d for d in delivered if d.startswith("eval_samples:")} == {
        f"eval_samples:{i}" for i in ids
    }
    assert outside == []  # no path of its own to the sinks


@pytest.mark.parametrize("mode", MODES)
def test_a_rejected_record_is_split_out_live_and_in_sync(
    mode: str, prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    bad = episodes[3]
    prime_env.reject_trace_ids([bad["id"]], code="created_at_out_of_window")
    _run(mode, episodes)
    if mode == "sync":
        assert main(["sync"]) != 0  # the rejected record is reported
    assert set(prime_env.episodes) == {e["id"] for e in episodes} - {bad["id"]}
    assert all(n == 1 for n in prime_env.episode_writes.values())
    rows = Counter(r["sample_id"] for r in prime_env.samples(_eval_id(prime_env)))
    assert rows == Counter(e["id"] for e in episodes)


@pytest.mark.parametrize("mode", MODES)
def test_an_ambiguous_append_that_landed_is_read_back_not_resent_live_and_in_sync(
    mode: str, prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    prime_env.fail("samples_append", 503, after_processing=True)
    _run(mode, episodes)
    if mode == "sync":
        main(["sync"])  # the answer is lost; whether it retried or stopped, nothing doubles
        assert main(["sync"]) == 0
    rows = Counter(r["sample_id"] for r in prime_env.samples(_eval_id(prime_env)))
    assert rows == Counter(e["id"] for e in episodes)
    assert len(prime_env.episodes) == len(episodes)


def test_a_tiny_batch_queue_under_a_burst_delivers_every_record_from_the_journal(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 16)  # the rest: journal only
    records = burst(500)
    run = pr.init(name="burst", environments=["gsm8k"], model="m", framework="f")
    prime_env.stall(None, 30)  # the first exports hang: the 4-span queues overflow
    try:
        run.log_episodes(records)
    finally:
        prime_env.unstall()
    run.finish(timeout=120)
    assert run.acknowledged_records == {"traces": 500, "eval_samples": 500}
    assert run.dropped_records == 0 and run.failed_records == {}
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}
    rows = Counter(r["sample_id"] for r in prime_env.samples(run.id))
    assert rows == Counter(r["id"] for r in records)
    # The queues dropped most spans: those records came back from the journal, through the
    # live exports' catch-up or finish() (which of the two is a race; either sends each once).

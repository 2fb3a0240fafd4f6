"""finish() delivers through the sinks' own workers: records a worker was still letting
fill into a batch (a ten-minute OTEL_BSP_SCHEDULE_DELAY) are sent at once, each once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

import prime_runs as pr
from _support import run_status
from prime_runs.testing import StandInPlatform


def test_finish_rushes_the_workers_past_their_schedule_delay(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    records = burst(60)
    run = pr.init(name="rushed", environments=["gsm8k"], model="m", framework="f")
    threads = threading.active_count()
    run.log_episodes(records)
    assert prime_env.episode_writes == {}  # the workers are letting the batch fill
    run.finish(timeout=120)
    assert threading.active_count() <= threads + 2  # at most a worker per sink, no drain threads
    status = run_status(run)
    assert status["acked"] == {"traces": 60, "eval_samples": 60}
    assert status["failed"] == {} and status["dropped"] == 0
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}
    assert Counter(r["sample_id"] for r in prime_env.samples(run.id)) == Counter(
        r["id"] for r in records
    )

"""status.json counts, per sink, the records flush()/finish() sent because the live upload
queue dropped them or had not sent them (issue 10): informational, not a loss."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
from prime_runs.testing import StandInPlatform


def _status(run: pr.Run) -> dict[str, Any]:
    assert run.archive_path is not None
    return json.loads((Path(run.archive_path) / "status.json").read_text())


def test_status_json_counts_what_flush_sent_because_the_live_queue_dropped_it(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    records = burst(60)
    run = pr.init(name="short-queue", environments=["gsm8k"], model="m", framework="f")
    prime_env.stall(None, 30)  # the first exports hang: the one-span queues overflow
    try:
        run.log_episodes(records)
    finally:
        prime_env.unstall()
    run.finish(timeout=120)
    status = _status(run)
    sent_by_flush = status["sent_by_flush"]
    assert set(sent_by_flush) <= {"traces", "eval_samples"}
    assert sent_by_flush and all(0 < n <= len(records) for n in sent_by_flush.values())
    # Nothing was lost and nothing stored twice.
    assert status["acked"] == {"traces": 60, "eval_samples": 60}
    assert status["failed"] == {} and status["dropped"] == 0
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}
    assert Counter(r["sample_id"] for r in prime_env.samples(run.id)) == Counter(
        r["id"] for r in records
    )


def test_status_json_starts_with_nothing_sent_by_flush(episodes: list[dict[str, Any]]) -> None:
    run = pr.init(name="fresh", environments=[{"id": "env-1"}], mode="offline")
    assert _status(run)["sent_by_flush"] == {}
    run.log_episodes(episodes[:2])
    run.finish()
    assert _status(run)["sent_by_flush"] == {}  # offline: no live queue

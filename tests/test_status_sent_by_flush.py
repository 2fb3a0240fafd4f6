"""status.json counts, per sink, the records flush()/finish() sent because no live export
had sent them (issue 10): informational, not a loss."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import prime_runs as pr
from _support import run_status
from prime_runs.testing import StandInPlatform


def test_status_json_counts_what_flush_sent_because_no_live_export_had(
    prime_env: StandInPlatform, burst: Callable[[int], list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The live processors would export after ten minutes or 2,048 spans: not in this run.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    records = burst(60)
    run = pr.init(name="no-live-export", environments=["gsm8k"], model="m", framework="f")
    run.log_episodes(records)
    run.finish(timeout=120)
    status = run_status(run)
    assert status["sent_by_flush"] == {"traces": 60, "eval_samples": 60}
    # Nothing was lost and nothing stored twice.
    assert status["acked"] == {"traces": 60, "eval_samples": 60}
    assert status["failed"] == {} and status["dropped"] == 0
    assert prime_env.episode_writes == {r["id"]: 1 for r in records}
    assert Counter(r["sample_id"] for r in prime_env.samples(run.id)) == Counter(
        r["id"] for r in records
    )


def test_status_json_starts_with_nothing_sent_by_flush(episodes: list[dict[str, Any]]) -> None:
    run = pr.init(name="fresh", environments=[{"id": "env-1"}], mode="offline")
    assert run_status(run)["sent_by_flush"] == {}
    run.log_episodes(episodes[:2])
    run.finish()
    assert run_status(run)["sent_by_flush"] == {}  # offline: no live queue

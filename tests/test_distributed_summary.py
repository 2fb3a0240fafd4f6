"""The owner's finalized numbers cover every worker's records, wherever they journal:
workers in processes of their own, each with an archive root of its own (another disk,
another host), against the stand-in over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import _workers
import prime_runs as pr
import prime_runs._runs.coverage as _coverage
from _workers import WORKER, episode
from prime_runs.platform._http import PlatformClient
from prime_runs.settings import Settings
from prime_runs.testing import StandInPlatform


def run_worker(run: pr.Run, root: Path, tag: str, rewards: list[float]) -> list[str]:
    """A worker on "another node": its own archive root, joined through the carrier."""
    return _workers.run_worker(run.context(), tag, rewards, root=root, length=True)


def finalized(platform: StandInPlatform) -> dict[str, object]:
    (request,) = platform.requests_for("eval_finalize")
    return request.json["metrics"]


def test_owner_summary_covers_workers_on_other_disks(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="dist", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0, length=True) for i in range(4)])
    run_worker(owner, tmp_path / "node-a", "a", [0.0] * 6)
    run_worker(owner, tmp_path / "node-b", "b", [0.0, 1.0])
    owner.finish()

    metrics = finalized(prime_env)
    # 12 records: 5 rewarded 1.0; the owner's own archive holds only 4 of them.
    assert metrics["avg_reward"] == 5 / 12
    assert metrics["avg_metrics"] == {"correct": 5 / 12, "len": 10 / 12}
    assert metrics["avg_error"] == 0.0
    assert metrics["prime_runs"] == {"traces_episodes_written": 12, "records_summarized": 12}
    assert len(prime_env.requests_for("eval_create")) == 1
    assert len(prime_env.episodes) == 12
    assert owner.errors == []


def test_owner_that_logged_nothing_still_finalizes_the_workers_numbers(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="driver-only", environments=["gsm8k"])
    run_worker(owner, tmp_path / "node-a", "a", [0.0, 1.0, 1.0, 0.0])
    owner.finish()
    metrics = finalized(prime_env)
    assert metrics["avg_reward"] == 0.5
    assert metrics["avg_metrics"] == {"correct": 0.5, "len": 1.0}
    assert metrics["prime_runs"] == {"traces_episodes_written": 4, "records_summarized": 4}


def test_a_retried_worker_counts_its_records_once(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="retried", environments=["gsm8k"])
    # The same task ran twice (a crash and a retry) on two nodes: same record ids.
    run_worker(owner, tmp_path / "node-a", "task", [1.0, 1.0, 1.0])
    run_worker(owner, tmp_path / "node-b", "task", [1.0, 1.0, 1.0])
    run_worker(owner, tmp_path / "node-c", "other", [0.0])
    owner.finish()
    metrics = finalized(prime_env)
    assert metrics["avg_reward"] == 0.75  # 4 distinct records, not 7 rows
    assert metrics["prime_runs"] == {"traces_episodes_written": 4, "records_summarized": 4}


def test_unreadable_platform_keeps_the_local_summary_and_says_so(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="write-only", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0, length=True) for i in range(2)])
    run_worker(owner, tmp_path / "node-a", "a", [0.0, 0.0])
    prime_env.fail("samples_list", 403, times=5)  # a write-only hosted token
    owner.finish()
    metrics = finalized(prime_env)
    assert metrics["avg_reward"] == 1.0  # only what this host could see
    # Only the local records are counted as summarized: a later sync can tell the rest.
    assert metrics["prime_runs"] == {"traces_episodes_written": 2, "records_summarized": 2}
    (message,) = owner.errors
    assert "covers only the records in" in message and "could not be read" in message
    assert owner.archive_path is not None and owner.archive_path in message


def test_explicit_summary_wins_and_reads_nothing(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="explicit", environments=["gsm8k"])
    run_worker(owner, tmp_path / "node-a", "a", [0.0])
    owner.finish(summary={"avg_reward": 0.25})
    assert finalized(prime_env)["avg_reward"] == 0.25
    # No rows read back: only the row counts the sample sink reads before its appends.
    listed = prime_env.requests_for("samples_list")
    assert [r.query["limit"] for r in listed] == ["1"] * len(listed)


def test_stored_rows_pages_by_weight_and_reads_every_row_once(
    prime_platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    eval_id = prime_platform.add_evaluation("ev-paged")
    small = [{"sample_id": f"s-{i}", "reward": 1.0} for i in range(150)]
    big = [{"sample_id": f"b-{i}", "blob": "x" * 40_000} for i in range(10)]
    settings = Settings.resolve(api_key=prime_platform.api_key, base_url=prime_platform.base_url)
    with PlatformClient(settings) as client:
        client.request(
            "POST",
            f"/evaluations/{eval_id}/samples",
            json={"samples": small[:40] + big + small[40:]},
            idempotent=False,
        )
        monkeypatch.setattr(_coverage, "PAGE_BYTES", 100_000)  # two big rows a page
        rows = list(_coverage.stored_rows(client, eval_id, time.monotonic() + 60))
    stored = small[:40] + big + small[40:]
    assert [r["sample_id"] for r in rows] == [r["sample_id"] for r in stored]
    limits = [int(r.query["limit"]) for r in prime_platform.requests_for("samples_list")]
    assert limits[0] == _coverage.FIRST_PAGE and max(limits) == _coverage.PAGE_SIZE
    assert 2 in limits  # shrank to the weight of the big rows, then grew back
    assert limits[-1] > 2


def test_without_the_sample_table_the_owner_says_what_its_numbers_cover(
    prime_env: StandInPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    owner = pr.init(name="no-samples", environments=["gsm8k"], samples=False)
    owner.log_episodes([episode("owner", i, 1.0, length=True) for i in range(2)])
    with caplog.at_level("INFO", logger="prime_runs"):
        owner.finish()
    assert finalized(prime_env)["avg_reward"] == 1.0
    assert owner.errors == []  # a run nobody joined has nothing missing
    assert "does not write the sample table (samples=False)" in caplog.text


CRASHING_OWNER = r"""
import json, os, subprocess, sys
import prime_runs as pr

worker, node, episodes = sys.argv[1], sys.argv[2], sys.argv[3]
run = pr.init(name="crashed-driver", environments=["gsm8k"])
run.log_episodes([{"id": f"ep-owner-{i}", "env": {"id": "gsm8k"}, "ok": True, "errors": [],
                   "traces": [{"id": f"tr-owner-{i}", "rewards": {"correct": {"score": 1.0}},
                               "timing": {"start": 1.0}}]} for i in range(2)])
run.flush()
env = {**os.environ, "PRIME_RUNS_DIR": node}
subprocess.run([sys.executable, "-c", worker, json.dumps(run.context()), episodes],
               env=env, check=True)
print(run.id, flush=True)
os._exit(1)  # the driver dies without finishing
"""


def test_sync_of_a_crashed_driver_covers_the_workers_on_other_disks(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner_root = tmp_path / "driver"
    shard = json.dumps([episode("w", i, 0.0, length=True) for i in range(2)])
    env = {**os.environ, "PRIME_RUNS_DIR": str(owner_root)}
    proc = subprocess.run(
        [sys.executable, "-c", CRASHING_OWNER, WORKER, str(tmp_path / "node"), shard],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    run_id = proc.stdout.split()[-1]
    assert prime_env.requests_for("eval_finalize") == []
    synced = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "sync"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert synced.returncode == 0, synced.stdout + synced.stderr
    evaluation = prime_env.evaluations[run_id]
    assert evaluation["status"] == "FAILED"  # crashed, as variant N stores it
    assert "exited without finishing" in evaluation["error_message"]
    assert evaluation["metrics"]["avg_reward"] == 0.5  # 2 of the driver's, 2 a worker's
    assert evaluation["metrics"]["prime_runs"]["records_summarized"] == 4

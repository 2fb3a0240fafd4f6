"""An episode of a training step on the table's cadence that never produced a message (no
``nodes``: no trajectory) has no row in the sample table: no sink counts it as stored,
whether the live sink or `prime-runs sync` sends the table, and a step with no such row
sends no object at all. Against the stand-in over HTTP."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

import prime_runs as pr
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import TRAIN_SAMPLES, inspect
from prime_runs.testing import StandInPlatform

# (dispatch step, has a trajectory): 10 has one episode with a row, 20 none at all.
EPISODES = ((0, True), (10, True), (10, False), (10, False), (20, False), (20, False))
ROWED = sum(1 for step, messages in EPISODES if messages)


def _records(episodes: list[dict], tag: str) -> list[dict]:
    out = []
    for n, (step, messages) in enumerate(EPISODES):
        record = copy.deepcopy(episodes[n % len(episodes)])
        record["id"] = f"{tag}-{n}"
        for member in record["traces"]:
            member["id"] = f"{tag}-{n}-{member['id']}"
            if not messages:  # as an episode that failed before any model call
                member["nodes"], member["calls"] = [], []
        record["run"] = {"work": {"type": "train", "step": step}}
        out.append(record)
    return out


def _init(**kw: object) -> pr.Run:
    return pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=21),
        **kw,  # type: ignore[arg-type]
    )


def _rows(platform: StandInPlatform, run_id: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for confirmed in platform.training_samples(run_id):
        table = pq.read_table(io.BytesIO(platform.object_bytes(confirmed["s3_key"])))
        out[confirmed["step"]] = out.get(confirmed["step"], 0) + table.num_rows
    return out


def test_the_live_sink_counts_only_episodes_with_a_row(prime_env, episodes) -> None:
    run = _init()
    records = _records(episodes, "live")
    for step in sorted({s for s, _ in EPISODES}):
        run.log_episodes([r for r in records if r["run"]["work"]["step"] == step])
        assert run.flush(30)
    run.finish()

    assert _rows(prime_env, run.id) == {0: 1, 10: 1}
    assert run.acknowledged_records[TRAIN_SAMPLES] == ROWED
    presigned = [r.json["step"] for r in prime_env.requests_for("rft_presign")]
    assert 20 not in presigned  # nothing to store: no request
    info = inspect(RunArchive(Path(str(run.archive_path))))
    assert info.pending.get(TRAIN_SAMPLES, 0) == 0


def test_sync_counts_only_episodes_with_a_row(prime_env, episodes) -> None:
    run = _init(mode="offline")
    run.log_episodes(_records(episodes, "off"))
    run.finish()

    done = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "sync", run.id],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    ((run_id, _),) = prime_env.training_runs.items()
    assert _rows(prime_env, run_id) == {0: 1, 10: 1}
    assert f"{ROWED} sample-table episodes" in done.stdout
    archive = RunArchive(Path(str(run.archive_path)))
    assert len(archive.acknowledged()[TRAIN_SAMPLES]) == ROWED
    assert inspect(archive).pending.get(TRAIN_SAMPLES) == 0

"""`prime-runs ls` and `prime-runs show` of a training run, as a person training a model
reads them: the kind, the TrainingSpec, the steps and each metric's last value, min, max
and trend, the episodes by dispatch step and policy, and a sample-table count that is
what `prime-runs sync` then stores (checked against the stand-in over HTTP)."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys

import pyarrow.parquet as pq

import prime_runs as pr
from _training_loop import STEPS, train_offline
from prime_runs.testing import StandInPlatform


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _field(text: str, label: str) -> str:
    found = re.search(rf"^  {re.escape(label)}:\s+(.*)$", text, re.M)
    assert found, (label, text)
    return found[1]


def test_ls_marks_training_runs(prime_env: StandInPlatform, episodes: list[dict]) -> None:
    training = train_offline(episodes)
    evaluation = pr.init(name="an-eval", environments=["gsm8k"], mode="offline")
    evaluation.log_episodes(episodes[:2])
    evaluation.finish()

    listed = _cli("ls")

    assert listed.returncode == 0, listed.stderr
    header, *lines = listed.stdout.splitlines()
    kind = header.split().index("KIND")
    rows = {line.split()[0]: line.split() for line in lines}
    assert rows[training.id][kind] == "train" and rows[evaluation.id][kind] == "eval"
    # ls reads no record: what the sample table owes is a bound, and says so.
    assert "up to 60 sample-table episodes" in listed.stdout


def test_show_gives_the_spec_steps_metrics_and_their_trends(
    prime_env: StandInPlatform, episodes: list[dict]
) -> None:
    run = train_offline(episodes)

    shown = _cli("show", run.id)

    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert _field(text, "kind") == "training"
    assert _field(text, "training") == "max_steps=30 batch_size=8 rollouts_per_example=2"
    assert _field(text, "steps").startswith(f"{STEPS} logged (steps 0 to {STEPS - 1})")
    loss = next(line for line in text.splitlines() if line.strip().startswith("loss "))
    assert f"last {2.0 * math.exp(-(STEPS - 1) / 8):.4g} (step {STEPS - 1})" in loss
    assert "min " in loss and "max 2 " in loss
    trend = loss.split()[-1]
    assert len(trend) == 24 and trend[0] == "█" and trend[-1] == "▁"  # falling
    mean = next(line for line in text.splitlines() if line.strip().startswith("reward/mean"))
    assert mean.split()[-1][0] == "▁" and mean.split()[-1][-1] == "█"  # rising, nested name
    by_step = _field(text, "by step")
    assert f"{STEPS} dispatch steps (0 to {STEPS - 1})" in by_step
    assert "30 on-policy" in by_step and "30 off-policy (lag 1 step)" in by_step


def test_shows_table_count_is_what_sync_stores(
    prime_env: StandInPlatform, episodes: list[dict]
) -> None:
    run = train_offline(episodes)
    # Steps 0, 10 and 20 are on the cadence; their second episode has no conversation.
    text = _cli("show", run.id).stdout
    assert "3 sample-table episodes" in _field(text, "pending")
    table = _field(text, "sample table")
    assert table.startswith("3 pending episodes get a row")
    assert "54 off the 10-step cadence" in table and "3 without a conversation" in table

    synced = _cli("sync", run.id)

    assert synced.returncode == 0, synced.stdout + synced.stderr
    ((run_id, _),) = prime_env.training_runs.items()
    stored = sum(
        pq.read_table(io.BytesIO(prime_env.object_bytes(c["s3_key"]))).num_rows
        for c in prime_env.training_samples(run_id)
    )
    assert stored == 3
    assert "3 sample-table episodes" in synced.stdout
    after = _cli("show", run.id).stdout
    assert _field(after, "pending") == "-"


def test_a_step_logged_twice_shows_its_last_value_and_a_row_without_a_step_is_counted(
    prime_env: StandInPlatform,
) -> None:
    run = pr.init(kind="train", model="m", team_id="team-1", mode="offline")
    run.log_metrics({"loss": 3.0}, step=0)
    run.log_metrics({"loss": 2.0}, step=1)
    run.log_metrics({"loss": 1.5}, step=1)  # the platform keeps one row per step: this one
    run.log_metrics({"loss": 9.0, "note": "text is not charted"})  # no step
    run.finish()

    text = _cli("show", run.id).stdout

    assert (
        _field(text, "steps")
        == "2 logged (steps 0 to 1); 4 metrics rows, 1 without a step (not charted)"
    )
    loss = next(line for line in text.splitlines() if line.strip().startswith("loss "))
    assert "last 1.5 (step 1)" in loss and "min 1.5" in loss and "max 3 " in loss
    assert "note" not in text.split("  steps:")[1]

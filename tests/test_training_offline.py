"""An offline training run is checked at ``init()`` against what `prime-runs sync` will need
to register it: no model is the error the run gets online; no team is a warning naming the
flag sync takes it from. `prime-runs sync --model/--team-id` supplies what run.json lacks,
against the stand-in over HTTP, as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.testing import StandInPlatform


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _offline(**kw: object) -> pr.Run:
    return pr.init(kind="train", mode="offline", training=pr.TrainingSpec(max_steps=2), **kw)


def test_an_offline_training_run_without_a_model_gets_the_error_it_would_get_online(
    prime_env: StandInPlatform,
) -> None:
    with pytest.raises(pr.ConfigurationError) as online:
        pr.init(kind="train", team_id="team-1")
    with pytest.raises(pr.ConfigurationError) as offline:
        _offline(team_id="team-1")
    assert str(offline.value) == str(online.value)
    assert "needs model=" in str(offline.value)
    assert prime_env.training_runs == {}
    assert not any(Path(os.environ["PRIME_RUNS_DIR"]).iterdir())  # no run folder left behind


def test_no_team_warns_at_init_and_sync_takes_it_as_a_flag(
    prime_env: StandInPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="prime_runs"):
        run = _offline(model="Qwen/Qwen3-4B", name="no-team")
    (warning,) = [r.getMessage() for r in caplog.records if "has no team" in r.getMessage()]
    assert f"prime-runs sync --team-id TEAM {run.id}" in warning and "PRIME_TEAM_ID" in warning
    run.log_metrics({"loss": 1.0}, step=0)
    run.finish()

    refused = _cli("sync", run.id)
    assert refused.returncode == 1
    assert f"prime-runs sync --team-id TEAM {run.id}" in refused.stdout
    assert prime_env.requests_for("rft_register") == []  # checked before any request

    synced = _cli("sync", "--team-id", "team-7", run.id)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    ((run_id, stored),) = prime_env.training_runs.items()
    assert stored["team_id"] == "team-7" and stored["status"] == "completed"
    assert [r["step"] for r in prime_env.training_metrics(run_id)] == [0]
    described = json.loads((Path(str(run.archive_path)) / "run.json").read_text())
    assert described["team_id"] == "team-7"  # a rerun registers with the same


def test_sync_takes_the_model_a_run_json_lacks(prime_env: StandInPlatform) -> None:
    run = _offline(model="Qwen/Qwen3-4B", team_id="team-1")
    run.finish()
    path = Path(str(run.archive_path)) / "run.json"
    described = json.loads(path.read_text())
    path.write_text(json.dumps(dict(described, model=None)))  # as an older version wrote it

    refused = _cli("sync", run.id)
    assert refused.returncode == 1
    assert f"prime-runs sync --model MODEL {run.id}" in refused.stdout

    synced = _cli("sync", "--model", "Qwen/Qwen3-8B", "--environment", "gsm8k", run.id)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    ((_, stored),) = prime_env.training_runs.items()
    assert stored["base_model"] == "Qwen/Qwen3-8B"
    assert stored["environments"] == [{"id": "gsm8k"}]


def test_a_value_run_json_has_is_kept_and_flags_need_their_runs(
    prime_env: StandInPlatform,
) -> None:
    run = _offline(model="Qwen/Qwen3-4B", team_id="team-1")
    run.finish()
    assert _cli("sync", "--team-id", "team-9").returncode == 2  # no RUN named
    synced = _cli("sync", "--team-id", "team-9", "--model", "other", run.id)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    ((_, stored),) = prime_env.training_runs.items()
    assert (stored["team_id"], stored["base_model"]) == ("team-1", "Qwen/Qwen3-4B")

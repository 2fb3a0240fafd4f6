"""A run is finalized only when everything it logged is stored: a deadline (or a sink that
keeps failing) leaves it open, the finish report and `prime-runs ls`/`show` say what is
pending, and `prime-runs sync` delivers it, then closes the run with the producer's status.
Against the stand-in over HTTP."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import TRAIN_SAMPLES, inspect
from prime_runs.cli import main
from prime_runs.testing import StandInPlatform

TABLE_ROUTES = ("rft_presign", "object_put", "rft_confirm")
CLOSING_ROUTES = ("rft_finalize", "rft_status")


def at_step(episode: dict, step: int, tag: str) -> dict:
    record = copy.deepcopy(episode)
    record["id"] = f"{tag}-{record['id']}"
    for member in record["traces"]:
        member["id"] = f"{tag}-{member['id']}"
    record["run"] = {"name": "rl", "work": {"type": "train", "step": step}}
    return record


def train(episodes: list[dict], steps: int = 11) -> pr.Run:
    """An 11-step training loop: steps 0 and 10 are on the table's cadence (2 objects)."""
    run = pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=steps),
    )
    for step in range(steps):
        run.log_episodes([at_step(episodes[step % 10], step, f"s{step}")])  # all with trajectories
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    return run


def routes_after_close(platform: StandInPlatform) -> list[str]:
    """The routes requested after the run's first close (finalize or status)."""
    routes = [r.route for r in platform.requests]
    closes = [i for i, r in enumerate(routes) if r in CLOSING_ROUTES]
    return routes[closes[0] + 1 :] if closes else []


@pytest.mark.parametrize(
    "fault",
    ["outage", "stall_put", "stall_presign"],
)
def test_a_training_run_whose_table_is_not_stored_is_left_open_then_synced(
    prime_env: StandInPlatform,
    episodes: list[dict],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    fault: str,
) -> None:
    if fault == "outage":
        prime_env.outage(503, routes=["object_put"])
    elif fault == "stall_put":
        prime_env.stall("object_put", 30)
    else:
        prime_env.stall("rft_presign", 30)
    run = train(episodes)
    run.finish(timeout=3)

    stored = prime_env.training_runs[run.id]
    assert stored["status"] == "running"  # not finalized with its table unsent
    assert prime_env.requests_for("rft_finalize") == []
    assert prime_env.training_samples(run.id) == []
    folder = Path(str(run.archive_path))
    info = inspect(RunArchive(folder))
    # The two episodes of the table's steps, and (a batch cut short) those not yet settled.
    owed = info.pending[TRAIN_SAMPLES]
    assert owed >= 2 and info.needs_close
    said = " ".join(run.errors)
    assert f"left open on the platform: {owed} sample-table episodes" in said
    assert any("left open" in r.getMessage() for r in caplog.records)
    capsys.readouterr()
    assert main(["ls"]) == 0
    assert f"{owed} sample-table episodes, close" in capsys.readouterr().out

    prime_env.unstall()
    prime_env.recover()
    # The held requests are handled now (stored, though their client gave up): sync finds
    # what they stored rather than store it again.
    settled = time.monotonic() + 30
    while any(r.status is None for r in prime_env.requests):
        assert time.monotonic() < settled, "the stand-in never answered its held requests"
        time.sleep(0.01)
    assert main(["sync"]) == 0

    assert sorted(c["step"] for c in prime_env.training_samples(run.id)) == [0, 10]
    assert prime_env.training_runs[run.id]["status"] == "completed"
    assert routes_after_close(prime_env) == []  # nothing reached the run once closed
    assert inspect(RunArchive(folder)).pending_text() == "-"


EVAL_WRITES = ("samples_append", "traces_upload", "eval_update")


def eval_routes_after_close(platform: StandInPlatform) -> list[str]:
    routes = [r.route for r in platform.requests if r.status is not None and r.status < 300]
    closes = [i for i, r in enumerate(routes) if r in ("eval_finalize",)]
    return [r for r in routes[closes[0] + 1 :] if r in EVAL_WRITES] if closes else []


@pytest.mark.parametrize("fault", ["stall", "outage"])
@pytest.mark.parametrize("status", ["completed", "failed"])
def test_an_eval_run_whose_sinks_did_not_store_everything_is_left_open_then_synced(
    prime_env: StandInPlatform,
    burst,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    status: str,
) -> None:
    if fault == "outage":
        # A 503 leaves an append in doubt: its request may still be stored until its
        # timeout, and sync waits that long before it resends (tests/test_batch_notes.py).
        # Here the failed requests store nothing, so the window is cut to nothing.
        monkeypatch.setenv("PRIME_RUNS_INFLIGHT_WINDOW", "0")
    run = pr.init(name="open", environments=[{"id": "env-1"}])
    if fault == "stall":
        prime_env.stall(None, 30)  # every request from here on is held
    else:
        prime_env.outage(503, routes=["samples_append", "traces_upload"])
    run.log_episodes(burst(12))
    run.finish(status=status, timeout=6)

    evaluation = prime_env.evaluations[run.id]
    assert evaluation["status"] == "RUNNING"
    assert prime_env.requests_for("eval_finalize") == []
    assert not [r for r in prime_env.requests_for("eval_update") if r.status == 200]
    said = " ".join(run.errors)
    assert "left open on the platform: 12 traces, 12 samples" in said
    then = "finalizes it" if status == "completed" else "closes it as failed"
    assert then in said
    folder = Path(str(run.archive_path))
    info = inspect(RunArchive(folder))
    assert info.pending_text() == "12 traces, 12 samples, close"
    assert info.status_doc["left_open"] == {"eval_samples": 12, "traces": 12}
    capsys.readouterr()
    assert main(["show", run.id]) == 0
    shown = capsys.readouterr().out
    assert "left open by finish(): 12 traces, 12 samples were not stored" in shown

    prime_env.unstall()
    prime_env.recover()
    # The held requests are handled now (stored, though their client gave up): sync finds
    # what they stored rather than store it again.
    settled = time.monotonic() + 30
    while any(r.status is None for r in prime_env.requests):
        assert time.monotonic() < settled, "the stand-in never answered its held requests"
        time.sleep(0.01)
    assert main(["sync"]) == 0

    evaluation = prime_env.evaluations[run.id]
    # Every record stored, once.
    assert sorted(s["sample_id"] for s in prime_env.samples(run.id)) == sorted(
        {s["sample_id"] for s in prime_env.samples(run.id)}
    )
    assert len(prime_env.samples(run.id)) == 12
    assert len(prime_env.episodes) == 12
    if status == "completed":
        assert len(prime_env.requests_for("eval_finalize")) == 1
        assert eval_routes_after_close(prime_env) == []
    else:
        assert evaluation["status"] == "FAILED"
        assert prime_env.requests_for("eval_finalize") == []
    assert inspect(RunArchive(folder)).pending_text() == "-"

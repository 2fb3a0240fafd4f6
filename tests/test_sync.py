"""``prime-runs sync`` against the stand-in: offline runs registered once and uploaded once
(even when a sync is killed midway and rerun), failed and crashed runs closed as such, and
an online run's unacknowledged remainder uploaded after an outage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import _archives
import prime_runs as pr
from _support import cli_command, run_cli
from prime_runs.cli import main
from prime_runs.platform import evaluations
from prime_runs.settings import INFLIGHT_WINDOW_ENV

UPLOAD_ROUTES = ("eval_create", "traces_upload", "samples_append", "eval_finalize", "eval_update")


@pytest.fixture(autouse=True)
def _fresh_variant_cache():
    evaluations._reset_variant_cache()
    yield
    evaluations._reset_variant_cache()


def _root() -> Path:
    return Path(os.environ["PRIME_RUNS_DIR"])


def _offline_run(episodes: list[dict], **finish: Any) -> pr.Run:
    run = pr.init(
        name="sync-test",
        environments=["gsm8k"],
        model="Qwen/Qwen3-8B",
        framework="verifiers",
        config={"sampling": {"t": 0.7}},
        mode="offline",
        dir=_root(),
    )
    run.log_episodes(episodes)
    run.finish(**finish)
    return run


def _cli(*args: str, chunk: int | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_cli(*args, chunk=chunk, timeout=timeout)


def _counts(platform) -> dict[str, int]:
    return {route: len(platform.requests_for(route)) for route in UPLOAD_ROUTES}


def _assert_uploaded_once(platform, eval_id: str, episodes: list[dict]) -> None:
    assert set(platform.episodes) == {e["id"] for e in episodes}
    member_ids = {t["id"] for e in episodes for t in e["traces"]}
    assert set(platform.trace_writes) == member_ids
    assert set(platform.trace_writes.values()) == {1}
    assert all(doc["run"]["id"] == eval_id for doc in platform.traces.values())
    rows = platform.samples(eval_id)
    assert sorted(r["sample_id"] for r in rows) == sorted(e["id"] for e in episodes)
    # Rollout numbers continue across syncs: no (example, rollout) pair twice.
    pairs = [(r["example_id"], r["rollout_number"]) for r in rows]
    assert len(pairs) == len(set(pairs))
    assert platform.server_errors == []


def test_offline_run_is_registered_uploaded_and_finalized_once(prime_env, episodes):
    run = _offline_run(episodes)
    recorded = _archives.Archive(Path(run.archive_path)).status()["summary"]

    result = _cli("sync")

    assert result.returncode == 0, result.stderr
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert f"{run.id}: ok: {eval_id}" in result.stdout
    assert evaluation["name"] == "sync-test"
    assert evaluation["model_name"] == "Qwen/Qwen3-8B"
    assert evaluation["metadata"] == {"sampling": {"t": 0.7}}
    assert evaluation["status"] == "PROCESSING"
    assert evaluation["finalize_count"] == 1
    assert evaluation["metrics"] == {
        **recorded,
        "prime_runs": {"traces_episodes_written": len(episodes)},
    }
    _assert_uploaded_once(prime_env, eval_id, episodes)
    archive = _archives.Archive(Path(run.archive_path))
    assert archive.sync_state()["platform"]["id"] == eval_id
    assert archive.description()["platform"]["id"] == eval_id
    assert archive.status()["closed"] is True
    assert prime_env.api_key not in result.stdout + result.stderr


def test_a_second_sync_uploads_nothing(prime_env, episodes):
    run = _offline_run(episodes)
    assert main(["sync"]) == 0
    before = _counts(prime_env)

    assert main(["sync"]) == 0  # nothing pending: no run is even looked at
    assert main(["sync", run.id]) == 0  # named explicitly: checked, nothing sent

    assert _counts(prime_env) == before
    assert len(prime_env.evaluations) == 1


def test_show_finds_a_synced_run_by_its_platform_id(prime_env, episodes, capsys):
    run = _offline_run(episodes[:2])
    assert main(["sync"]) == 0
    (eval_id,) = prime_env.evaluations
    capsys.readouterr()

    assert main(["show", eval_id]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run {run.id}\n")
    assert f"platform id:  {eval_id}" in out
    assert "completed (closed on the platform)" in out
    assert "traces:       2/2 acknowledged, 0 pending" in out
    assert "pending:      -" in out


@pytest.mark.parametrize(
    ("route", "landed"),
    [
        ("eval_create", lambda p: len(p.evaluations) == 1),
        ("traces_upload", lambda p: len(p.receipts) >= 1),
        ("samples_append", lambda p: any(p.samples(e) for e in p.evaluations)),
    ],
    ids=["during-create", "during-traces", "during-samples"],
)
def test_sync_killed_midway_then_rerun_lands_everything_once(prime_env, episodes, route, landed):
    run = _offline_run(episodes)
    # The request is processed, then its answer hangs: kill the sync in that window.
    prime_env.fail(route, 503, after_processing=True, delay=60)
    proc = subprocess.Popen(
        cli_command("sync", chunk=5), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_for(lambda: landed(prime_env), proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    if route == "traces_upload":
        assert len(prime_env.receipts) == 1  # committed, never acknowledged in the archive

    result = _cli("sync", run.id, chunk=5)

    assert result.returncode == 0, result.stdout + result.stderr
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["finalize_count"] == 1
    _assert_uploaded_once(prime_env, eval_id, episodes)
    if route == "traces_upload":
        # The committed chunk was noted: sent again as the same bytes, its receipt replayed.
        assert any(r.replayed for r in prime_env.requests_for("traces_upload"))
        assert prime_env.requests_for("episodes_get") == []


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"sync exited early ({proc.returncode}): {out!r} {err!r}")
        if time.monotonic() > deadline:
            raise AssertionError("the sync never reached the injected fault")
        time.sleep(0.02)


def test_failed_offline_run_is_closed_as_failed(prime_env, episodes):
    _offline_run(episodes[:4], status="failed", error="ValueError: boom")

    assert main(["sync"]) == 0

    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"] == "ValueError: boom"
    assert evaluation["finalize_count"] == 0
    assert evaluation["metrics"]["prime_runs"] == {"traces_episodes_written": 4}
    _assert_uploaded_once(prime_env, eval_id, episodes[:4])


def test_online_run_left_incomplete_by_an_outage_is_completed_by_sync(
    prime_env, episodes, monkeypatch
):
    # The outage's 503s store nothing: none of its requests can land later (by default
    # sync would leave their records pending for a request timeout first).
    monkeypatch.setenv(INFLIGHT_WINDOW_ENV, "0")
    run = pr.init(name="online", environments=["gsm8k"], model="m", framework="verifiers")
    run.log_episodes(episodes[:8])
    assert run.flush(timeout=30)
    prime_env.outage()
    run.log_episodes(episodes[8:])
    run.finish(timeout=1.0)
    assert _archives.Archive(Path(run.archive_path)).status()["closed"] is False
    prime_env.recover()
    writes_before = dict(prime_env.trace_writes)

    assert main(["sync"]) == 0

    evaluation = prime_env.evaluations[run.id]
    assert evaluation["finalize_count"] == 1
    assert evaluation["metrics"]["prime_runs"] == {"traces_episodes_written": len(episodes)}
    assert all(writes_before[t] == 1 for t in writes_before)
    _assert_uploaded_once(prime_env, run.id, episodes)
    assert len(prime_env.evaluations) == 1


def test_online_run_whose_producer_was_killed_is_closed_as_crashed(prime_env, episodes, tmp_path):
    data = tmp_path / "episodes.json"
    data.write_text(json.dumps(episodes[:3]))
    producer = textwrap.dedent(
        f"""
        import json, os, signal, prime_runs as pr
        run = pr.init(name="killed", environments=["gsm8k"], model="m", framework="f")
        run.log_episodes(json.load(open({str(data)!r})))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    # Nothing lands while it runs, so whatever the kill interrupts is deterministic.
    prime_env.outage(routes=["traces_upload", "samples_append"])
    killed = subprocess.run([sys.executable, "-c", producer], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    prime_env.recover()
    ls = _cli("ls")
    assert "crashed?" in ls.stdout

    result = _cli("sync")

    assert result.returncode == 0, result.stdout + result.stderr
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"].startswith("crashed: ")
    assert "closed as crashed" in result.stdout
    _assert_uploaded_once(prime_env, eval_id, episodes[:3])
    status = _archives.Archive(_root() / eval_id).status()
    assert (status["status"], status["closed"]) == ("crashed", True)


def test_a_run_still_running_is_never_touched(prime_env, episodes, capsys):
    run = pr.init(name="live", environments=["gsm8k"], mode="offline", dir=_root())
    run.log_episodes(episodes[:2])
    try:
        assert main(["sync"]) == 0  # not named: skipped with a note, not a failure
        assert main(["sync", run.id]) == 1  # named: it could not be synced
        out = capsys.readouterr().out
        assert f"{run.id}: skipped: still running (pid {os.getpid()})" in out
        assert prime_env.requests == []
    finally:
        run.finish()


def test_sync_needs_an_api_key(prime_env, episodes, monkeypatch, capsys):
    _offline_run(episodes[:1])
    monkeypatch.delenv("PRIME_API_KEY")

    assert main(["sync"]) == 2

    assert "PRIME_API_KEY" in capsys.readouterr().err
    assert prime_env.requests == []


def test_an_upload_failure_leaves_the_run_open_and_exits_nonzero(
    prime_env, episodes, capsys, monkeypatch
):
    monkeypatch.setenv(INFLIGHT_WINDOW_ENV, "0")  # the outage's 503s store nothing
    run = _offline_run(episodes[:4])
    prime_env.outage(routes=["samples_append"])

    assert main(["sync"]) == 1

    out = capsys.readouterr().out
    assert f"{run.id}: FAILED:" in out and "still pending: 4 samples, close" in out
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "RUNNING"  # not closed while rows are missing
    prime_env.recover()
    assert main(["sync"]) == 0
    assert prime_env.evaluations[eval_id]["finalize_count"] == 1
    _assert_uploaded_once(prime_env, eval_id, episodes[:4])


def test_a_rejected_record_is_reported_once_and_not_resent(prime_env, episodes, capsys):
    run = _offline_run(episodes[:4])
    prime_env.reject_trace_ids([episodes[1]["id"]])

    assert main(["sync"]) == 1

    out = capsys.readouterr().out
    assert f"{run.id}: FAILED:" in out and "1 trace rejected (HTTP 400 invalid_trace" in out
    ((evaluation),) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1  # the rest landed: the run is closed
    assert set(prime_env.episodes) == {e["id"] for i, e in enumerate(episodes[:4]) if i != 1}
    uploads = len(prime_env.requests_for("traces_upload"))
    assert main(["sync"]) == 0  # identical bytes cannot succeed: never resent
    assert len(prime_env.requests_for("traces_upload")) == uploads


@pytest.mark.prime_platform(traces="service_not_enabled")
def test_an_account_without_prime_traces_still_gets_its_samples(prime_env, episodes, capsys):
    run = _offline_run(episodes[:3])

    assert main(["sync"]) == 0

    out = capsys.readouterr().out
    assert f"{run.id}: ok:" in out and "traces not uploaded" in out
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert len(prime_env.samples(eval_id)) == 3
    assert evaluation["metrics"]["prime_runs"] == {"traces_episodes_written": 0}


@pytest.mark.prime_platform(traces="service_not_enabled")
def test_records_a_switched_off_traces_service_skipped_go_once_it_is_on(
    prime_env, episodes, capsys
):
    # The live journal leaves such records pending; sync does the same, so a later sync
    # delivers them once the account has Prime Traces.
    run = _offline_run(episodes[:3])
    assert main(["sync"]) == 0
    assert prime_env.episode_writes == {}
    capsys.readouterr()

    prime_env.traces_mode = "enabled"
    assert main(["sync", run.id]) == 0

    assert len(prime_env.episode_writes) == 3 and set(prime_env.episode_writes.values()) == {1}
    ((eval_id, _),) = prime_env.evaluations.items()
    assert len(prime_env.samples(eval_id)) == 3  # the sample rows were not sent again

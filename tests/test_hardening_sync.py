"""Hardening of ``prime-runs show``/``ls``/``sync`` against damaged archives and kills (issue 12:
bad record lines, unusable status.json, numbers too large for a float, copies after a
SIGKILL between a commit and its acknowledgement, runs without an environment)."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
import prime_runs._sync.syncer as _sync
from _support import archive_root, cli_command, offline_run, only_segment, run_cli
from prime_runs._journal.archive import RunArchive
from prime_runs.platform import evaluations
from prime_runs.settings import INFLIGHT_WINDOW_ENV

BIG = 10**400


@pytest.fixture(autouse=True)
def _fresh_variant_cache():
    evaluations._reset_variant_cache()
    yield
    evaluations._reset_variant_cache()


def _cli(*args: str, chunk: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli(*args, chunk=chunk, timeout=timeout)


def _hardening_run(episodes: list[dict], name: str = "hardening", **init: Any) -> pr.Run:
    return offline_run(episodes, name, model="m", framework="f", **init)


def _many(episodes: list[dict], n: int) -> list[dict]:
    """``n`` distinct episodes (fresh episode and trace ids) cycled from the fixtures."""
    out = []
    for i in range(n):
        episode = copy.deepcopy(episodes[i % len(episodes)])
        episode["id"] = uuid.uuid4().hex
        for trace in episode["traces"]:
            trace["id"] = uuid.uuid4().hex
        out.append(episode)
    return out


def _assert_once(platform, eval_id: str, episodes: list[dict]) -> None:
    assert platform.episode_writes == {e["id"]: 1 for e in episodes}
    assert platform.trace_writes == {t["id"]: 1 for e in episodes for t in e["traces"]}
    rows = platform.samples(eval_id)
    assert sorted(r["sample_id"] for r in rows) == sorted(e["id"] for e in episodes)
    assert platform.server_errors == []


def _no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr, result.stderr


# -- item 6: a line that is valid JSON but not a record ------------------------------------


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[1,2]", "a JSON array, not a record"),
        ('"x"', "a JSON string, not a record"),
        ("3", "a JSON number, not a record"),
        ("null", "a JSON null, not a record"),
        ("{torn", "not valid JSON"),
    ],
)
def test_a_non_record_line_is_rejected_counted_and_the_run_still_closes(
    prime_env, episodes, line, reason
):
    run = _hardening_run(episodes[:3])
    with only_segment(run).open("a") as f:
        f.write(line + "\n")

    ls, show, first = _cli("ls"), _cli("show", run.id), _cli("sync")
    again = _cli("sync", run.id)

    for result in (ls, show, first, again):
        _no_traceback(result)
    assert (ls.returncode, show.returncode) == (0, 0)
    assert first.returncode == 1  # a rejected record is a failure the user must see
    assert f"unreadable:   1 line: {reason}" in show.stdout
    assert f"{run.id}: FAILED:" in first.stdout
    assert "1 trace rejected" in first.stdout and reason in first.stdout
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "PROCESSING"  # finalized, not left RUNNING
    _assert_once(prime_env, eval_id, episodes[:3])
    assert again.returncode == 0, again.stdout  # settled: not retried, nothing left
    assert "rejected" in _cli("show", run.id).stdout


def test_a_run_json_that_is_not_an_object_is_reported_not_registered(prime_env, episodes):
    run = _hardening_run(episodes[:1])
    (Path(run.archive_path) / "run.json").write_text("[1, 2]")

    result = _cli("sync", run.id)

    _no_traceback(result)
    assert result.returncode == 1
    assert f"{run.id}: FAILED: run.json cannot be read" in result.stdout
    assert prime_env.requests == []


def test_a_sync_of_many_runs_goes_on_past_a_bad_one(prime_env, episodes):
    bad = _hardening_run(episodes[:2], name="bad")
    with only_segment(bad).open("a") as f:
        f.write("[1,2]\n")
    broken = _hardening_run(episodes[2:3], name="broken")
    description = RunArchive(Path(broken.archive_path)).description()
    RunArchive(Path(broken.archive_path)).write_description(
        {**description, "environments": 5, "environment_refs": 5}
    )
    good = _hardening_run(episodes[3:5], name="good")

    result = _cli("sync")

    _no_traceback(result)
    assert result.returncode == 1
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines[bad.id].startswith("FAILED:")
    assert lines[broken.id].startswith("FAILED:") and "environments" in lines[broken.id]
    assert lines[good.id].startswith("ok:")
    names = {e["name"]: e for e in prime_env.evaluations.values()}
    assert names["good"]["status"] == "PROCESSING"
    assert names["bad"]["status"] == "PROCESSING"
    assert "broken" not in names  # nothing was created for a run.json it cannot read


# -- item 6: status.json that cannot be used ----------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "does not hold a JSON object"),
        ('{"status": "bogus", "closed": false}', "status 'bogus' is not one of"),
        ('{"status": "completed", "closed": "no"}', "closed has the wrong type"),
        ('{"status": 3}', "status 3 is not one of"),
        (None, "status.json is missing"),
    ],
    ids=["bad-json", "array", "unknown-status", "wrong-type", "status-number", "missing"],
)
def test_an_unusable_status_json_is_closed_as_crashed_and_reported(
    prime_env, episodes, content, problem
):
    run = _hardening_run(episodes[:3])
    status_file = Path(run.archive_path) / "status.json"
    if content is None:
        status_file.unlink()
        archive = RunArchive(Path(run.archive_path))
        description = archive.description()  # long past the moment before init() writes it
        archive.write_description({**description, "created_at": description["created_at"] - 120})
    else:
        status_file.write_text(content)

    ls = _cli("ls")
    show = _cli("show", run.id)
    result = _cli("sync")

    for each in (ls, show, result):
        _no_traceback(each)
    assert "invalid" in ls.stdout.splitlines()[1].split()
    assert problem in show.stdout
    assert result.returncode == 1
    assert f"{run.id}: FAILED:" in result.stdout and problem in result.stdout
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "FAILED"  # closed, as crashed: never left RUNNING
    assert evaluation["error_message"].startswith("crashed: ")
    assert problem in evaluation["error_message"]
    _assert_once(prime_env, eval_id, episodes[:3])
    doc = json.loads(status_file.read_text())
    assert (doc["status"], doc["closed"]) == ("crashed", True)
    assert _cli("sync").returncode == 0  # repaired: nothing left to do


def test_an_unusable_status_json_of_a_live_process_is_not_touched(prime_env, episodes):
    run = _hardening_run(episodes[:2])
    (Path(run.archive_path) / "status.json").write_text(
        json.dumps({"status": "bogus", "pid": os.getpid()})
    )

    result = _cli("sync", run.id)

    assert result.returncode == 1
    assert f"{run.id}: skipped:" in result.stdout
    assert prime_env.requests == []


def test_a_run_folder_an_init_is_still_creating_is_not_touched(prime_env, episodes):
    run = _hardening_run(episodes[:2])
    (Path(run.archive_path) / "status.json").unlink()  # as between run.json and status.json

    result = _cli("sync", run.id)

    assert result.returncode == 1
    assert f"{run.id}: skipped: status.json is missing, and its process may" in result.stdout
    assert prime_env.requests == []


# -- item 4: numbers that do not fit a float -----------------------------------------------


def _huge_episode(episode: dict) -> dict:
    huge = copy.deepcopy(episode)
    huge["id"] = "huge-episode"
    trace = huge["traces"][0]
    trace["id"] = "huge-trace"
    trace["rewards"] = {"correct": {"score": BIG, "weight": 1.0}}
    trace["metrics"] = {"huge": BIG}
    return huge


def test_an_archive_with_a_401_digit_number_is_read_and_synced_as_bad_input(prime_env, episodes):
    run = _hardening_run(episodes[:3])
    with only_segment(run).open("a") as f:
        f.write(json.dumps(_huge_episode(episodes[3])) + "\n")
    # A producer that died: sync computes the summary from the records.
    archive = RunArchive(Path(run.archive_path))
    archive.write_status({**archive.status(), "status": "running", "summary": None, "pid": 0})

    ls, show, result = _cli("ls"), _cli("show", run.id), _cli("sync")

    for each in (ls, show, result):
        _no_traceback(each)
    assert (ls.returncode, show.returncode) == (0, 0)
    assert "unreadable" in show.stdout and "64-bit float" in show.stdout
    assert result.returncode == 1
    assert "does not fit a 64-bit float" in result.stdout
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "FAILED"  # closed as crashed, with a summary
    assert "avg_reward" in evaluation["metrics"]
    _assert_once(prime_env, eval_id, episodes[:3])
    assert "huge-episode" not in prime_env.episodes


def test_a_summary_too_large_for_a_float_does_not_break_ls(tmp_path, episodes):
    run = _hardening_run(episodes[:2])
    archive = RunArchive(Path(run.archive_path))
    archive.write_status({**archive.status(), "summary": {"avg_reward": BIG}})

    ls, show = _cli("ls"), _cli("show", run.id)

    for each in (ls, show):
        _no_traceback(each)
        assert each.returncode == 0


# -- item 8: a SIGKILL between the platform's commit and the archive's ack -----------------


def _producer(path: Path, root: Path) -> str:
    return textwrap.dedent(
        f"""
        import json, sys, time, prime_runs as pr
        episodes = json.load(open({str(path)!r}))
        run = pr.init(name="killed", environments=["gsm8k"], model="m", framework="f",
                      dir={str(root)!r})
        run.log_episodes(episodes)  # one batch: it is committed whole, then never acked
        print("logged", flush=True)
        time.sleep(120)
        """
    )


def test_a_producer_killed_between_commit_and_ack_leaves_every_record_once(
    prime_env, episodes, tmp_path, monkeypatch
):
    # More than sync's chunk: its requests differ from the producer's, so the same key
    # cannot save it from storing the committed records again.
    batch = _many(episodes, _sync.CHUNK_RECORDS + 44)
    data = tmp_path / "episodes.json"
    data.write_text(json.dumps(batch))
    # A slow platform: the upload is stored, then its answer takes a minute.
    prime_env.fail("traces_upload", 201, after_processing=True, delay=60)
    # The kill may also land while the samples append is in flight. The stand-in stores an
    # append as it answers it (no delay set for that route), so nothing of it can land
    # later. The producer notes how long its requests may still land (its window, not
    # sync's): a window of 0 lets sync read the append back at once rather than wait.
    monkeypatch.setenv(INFLIGHT_WINDOW_ENV, "0")
    producer = subprocess.Popen(
        [sys.executable, "-c", _producer(data, archive_root())], stdout=subprocess.PIPE, text=True
    )
    try:
        assert producer.stdout.readline().strip() == "logged"
        deadline = time.monotonic() + 60
        while not prime_env.receipts and time.monotonic() < deadline:
            time.sleep(0.01)
        assert prime_env.receipts, "the producer's upload never landed"
    finally:
        producer.send_signal(signal.SIGKILL)
        producer.communicate(timeout=30)
    committed = len(prime_env.episodes)
    assert committed > 0  # stored on the platform, never acknowledged in the archive

    result = _cli("sync")

    assert result.returncode == 0, result.stdout + result.stderr
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["finalize_count"] == 0 and evaluation["status"] == "FAILED"  # crashed
    _assert_once(prime_env, eval_id, batch)
    # The producer's batch was noted before it was sent: sync sent the same bytes again
    # (its receipt replayed) rather than read every record back.
    assert any(r.replayed for r in prime_env.requests_for("traces_upload"))
    assert prime_env.requests_for("episodes_get") == []


@pytest.mark.parametrize("receipts", [1, 3, 6])
def test_a_sync_killed_at_any_point_against_a_slow_platform_then_rerun_stores_once(
    prime_env, episodes, receipts
):
    batch = _many(episodes, 40)
    run = _hardening_run(batch)
    # Every upload is stored, then answered late: kills land between commit and ack.
    prime_env.fail("traces_upload", 201, after_processing=True, delay=0.3, times=1000)
    proc = subprocess.Popen(
        cli_command("sync", chunk=4), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while len(prime_env.receipts) < receipts:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sync never got that far"
            time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)

    result = _cli("sync", run.id, chunk=4)

    assert result.returncode == 0, result.stdout + result.stderr
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["finalize_count"] == 1
    _assert_once(prime_env, eval_id, batch)


def test_a_key_that_cannot_read_traces_back_needs_no_read(prime_env, episodes):
    # An online run whose traces uploads all failed (503: they may have landed); the key
    # may upload but not read. The batches were noted: sync sends the same bytes again.
    prime_env.outage(routes=["traces_upload"])
    run = pr.init(name="write-only", environments=["gsm8k"], model="m", framework="f")
    run.log_episodes(episodes[:2])
    run.finish(timeout=5)
    prime_env.recover()
    prime_env.fail("episodes_get", 403, code="forbidden", times=100)

    result = _cli("sync")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "could not check" not in result.stdout
    assert prime_env.requests_for("episodes_get") == []
    assert prime_env.episode_writes == {e["id"]: 1 for e in episodes[:2]}


# -- item 12: a run without environments ---------------------------------------------------


def test_a_run_without_environments_is_warned_at_init_and_synced_with_environment(
    prime_env, episodes, caplog
):
    with caplog.at_level("WARNING", logger="prime_runs"):
        run = _hardening_run(episodes[:2], environments=None)
    assert "prime-runs sync --environment NAME" in caplog.text
    assert run.id in caplog.text

    refused = _cli("sync")
    no_runs = _cli("sync", "--environment", "gsm8k")
    synced = _cli("sync", "--environment", "gsm8k", run.id)

    assert refused.returncode == 1
    assert "names no environment" in refused.stdout
    assert f"prime-runs sync --environment NAME {run.id}" in refused.stdout
    assert no_runs.returncode == 2 and "needs the RUNs" in no_runs.stderr
    assert synced.returncode == 0, synced.stdout + synced.stderr
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["environments"] and evaluation["status"] == "PROCESSING"
    assert RunArchive(Path(run.archive_path)).description()["environments"] == ["gsm8k"]
    _assert_once(prime_env, eval_id, episodes[:2])


def test_a_sync_whose_reader_went_away_still_uploads_everything(prime_env, episodes):
    run = _hardening_run(episodes[:3])
    read, write = os.pipe()
    proc = subprocess.Popen(cli_command("sync"), stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    os.close(read)  # nobody reads the result lines

    _, err = proc.communicate(timeout=120)

    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"BrokenPipeError" not in err
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "PROCESSING"
    _assert_once(prime_env, eval_id, episodes[:3])
    assert RunArchive(Path(run.archive_path)).status()["closed"] is True

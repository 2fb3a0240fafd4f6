"""One owner per batch, across processes (issue 30): a request the platform stores after
its sender gave up, exited or was killed is never stored a second time by the
`prime-runs sync` that runs meanwhile. Producers and syncs run as processes of their own
against the stand-in over HTTP; the stand-in holds a request and stores it later, as the
platform does with a slow request whose client is gone (``StandInPlatform.hold``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

import _archives
from _support import archive_root, cli_command, offline_run, run_cli
from prime_runs.settings import INFLIGHT_WINDOW_ENV

WAIT = 60.0  # the longest any step below may take on a loaded machine


def _producer(data: Path, *, first: int, end: str) -> str:
    """Logs ``first`` episodes, says so, waits for a line, logs the rest, then ``end``s:
    ``finish`` (finish(timeout=2) and exit) or ``wait`` (for its SIGKILL)."""
    return textwrap.dedent(
        f"""
        import json, prime_runs as pr
        episodes = json.load(open({str(data)!r}))
        run = pr.init(name="held", environments=["gsm8k"], model="m", framework="f")
        run.log_episodes(episodes[:{first}])
        print("first", flush=True)
        input()
        run.log_episodes(episodes[{first}:])
        print("second", flush=True)
        if {end!r} == "finish":
            run.finish(timeout=2)  # gives up on the held request, which stays in flight
            print("finished", flush=True)
        else:
            input()  # SIGKILLed here
        """
    )


def _start(tmp_path: Path, batch: list[dict], *, first: int, end: str, env=None):
    data = tmp_path / "episodes.json"
    data.write_text(json.dumps(batch))
    script = tmp_path / "producer.py"
    script.write_text(_producer(data, first=first, end=end))
    return subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _until(condition, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _arrived(platform, route: str) -> bool:
    return bool(platform.requests_for(route))


def _landed(platform, route: str) -> bool:
    """The first request to ``route`` (the held one) was handled: stored, or refused."""
    requests = platform.requests_for(route)
    return bool(requests) and requests[0].status is not None


def _rows(platform) -> int:
    return sum(len(platform.samples(eval_id)) for eval_id in platform.evaluations)


def _step(producer: subprocess.Popen, expect: str) -> None:
    line = producer.stdout.readline().strip()
    assert line == expect, (line, producer.stderr.read() if producer.poll() is not None else "")


def _kill(producer: subprocess.Popen) -> None:
    producer.send_signal(signal.SIGKILL)
    producer.communicate(timeout=30)
    assert producer.returncode == -signal.SIGKILL


def _once(platform, batch: list[dict]) -> None:
    assert platform.episode_writes == {e["id"]: 1 for e in batch}
    assert platform.trace_writes == {t["id"]: 1 for e in batch for t in e["traces"]}
    (eval_id,) = platform.evaluations
    rows = Counter(r["sample_id"] for r in platform.samples(eval_id))
    assert rows == {e["id"]: 1 for e in batch}
    assert platform.server_errors == []


# -- Prime Traces ------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["finish", "wait"], ids=["exit", "sigkill"])
def test_a_traces_upload_landing_after_sync_is_stored_once(prime_env, burst, tmp_path, end):
    # The issue's reproduction: the first 100 episodes' upload is held 8 s; 100 more are
    # logged behind it; the producer gives up and exits (or is killed); sync runs at once.
    batch = burst(200)
    prime_env.hold("traces_upload", 8.0)
    producer = _start(tmp_path, batch, first=100, end=end)
    try:
        _step(producer, "first")
        _until(lambda: _arrived(prime_env, "traces_upload"), "the held upload")
        producer.stdin.write("\n")
        producer.stdin.flush()
        _step(producer, "second")
        if end == "finish":
            _step(producer, "finished")
            producer.communicate(timeout=WAIT)
            assert producer.returncode == 0
        else:
            # The kill is for the held upload: a samples append it cut short would be
            # left pending for its own window (the samples tests below), so let those land.
            _until(lambda: _rows(prime_env) == len(batch), "the samples rows")
            _kill(producer)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.communicate(timeout=30)
    assert not _landed(prime_env, "traces_upload")  # still held at the platform

    result = run_cli("sync")
    _until(lambda: _landed(prime_env, "traces_upload"), "the held upload to land")

    assert result.returncode == 0, result.stdout + result.stderr
    _once(prime_env, batch)
    held = prime_env.requests_for("traces_upload")[0]
    assert held.replayed  # sync had sent those very bytes under the same key first
    assert prime_env.requests_for("episodes_get") == []  # nothing needed reading back


def test_a_sync_killed_with_its_upload_held_then_a_second_sync_stores_once(
    prime_env, burst, tmp_path
):
    batch = burst(12)
    offline_run(batch, model="m", framework="f")
    prime_env.hold("traces_upload", 6.0)
    first = subprocess.Popen(
        cli_command("sync", chunk=5), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _until(lambda: _arrived(prime_env, "traces_upload"), "the first sync's upload")
        busy = run_cli("sync")  # two syncs at once: the second leaves the run alone
        assert "another prime-runs sync is working on it" in busy.stdout
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)

    second = run_cli("sync")  # its own chunks would differ from the first sync's
    _until(lambda: _landed(prime_env, "traces_upload"), "the held upload to land")

    assert second.returncode == 0, second.stdout + second.stderr
    _once(prime_env, batch)


# -- the sample table --------------------------------------------------------------------


def test_a_samples_append_landing_after_sync_is_stored_once(prime_env, burst, tmp_path):
    # The reproduction: a samples POST of 20 episodes held 6 s, the producer
    # SIGKILLed meanwhile, `prime-runs sync` at once.
    batch = burst(20)
    prime_env.hold("samples_append", 6.0)
    producer = _start(tmp_path, batch, first=20, end="wait")
    try:
        _step(producer, "first")
        _until(lambda: _arrived(prime_env, "samples_append"), "the held append")
        _until(lambda: len(prime_env.episode_writes) == 20, "the traces upload")
    finally:
        _kill(producer)

    at_once = run_cli("sync")

    # It cannot tell whether the held append will land: it sends nothing and says when.
    assert at_once.returncode == 1, at_once.stdout
    assert "20 records were sent by a process now gone" in at_once.stdout
    assert "run `prime-runs sync` again after" in at_once.stdout
    (eval_id,) = prime_env.evaluations
    assert prime_env.samples(eval_id) == []
    assert len(prime_env.requests_for("samples_append")) == 1
    _until(lambda: _landed(prime_env, "samples_append"), "the held append to land")

    later = run_cli("sync")

    assert later.returncode == 0, later.stdout + later.stderr
    _once(prime_env, batch)
    assert len(prime_env.requests_for("samples_append")) == 1  # found, never sent again
    assert prime_env.evaluations[eval_id]["status"] == "FAILED"  # closed as crashed


def test_a_samples_append_stored_before_its_answer_is_found_not_resent(prime_env, burst, tmp_path):
    # Stored at once, then its answer is held: the producer is killed before the answer.
    batch = burst(20)
    prime_env.fail("samples_append", 503, after_processing=True, delay=60)
    producer = _start(tmp_path, batch, first=20, end="wait")
    try:
        _step(producer, "first")
        (eval_id,) = _wait_for_evaluation(prime_env)
        _until(lambda: len(prime_env.samples(eval_id)) == 20, "the stored append")
        _until(lambda: len(prime_env.episode_writes) == 20, "the traces upload")
    finally:
        _kill(producer)

    result = run_cli("sync")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "found 20 samples already stored" in result.stdout
    _once(prime_env, batch)
    assert len(prime_env.requests_for("samples_append")) == 1


def _wait_for_evaluation(platform) -> list[str]:
    _until(lambda: bool(platform.evaluations), "the evaluation")
    return list(platform.evaluations)


def test_a_samples_append_that_never_lands_is_sent_once_its_window_is_over(
    prime_env, burst, tmp_path
):
    batch = burst(20)
    # Long enough that the first sync (a process of its own, on a loaded machine) starts
    # well within it; the second waits it out.
    window = 8.0
    prime_env.fail("samples_append", 503, delay=6.0)  # held, then dropped unstored
    producer = _start(tmp_path, batch, first=20, end="wait", env={INFLIGHT_WINDOW_ENV: str(window)})
    try:
        _step(producer, "first")
        _until(lambda: _arrived(prime_env, "samples_append"), "the held append")
        sent_at = time.time()
        _until(lambda: len(prime_env.episode_writes) == 20, "the traces upload")
    finally:
        _kill(producer)
    assert run_cli("sync").returncode == 1  # within the window: left pending
    time.sleep(max(0.0, sent_at + window + 0.5 - time.time()))  # a time, not an event

    result = run_cli("sync")

    assert result.returncode == 0, result.stdout + result.stderr
    _once(prime_env, batch)


def test_a_sync_killed_with_its_append_held_then_a_second_sync_stores_once(
    prime_env, burst, tmp_path
):
    batch = burst(20)
    offline_run(batch, model="m", framework="f")
    prime_env.hold("samples_append", 6.0)
    first = subprocess.Popen(cli_command("sync"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _until(lambda: _arrived(prime_env, "samples_append"), "the first sync's append")
        busy = run_cli("sync")
        assert "another prime-runs sync is working on it" in busy.stdout
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)

    at_once = run_cli("sync")
    _until(lambda: _landed(prime_env, "samples_append"), "the held append to land")
    later = run_cli("sync")

    assert at_once.returncode == 1 and "run `prime-runs sync` again after" in at_once.stdout
    assert later.returncode == 0, later.stdout + later.stderr
    _once(prime_env, batch)


def test_the_notes_of_a_finished_run_are_gone(prime_env, burst):
    import prime_runs as pr

    run = pr.init(name="tidy", environments=["gsm8k"], model="m", framework="f")
    run.log_episodes(burst(30))
    run.finish(timeout=30)

    assert not list((Path(run.archive_path) / "batches").glob("*.json"))
    assert archive_root() in Path(run.archive_path).parents


def _note_traces_batch(run, until: float) -> None:
    """A traces batch noted by a process now gone, whose bytes sync cannot make again
    (here: a key no bytes hash to)."""
    archive = _archives.Archive(Path(run.archive_path))
    keys = [key for key, _kind, _data in archive.iter_records()]
    segments = sorted({k.segment for k in keys})
    entry = {
        "n": 1,
        "until": until,
        "segs": segments,
        "keys": [[segments.index(k.segment), k.offset] for k in keys],
        "key": "sha256:" + "0" * 64,
    }
    notes = archive.path / "batches"
    notes.mkdir(exist_ok=True)
    doc = {"sink": "traces", "pid": 1, "batches": [entry]}
    (notes / "traces-1-abcdef.json").write_text(json.dumps(doc))


def test_a_noted_batch_that_cannot_be_made_again_waits_then_is_looked_up(prime_env, burst):
    batch = burst(6)
    run = offline_run(batch, model="m", framework="f")
    _note_traces_batch(run, until=time.time() + 60)

    waiting = run_cli("sync")

    assert waiting.returncode == 1
    assert "6 records were sent by a process now gone (pid 1)" in waiting.stdout
    assert prime_env.episode_writes == {}  # not sent beside a request that may still land
    _note_traces_batch(run, until=0.0)  # its window is over

    later = run_cli("sync")

    assert later.returncode == 0, later.stdout + later.stderr
    assert len(prime_env.requests_for("episodes_get")) == 6  # its own records, looked up
    _once(prime_env, batch)
    assert not list((Path(run.archive_path) / "batches").glob("*.json"))

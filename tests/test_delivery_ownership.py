"""One deliverer per record at a time, across processes: a `prime-runs sync` that meets a
request its writer gave up on but the platform may still store sends that very batch again
under the same key, so nothing is stored twice (issues 20 and 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import prime_runs._journal.lease as _lease
from prime_runs._journal.archive import RunArchive

STALL = 6.0  # how long each traces upload waits at the stand-in before it is stored


def _producer(data: Path, root: Path) -> str:
    return textwrap.dedent(
        f"""
        import json, prime_runs as pr
        episodes = json.load(open({str(data)!r}))
        run = pr.init(name="race", environments=["gsm8k"], model="m", framework="f",
                      dir={str(root)!r})
        run.log_episodes(episodes)
        run.finish(timeout=1.5)  # gives up on the stalled upload, which stays in flight
        print("finished", run.id, flush=True)
        input()  # alive while the upload lands
        """
    )


def _sync() -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "sync"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _until_landed(platform, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while platform.requests_for("traces_upload")[0].status is None:
        assert time.monotonic() < deadline, "the producer's upload never landed"
        time.sleep(0.02)


def test_a_sync_racing_an_upload_in_flight_resends_that_batch_and_nothing_is_stored_twice(
    prime_env, burst, tmp_path
):
    batch = burst(300)
    data = tmp_path / "episodes.json"
    data.write_text(json.dumps(batch))
    root = Path(os.environ["PRIME_RUNS_DIR"])
    prime_env.stall("traces_upload", STALL)
    producer = subprocess.Popen(
        [sys.executable, "-c", _producer(data, root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = producer.stdout.readline().split()
        assert line[:1] == ["finished"], producer.communicate()
        assert not prime_env.trace_writes  # the producer's upload has not landed yet

        racing = _sync()  # while that upload is in flight

        assert racing.returncode == 0, racing.stdout + racing.stderr
        _until_landed(prime_env)  # the producer's stalled upload, sent first
        producer.communicate("\n", timeout=60)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.communicate(timeout=30)
    assert producer.returncode == 0

    uploads = prime_env.requests_for("traces_upload")
    assert len({r.idempotency_key for r in uploads}) == 1  # one batch, sent twice
    assert prime_env.episode_writes == {e["id"]: 1 for e in batch}
    assert prime_env.trace_writes == {t["id"]: 1 for e in batch for t in e["traces"]}


def test_a_lease_is_held_by_the_writer_and_given_back_when_its_journal_closes(tmp_path):
    archive = RunArchive.create(tmp_path, "run-1", {"name": "x"})
    key = archive.append("episode", b'{"id":"a"}')
    assert _lease.holder(archive.path, key.segment) == os.getpid()

    archive.close()

    assert _lease.holder(archive.path, key.segment) is None
    assert not (archive.path / _lease.LEASES_DIR / key.segment).exists()


def test_a_lease_expires_with_its_process_even_on_sigkill(tmp_path):
    code = textwrap.dedent(
        f"""
        import os, signal
        from prime_runs._journal.archive import RunArchive
        archive = RunArchive.create({str(tmp_path)!r}, "run-1", {{"name": "x"}})
        key = archive.append("episode", b'{{"id":"a"}}')
        print(key.segment, flush=True)
        input()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    segment = child.stdout.readline().strip()
    run_dir = tmp_path / "run-1"
    assert _lease.holder(run_dir, segment) == child.pid  # held by the live writer

    child.communicate("\n", timeout=30)

    assert child.returncode == -9
    assert _lease.holder(run_dir, segment) is None  # the kernel dropped it with the process


def test_a_forked_child_holds_none_of_its_parents_leases(tmp_path):
    archive = RunArchive.create(tmp_path, "run-1", {"name": "x"})
    key = archive.append("episode", b'{"id":"a"}')
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's lease is the parent's, and stays held
        try:
            holder = _lease.holder(archive.path, key.segment)
            os.write(write, str(holder).encode())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 30
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    seen = os.read(read, 64).decode()
    os.close(read)
    assert seen == str(os.getpid())
    assert _lease.holder(archive.path, key.segment) == os.getpid()
    archive.close()

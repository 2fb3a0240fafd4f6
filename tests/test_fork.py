"""Fork safety with real processes: os.fork and multiprocessing (fork, forkserver, spawn).

Every scenario runs in a fresh interpreter (the script below), so no pytest state or
stand-in thread is inherited by the children. Records are checked by id: in the
archive (every line of records/*.jsonl), on the stand-in (Prime Traces episode writes
and v0 sample rows), and in the archive's acknowledgements.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter
from pathlib import Path

import pytest

from _support import run_script, start_script
from prime_runs._journal.archive import RunArchive
from prime_runs.testing import StandInPlatform

SCRIPT = r"""
import json, os, sys, time
import multiprocessing as mp
import prime_runs as pr
import prime_runs._runs.join as _join


def episode(tag):
    return {"id": f"ep-{tag}", "env": {"id": "gsm8k"}, "ok": True, "errors": [],
            "traces": [{"id": f"tr-{tag}", "ok": True, "errors": [],
                        "timing": {"start": time.time()}}]}


_run = None


def join(carrier):
    global _run
    if carrier:  # spawn / forkserver: nothing is inherited, join through the carrier
        _run = pr.init(join=carrier)


def task(tag):
    run = _run or pr.current_run()  # fork: the parent's run, inherited
    run.log_episodes([episode(f"{tag}-{i}") for i in range(3)])
    return os.getpid()


def log_then_os_exit(tag, carrier):
    join(carrier)
    task(tag)
    os._exit(0)  # no flush, no atexit, no multiprocessing finalizers


def main():
    method, scenario = sys.argv[1], sys.argv[2]
    run = pr.init(name="fork-test", environments=["gsm8k"])
    carrier = None if method == "fork" else _join.carrier(run.span, run.id, run.mode)
    run.log_episodes([episode(f"parent-{i}") for i in range(3)])
    ctx = mp.get_context(method)
    if scenario == "pool":
        pool = ctx.Pool(2, initializer=join, initargs=(carrier,))
        pool.map(task, [f"task{i}" for i in range(4)], chunksize=1)
        pool.close()
        pool.join()  # workers exit through multiprocessing's own exit path
    else:
        child = ctx.Process(target=log_then_os_exit, args=("abrupt", carrier))
        child.start()
        child.join()
        assert child.exitcode == 0, child.exitcode
    run.log_episodes([episode(f"after-{i}") for i in range(3)])
    run.finish()
    print(json.dumps({"run_id": run.id}))


if __name__ == "__main__":
    main()
"""

OS_FORK_SCRIPT = r"""
import json, os, sys, time
import prime_runs as pr


def episode(tag):
    return {"id": f"ep-{tag}", "env": {"id": "gsm8k"}, "ok": True, "errors": [],
            "traces": [{"id": f"tr-{tag}", "ok": True, "errors": [],
                        "timing": {"start": time.time()}}]}


run = pr.init(name="os-fork", environments=["gsm8k"])
run.log_episodes([episode(f"parent-{i}") for i in range(3)])
# The stand-in is stalled: the parent's records sit in its queues (one batch in flight)
# at the fork. The child must not send them again.
pid = os.fork()
if pid == 0:
    run.log_episodes([episode(f"child-{i}") for i in range(3)])
    os._exit(0 if run.flush(60) else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
sys.stdout.write(json.dumps({"run_id": run.id, "child": pid}) + "\n")
sys.stdout.flush()
sys.stdin.readline()  # the test lifts the stall, then lets the parent finish
run.log_episodes([episode(f"after-{i}") for i in range(3)])
run.finish()
"""

METHODS = [
    m for m in ("fork", "forkserver", "spawn") if m in multiprocessing.get_all_start_methods()
]


def _expected(*groups: tuple[str, int]) -> set[str]:
    return {f"ep-{tag}-{i}" for tag, n in groups for i in range(n)}


def _archive_ids(archive: RunArchive) -> Counter[str]:
    return Counter(json.loads(data)["id"] for _, _, data in archive.iter_records())


def _run_script(tmp_path: Path, script: str, *args: str, timeout: float = 90) -> str:
    proc = run_script(tmp_path, script, *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _archive(run_id: str) -> RunArchive:
    return RunArchive(Path(os.environ["PRIME_RUNS_DIR"]) / run_id)


def _sample_ids(platform: StandInPlatform, run_id: str) -> Counter[str]:
    return Counter(row["sample_id"] for row in platform.samples(run_id))


@pytest.mark.parametrize("method", METHODS)
def test_pool_workers_write_each_record_exactly_once(
    prime_env: StandInPlatform, tmp_path: Path, method: str
) -> None:
    # Slow answers keep uploads in flight when a worker exits: only the exit drain
    # (multiprocessing's exit path skips atexit) gets them out.
    prime_env.stall(None, 0.2)
    out = _run_script(tmp_path, SCRIPT, method, "pool")
    run_id = json.loads(out.splitlines()[-1])["run_id"]
    expected = _expected(("parent", 3), *((f"task{i}", 3) for i in range(4)), ("after", 3))

    archived = _archive_ids(_archive(run_id))
    assert set(archived) == expected
    assert set(archived.values()) == {1}
    assert prime_env.episode_writes == {ep: 1 for ep in expected}
    samples = _sample_ids(prime_env, run_id)
    assert set(samples) == expected and set(samples.values()) == {1}
    # Only the owner registered and finalized the run.
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1
    assert len(prime_env.requests_for("eval_create")) == 1
    assert prime_env.server_errors == []


@pytest.mark.parametrize("method", METHODS)
def test_child_leaving_through_os_exit_keeps_its_records_in_the_journal(
    prime_env: StandInPlatform, tmp_path: Path, method: str
) -> None:
    prime_env.stall(None, 0.2)
    out = _run_script(tmp_path, SCRIPT, method, "os_exit")
    run_id = json.loads(out.splitlines()[-1])["run_id"]
    expected = _expected(("parent", 3), ("abrupt", 3), ("after", 3))

    archive = _archive(run_id)
    archived = _archive_ids(archive)
    assert set(archived) == expected
    assert set(archived.values()) == {1}
    # Whatever the child got out before os._exit went out once; the rest waits in the
    # journal, unacknowledged, for `prime-runs sync`.
    episodes = prime_env.episode_writes
    samples = _sample_ids(prime_env, run_id)
    assert set(episodes.values()) <= {1} and set(samples.values()) <= {1}
    assert _expected(("parent", 3), ("after", 3)) <= set(episodes) <= expected
    ids_by_key = {key: json.loads(data)["id"] for key, _, data in archive.iter_records()}
    acked = archive.acknowledged()
    assert {ids_by_key[k] for k in acked.get("traces", ())} <= set(episodes)
    assert {ids_by_key[k] for k in acked.get("eval_samples", ())} <= set(samples)
    assert prime_env.server_errors == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_never_resends_the_parents_queue(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.stall(None, 0.5)
    proc = start_script(tmp_path, OS_FORK_SCRIPT)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        info = json.loads(line)
        # The child has exited: the parent's records must not have come from it.
        child_segments = [
            p.name
            for p in (_archive(info["run_id"]).path / "records").iterdir()
            if f"-{info['child']}-" in p.name
        ]
        assert len(child_segments) == 1
        prime_env.unstall()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=90) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run_id = info["run_id"]
    expected = _expected(("parent", 3), ("child", 3), ("after", 3))
    archive = _archive(run_id)
    child_ids = {
        json.loads(data)["id"]
        for key, _, data in archive.iter_records()
        if key.segment == child_segments[0]
    }
    assert child_ids == _expected(("child", 3))
    assert set(_archive_ids(archive).values()) == {1}
    assert prime_env.episode_writes == {ep: 1 for ep in expected}
    samples = _sample_ids(prime_env, run_id)
    assert set(samples) == expected and set(samples.values()) == {1}
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1


HELD_SCRIPT = r"""
import json, os, threading, time
from prime_runs._forking import held_across_fork
from prime_runs.platform import _tls

lock = held_across_fork(threading.Lock())
lock.acquire()               # as a thread inside a C library's setup would hold it
released = []

def release():
    time.sleep(0.3)
    released.append(time.monotonic())
    lock.release()

threading.Thread(target=release).start()
pid = os.fork()
if pid == 0:
    # The child's copy is released: it can take the lock and build a TLS context.
    taken = lock.acquire(timeout=5)
    os._exit(0 if taken and _tls.context() is not None else 3)
forked = time.monotonic()
_, status = os.waitpid(pid, 0)
print(json.dumps({"waited": bool(released) and forked >= released[0],
                  "child": os.waitstatus_to_exitcode(status),
                  "parent_free": lock.acquire(timeout=5)}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_waits_for_a_lock_held_across_forks_and_both_sides_get_it_released(
    tmp_path: Path,
) -> None:
    # The TLS context build holds such a lock: OpenSSL's own locks, taken while it loads the
    # CA bundle, would otherwise be inherited held and hang the child's exit.
    done = run_script(tmp_path, HELD_SCRIPT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"waited": True, "child": 0, "parent_free": True}

"""Exit paths with real processes: exit without finish, `with run:` on an exception and
on Ctrl-C, a forked child's exit, and SIGKILL at an arbitrary point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from prime_runs._journal.archive import RunArchive
from prime_runs.run import CRASH_REASON
from prime_runs.testing import StandInPlatform

PRELUDE = r"""
import json, os, signal, sys, time
import prime_runs as pr
import prime_runs._runs.exithooks

# Ctrl-C raises KeyboardInterrupt even when this process was started with SIGINT ignored
# (a background job of a non-interactive shell is).
signal.signal(signal.SIGINT, signal.default_int_handler)


def episode(tag):
    return {"id": f"ep-{tag}", "env": {"id": "gsm8k"}, "ok": True, "errors": [],
            "traces": [{"id": f"tr-{tag}", "ok": True, "errors": [],
                        "timing": {"start": time.time()}}]}


def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
"""


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "scenario.py"
    path.write_text(PRELUDE + body)
    return [sys.executable, str(path)]


def _run(tmp_path: Path, body: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _script(tmp_path, body), capture_output=True, text=True, timeout=timeout, cwd=tmp_path
    )


def _said(stdout: str) -> dict[str, object]:
    return json.loads(stdout.splitlines()[0])


def _archive(run_id: object) -> RunArchive:
    return RunArchive(Path(os.environ["PRIME_RUNS_DIR"]) / str(run_id))


def _ids(archive: RunArchive) -> Counter[str]:
    return Counter(json.loads(data)["id"] for _, _, data in archive.iter_records())


# -- exit without finish -------------------------------------------------------------


def test_exit_without_finish_closes_the_run_out_as_crashed(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    proc = _run(
        tmp_path,
        """
run = pr.init(name="forgot-finish", environments=["gsm8k"])
run.log_episodes([episode(i) for i in range(3)])
say(id=run.id)
""",
    )
    assert proc.returncode == 0, proc.stderr
    run_id = _said(proc.stdout)["id"]
    evaluation = prime_env.evaluations[str(run_id)]
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"] == f"crashed: {CRASH_REASON}"
    assert evaluation["finalize_count"] == 0
    # Drained before the close-out: the records are on the platform, acknowledged.
    assert set(prime_env.episode_writes) == {"ep-0", "ep-1", "ep-2"}
    archive = _archive(run_id)
    assert archive.status()["status"] == "crashed"
    assert archive.status()["closed"] is True
    assert len(archive.acknowledged()["traces"]) == 3


def test_exit_is_bounded_when_uploads_stall(prime_env: StandInPlatform, tmp_path: Path) -> None:
    # Sample appends hang far longer than the exit budget and Prime Traces is down; the
    # process must still end (the subprocess timeout catches a hang) and keep the records,
    # leaving the run open for `prime-runs sync`, which closes it as crashed once they are
    # stored (a closed run takes no more writes).
    prime_env.stall("samples_append", 300)
    prime_env.outage(503, routes=["traces_upload"])
    proc = _run(
        tmp_path,
        """
prime_runs._runs.exithooks.EXIT_TIMEOUT = 2.0
run = pr.init(name="stalled", environments=["gsm8k"])
run.log_episodes([episode(i) for i in range(5)])
say(id=run.id)
""",
        timeout=60,
    )
    prime_env.unstall()
    assert proc.returncode == 0, proc.stderr
    run_id = _said(proc.stdout)["id"]
    evaluation = prime_env.evaluations[str(run_id)]
    assert (evaluation["status"], evaluation["error_message"]) == ("RUNNING", None)
    archive = _archive(run_id)
    assert _ids(archive) == Counter({f"ep-{i}": 1 for i in range(5)})
    assert archive.acknowledged() == {}  # nothing confirmed: all of it waits for sync
    status = archive.status()
    owed = {"traces": 5, "eval_samples": 5}
    assert status["status"] == "crashed" and status["failed"] == owed
    assert status["closed"] is False and status["left_open"] == owed


# -- with run: ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raise_line", "platform_status", "reason", "local_status"),
    [
        ("raise ValueError('boom')", "FAILED", "ValueError: boom", "failed"),
        ("signal.raise_signal(signal.SIGINT)", "CANCELLED", "interrupted", "cancelled"),
    ],
    ids=["exception", "ctrl-c"],
)
def test_with_block_closes_the_run_and_lets_the_error_propagate(
    prime_env: StandInPlatform,
    tmp_path: Path,
    raise_line: str,
    platform_status: str,
    reason: str,
    local_status: str,
) -> None:
    proc = _run(
        tmp_path,
        f"""
run = pr.init(name="with-block", environments=["gsm8k"])
say(id=run.id)
with run:
    run.log_episodes(episode("inside"))
    {raise_line}
""",
    )
    assert proc.returncode != 0
    assert ("KeyboardInterrupt" if local_status == "cancelled" else "ValueError") in proc.stderr
    run_id = _said(proc.stdout)["id"]
    evaluation = prime_env.evaluations[str(run_id)]
    assert (evaluation["status"], evaluation["error_message"]) == (platform_status, reason)
    assert _archive(run_id).status()["status"] == local_status
    assert prime_env.episode_writes == {"ep-inside": 1}


# -- a forked child's exit -------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_childs_exit_never_closes_the_run(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    proc = _run(
        tmp_path,
        """
run = pr.init(name="fork-exit", environments=["gsm8k"])
pid = os.fork()
if pid == 0:
    run.log_episodes(episode("child"))
    sys.exit(0)  # a normal exit: atexit runs in the child
_, status = os.waitpid(pid, 0)
say(id=run.id, child=os.waitstatus_to_exitcode(status),
    status=json.load(open(os.path.join(run.archive_path, "status.json")))["status"])
run.finish()
""",
    )
    assert proc.returncode == 0, proc.stderr
    said = _said(proc.stdout)
    assert said["child"] == 0 and said["status"] == "running"
    creates_and_closes = [
        r.route for r in prime_env.requests if r.route in ("eval_update", "eval_finalize")
    ]
    assert creates_and_closes == ["eval_update", "eval_finalize"]  # the parent's finish only
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1 and evaluation["error_message"] is None
    assert prime_env.episode_writes == {"ep-child": 1}  # the child's exit drained it


# -- SIGKILL ---------------------------------------------------------------------------

LOG_FOREVER = """
run = pr.init(name="killed", environments=["gsm8k"])
say(id=run.id)
i = 0
while True:
    run.log_episodes(episode(f"k{i}"))
    say(logged=f"ep-k{i}")  # log_episodes has returned for this record
    i += 1
"""


@pytest.mark.parametrize("online", [False, True], ids=["offline", "online-stalled"])
def test_sigkill_mid_run_keeps_every_logged_record_readable(
    prime_env: StandInPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, online: bool
) -> None:
    if online:
        prime_env.stall("traces_upload", 0.5)
    else:
        monkeypatch.setenv("PRIME_RUNS_MODE", "offline")
    proc = subprocess.Popen(
        _script(tmp_path, LOG_FOREVER),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    try:
        run_id = json.loads(proc.stdout.readline())["id"]
        logged = [json.loads(proc.stdout.readline())["logged"] for _ in range(200)]
    finally:
        proc.kill()  # SIGKILL, wherever the child happens to be
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    archive = _archive(run_id)
    archived = _ids(archive)  # a torn last line, if any, is skipped, never an error
    assert set(logged) <= set(archived)
    assert set(archived.values()) == {1}
    assert archive.status()["status"] == "running"
    if online:
        ids_by_key = {key: json.loads(data)["id"] for key, _, data in archive.iter_records()}
        acked = {ids_by_key[k] for k in archive.acknowledged().get("traces", ())}
        assert acked <= set(prime_env.episode_writes)
        assert set(prime_env.episode_writes.values()) <= {1}

"""Opt-in signal handling: SIGTERM closes the run as CANCELLED and the application's own
handler still runs (real processes and real signals), plus the installer's rules."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import prime_runs._runs.exithooks as _exit
from _support import start_script
from prime_runs._journal.archive import RunArchive
from prime_runs.testing import StandInPlatform

SCRIPT = r"""
import json, os, signal, sys, time
import prime_runs as pr


def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


app_handler, handle = sys.argv[1], sys.argv[2] == "handle"
if app_handler == "app":
    def on_term(signum, frame):
        # Chained after prime-runs: the run is already closed when the app's handler runs.
        say(app_handler_ran=True, run_status=run.status.value)
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)

run = pr.init(name="terminated", environments=["gsm8k"], handle_signals=handle)
run.log_episodes({"id": "ep-before-term", "env": {"id": "gsm8k"},
                  "traces": [{"id": "tr-before-term", "timing": {"start": time.time()}}]})
say(id=run.id)
sys.stdin.readline()  # blocks until the test's SIGTERM arrives
say(unreachable=True)
"""


def _terminate(tmp_path: Path, *args: str) -> tuple[int, list[dict[str, object]]]:
    proc = start_script(tmp_path, SCRIPT, *args)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = proc.stdout.readline()
        assert first, proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [json.loads(line) for line in [first, *out.splitlines()] if line.strip()]
    return proc.returncode, lines


def _archive(tmp_path: Path, run_id: object) -> RunArchive:
    return RunArchive(Path(os.environ["PRIME_RUNS_DIR"]) / str(run_id))


def test_sigterm_cancels_the_run_then_runs_the_applications_handler(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    code, lines = _terminate(tmp_path, "app", "handle")
    assert code == 0  # the application's handler decided how the process ends
    run_id = lines[0]["id"]
    assert lines[1:] == [{"app_handler_ran": True, "run_status": "cancelled"}]
    evaluation = prime_env.evaluations[str(run_id)]
    assert (evaluation["status"], evaluation["error_message"]) == (
        "CANCELLED",
        "received SIGTERM",
    )
    assert prime_env.episode_writes == {"ep-before-term": 1}
    assert _archive(tmp_path, run_id).status()["status"] == "cancelled"


def test_sigterm_without_an_application_handler_still_terminates(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    code, lines = _terminate(tmp_path, "none", "handle")
    assert code == -signal.SIGTERM  # the default action, after the close-out
    run_id = lines[0]["id"]
    assert len(lines) == 1
    assert prime_env.evaluations[str(run_id)]["status"] == "CANCELLED"
    assert _archive(tmp_path, run_id).status()["status"] == "cancelled"


def test_without_handle_signals_sigterm_is_left_to_the_application(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    code, lines = _terminate(tmp_path, "none", "no")
    assert code == -signal.SIGTERM
    run_id = lines[0]["id"]
    # Killed by the signal: nothing closed the run, its records are in the journal.
    assert prime_env.evaluations[str(run_id)]["status"] == "RUNNING"
    archive = _archive(tmp_path, run_id)
    assert archive.status()["status"] == "running"
    assert [json.loads(d)["id"] for _, _, d in archive.iter_records()] == ["ep-before-term"]


# -- the installer, in process (SIGUSR1, restored afterwards) ---------------------------


@pytest.fixture
def sigusr1() -> Iterator[int]:
    signum = signal.SIGUSR1
    saved = signal.getsignal(signum)
    yield signum
    signal.signal(signum, saved)
    _exit._signal_handlers.pop(signum, None)


def test_an_ignored_signal_is_left_alone(sigusr1: int) -> None:
    signal.signal(sigusr1, signal.SIG_IGN)
    assert _exit.install_signal_handlers((sigusr1,)) == []
    assert signal.getsignal(sigusr1) == signal.SIG_IGN


def test_installing_twice_wraps_the_application_handler_once(sigusr1: int) -> None:
    calls: list[int] = []
    signal.signal(sigusr1, lambda num, frame: calls.append(num))
    assert _exit.install_signal_handlers((sigusr1,)) == [sigusr1]
    first = signal.getsignal(sigusr1)
    assert _exit.install_signal_handlers((sigusr1,)) == [sigusr1]
    assert signal.getsignal(sigusr1) is first
    signal.raise_signal(sigusr1)
    assert calls == [sigusr1]  # chained exactly once


def test_installing_from_another_thread_warns(
    sigusr1: int, caplog: pytest.LogCaptureFixture
) -> None:
    result: list[list[int]] = []
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        thread = threading.Thread(target=lambda: result.append(_exit.install_signal_handlers()))
        thread.start()
        thread.join()
    assert result == [[]]
    assert "main thread" in caplog.text

"""``prime-runs ls`` and ``show`` over a real archive, the progress bar, and the liveness
check that decides whether a run still belongs to a live process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.liveness import pid_alive
from prime_runs._progress import Progress
from prime_runs._records.access import reward, summary_trace_index
from prime_runs.cli import main


def _run(root: Path, episodes: list[dict], name: str, **finish) -> pr.Run:
    run = pr.init(
        name=name,
        environments=["gsm8k", "alice/math"],
        model="Qwen/Qwen3-8B",
        framework="verifiers",
        config={"sampling": {"t": 0.7}, "seed": 3},
        mode="offline",
        dir=root,
    )
    run.log_episodes(episodes)
    run.finish(**finish)
    return run


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid names no process now
    return child.pid


def test_ls_without_runs_says_so(tmp_path, capsys):
    assert main(["ls", "--dir", str(tmp_path / "nothing")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("No runs under ")
    assert "PRIME_RUNS_DIR" in out


def test_ls_lists_each_run_with_status_counts_reward_and_pending(tmp_path, episodes, capsys):
    done = _run(tmp_path, episodes, "good-run")
    failed = _run(tmp_path, episodes[:3], "bad-run", status="failed", error="boom")
    crashed = _run(tmp_path, episodes[:2], "crashed-run")
    # A producer that died mid-run leaves status "running" with a pid that is gone.
    archive = RunArchive(Path(crashed.archive_path))
    archive.write_status({**archive.status(), "status": "running", "pid": _dead_pid()})

    assert main(["ls", "--dir", str(tmp_path)]) == 0

    lines = capsys.readouterr().out.splitlines()
    header = ["ID", "NAME", "MODE", "STATUS", "EPISODES", "REWARD", "KIND", "PENDING"]
    assert lines[0].split() == header
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows.keys() == {done.id, failed.id, crashed.id}
    summary = RunArchive(Path(done.archive_path)).status()["summary"]
    assert rows[done.id].split()[1:6] == [
        "good-run",
        "offline",
        "completed",
        "20",
        f"{summary['avg_reward']:.4g}",
    ]
    assert rows[done.id].endswith("20 traces, 20 samples, close")
    assert rows[failed.id].split()[1:5] == ["bad-run", "offline", "failed", "3"]
    assert rows[crashed.id].split()[3] == "crashed?"


def test_ls_shows_nothing_pending_once_a_sink_acknowledged_everything(tmp_path, episodes, capsys):
    run = _run(tmp_path, episodes[:2], "acked")
    archive = RunArchive(Path(run.archive_path))
    keys = [key for key, _, _ in archive.iter_records()]
    archive.ack("traces", keys)
    archive.write_status({**archive.status(), "closed": True})

    main(["ls", "--dir", str(tmp_path)])

    row = capsys.readouterr().out.splitlines()[1]
    assert row.endswith("2 samples")


def test_show_describes_the_run(tmp_path, episodes, capsys):
    run = _run(tmp_path, episodes, "shown", status="failed", error="ValueError: boom")
    archive = RunArchive(Path(run.archive_path))
    keys = [key for key, _, _ in archive.iter_records()]
    archive.ack("eval_samples", keys[:5])
    expected = [reward(e["traces"][summary_trace_index(e["traces"])]) for e in episodes]

    assert main(["show", run.id, "--dir", str(tmp_path)]) == 0

    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run {run.id}"
    fields = {
        line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
        for line in out.splitlines()[1:]
        if line.startswith("  ") and not line.startswith("    ")
    }
    assert fields["name"] == "shown"
    assert fields["mode"] == "offline"
    assert fields["platform id"] == "- (not synced yet)"
    assert fields["environments"] == "gsm8k, alice/math"
    assert fields["model"] == "Qwen/Qwen3-8B"
    assert fields["framework"] == "verifiers"
    assert fields["config"] == 'sampling={"t": 0.7}'
    assert f"  {'':<14}seed=3" in out.splitlines()  # every value, one per line
    assert fields["status"] == "failed (not closed on the platform yet)"
    assert fields["error"] == "ValueError: boom"
    assert fields["records"] == "20 (20 episodes)"
    assert fields["traces"] == "0/20 acknowledged, 20 pending"
    assert fields["samples"] == "5/20 acknowledged, 15 pending"
    assert fields["pending"] == "20 traces, 15 samples, close"
    mean = sum(expected) / len(expected)
    assert fields["rewards"].startswith(f"n=20 mean={mean:.4g} min={min(expected):.4g}")
    assert f"max={max(expected):.4g}" in fields["rewards"]


def test_show_finds_a_run_by_folder_path(tmp_path, episodes, capsys):
    run = _run(tmp_path, episodes[:1], "by-path")
    assert main(["show", run.archive_path]) == 0
    assert "by-path" in capsys.readouterr().out


def test_show_of_an_unknown_run_fails(tmp_path, capsys):
    assert main(["show", "run-nope", "--dir", str(tmp_path)]) == 2
    assert "no run 'run-nope'" in capsys.readouterr().err


def test_the_console_script_runs_as_a_module(tmp_path, episodes):
    run = _run(tmp_path, episodes[:1], "module")
    env = {**os.environ, "PRIME_RUNS_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "ls"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert run.id in result.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli"], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2
    assert "ls" in usage.stderr and "sync" in usage.stderr


def test_progress_redraws_one_line_on_a_terminal():
    stream = io.StringIO()
    progress = Progress(stream, interactive=True)
    progress.start("run-1", 4, "4 traces")
    progress.advance(2)
    progress.advance(2)
    progress.finish()
    text = stream.getvalue()
    assert "\n" not in text
    assert "run-1 [##############--------------] 2/4" in text
    assert "4/4" in text
    assert text.endswith("\r")  # cleared for the result line


def test_progress_is_one_plain_line_otherwise():
    stream = io.StringIO()
    progress = Progress(stream, interactive=False)
    progress.start("run-1", 4, "4 traces")
    progress.advance(4)
    progress.finish()
    assert stream.getvalue() == "run-1: uploading 4 traces\n"


def test_pid_alive_tells_live_dead_and_zombie_processes_apart():
    assert pid_alive(os.getpid())
    assert not pid_alive(_dead_pid())
    assert not pid_alive(None)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        _wait_until_exited(child.pid)
        if Path(f"/proc/{child.pid}/stat").exists():
            assert not pid_alive(child.pid)  # a zombie never closes its run again
    finally:
        child.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_reused_pid_does_not_count_as_the_owner():
    # This process started before "now": with a later sighting it cannot be a reused pid,
    # with an earlier one it must be.
    assert pid_alive(os.getppid(), since=None)
    assert not pid_alive(os.getppid(), since=0.0)


def _wait_until_exited(pid: int) -> None:
    """Until the child is gone or a zombie (it is not reaped yet)."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return
        time.sleep(0.01)


# -- friction found by a new user (issue 12) ----------------------------------------------


def _cli(root: Path, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "PRIME_RUNS_DIR": str(root)}
    return subprocess.Popen(
        [sys.executable, "-m", "prime_runs.cli", *args], env=env, stderr=subprocess.PIPE, **popen
    )


@pytest.mark.parametrize("command", ["ls", "show"])
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path, episodes, command):
    run = _run(tmp_path, episodes, "piped")
    args = ["show", run.id] if command == "show" else ["ls"]
    read, write = os.pipe()
    proc = _cli(tmp_path, *args, stdout=write)
    os.close(write)
    os.close(read)  # like `| head` exiting before the command prints anything

    _, err = proc.communicate(timeout=60)

    assert proc.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()


def test_an_ambiguous_id_prefix_lists_the_matches(tmp_path, episodes, capsys):
    first = _run(tmp_path, episodes[:1], "one")
    second = _run(tmp_path, episodes[:1], "two")

    assert main(["show", "run-", "--dir", str(tmp_path)]) == 2

    err = capsys.readouterr().err
    assert f"'run-' matches 2 runs under {tmp_path}; give more of the id" in err
    assert first.id in err and second.id in err
    assert main(["show", first.id[:-2], "--dir", str(tmp_path)]) == 0  # unique prefix


def test_a_path_outside_the_root_is_reported_as_a_path(tmp_path, episodes, capsys):
    elsewhere = tmp_path / "elsewhere"
    run = _run(elsewhere, episodes[:1], "elsewhere")
    not_a_run = tmp_path / "plain-folder"
    not_a_run.mkdir()
    root = str(tmp_path / "root")

    assert main(["show", str(not_a_run), "--dir", root]) == 2
    assert f"{not_a_run} is a folder but not a run folder (it has no run.json)" in (
        capsys.readouterr().err
    )
    assert main(["show", str(tmp_path / "gone" / "run-x"), "--dir", root]) == 2
    assert f"no run folder at {tmp_path / 'gone' / 'run-x'}" in capsys.readouterr().err
    assert main(["show", run.archive_path, "--dir", root]) == 0  # any run folder works
    assert capsys.readouterr().out.startswith(f"run {run.id}\n")


def test_help_and_docs_say_the_same_about_run(capsys):
    from prime_runs.cli import RUN_HELP

    with pytest.raises(SystemExit):
        main(["show", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    docs = " ".join((Path(__file__).parents[1] / "docs" / "cli.md").read_text().split())

    assert RUN_HELP in help_text
    assert f"`RUN` is {RUN_HELP}." in docs

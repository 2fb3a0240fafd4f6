"""A hostile archive never stops ``sync``, ``show``, ``ls`` or ``report`` (issue 23): a line
with a lone surrogate escape, a record nested as deep as the SDK accepts, and symbolic links
inside a run folder, which no command reads through. Real CLI subprocesses; ``sync`` talks
to the stand-in platform over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _support import archive_root, offline_run, only_segment, run_cli
from prime_runs._journal.archive import RunArchive

SECRET = "outside-the-run-folder-7f3a"


def _clean(*results: subprocess.CompletedProcess) -> None:
    for result in results:
        assert "Traceback" not in result.stderr, result.stderr


def _assert_uploaded_once(platform: Any, episodes: list[dict]) -> None:
    assert platform.episode_writes == {e["id"]: 1 for e in episodes}
    ((eval_id, evaluation),) = platform.evaluations.items()
    assert evaluation["status"] == "PROCESSING"  # finalized, not left running
    rows = platform.samples(eval_id)
    assert sorted(r["sample_id"] for r in rows) == sorted(e["id"] for e in episodes)


def test_a_lone_surrogate_line_is_counted_and_the_rest_is_synced(prime_env, episodes):
    run = offline_run(episodes[:6], "hostile")
    with only_segment(run).open("ab") as f:
        f.write(b'{"id": "ep-surrogate", "traces": [], "note": "\\ud800"}\n')

    ls, show, report = run_cli("ls"), run_cli("show", run.id), run_cli("report", run.id)
    first = run_cli("sync", run.id)
    again = run_cli("sync", run.id)

    _clean(ls, show, report, first, again)
    assert (ls.returncode, show.returncode, report.returncode) == (0, 0, 0)
    assert "1 line: a string in it holds a lone UTF-16 surrogate" in show.stdout
    assert first.returncode == 1, first.stdout  # a rejected line is shown as a failure
    assert "1 trace rejected" in first.stdout and "lone UTF-16 surrogate" in first.stdout
    _assert_uploaded_once(prime_env, episodes[:6])
    assert again.returncode == 0, again.stdout  # settled: nothing is retried


# A producer of its own (not under pytest's deep stack) logs a record nested 985 deep, which
# the SDK encodes and journals; the report's reader once hit RecursionError on it.
_DEEP_PRODUCER = """
import json, sys, prime_runs as pr
episodes = json.loads(sys.argv[1])
value = "bottom"
for _ in range(985):
    value = {"a": value}
deep = dict(episodes[0], id="ep-deep", errors=[{"message": value}])
deep["task"] = {"data": {"answer": value}}
run = pr.init(name="deep", environments=["gsm8k"], mode="offline")
run.log_episodes([*episodes, deep])
run.finish()
print(run.id, run.logged_records)
"""


def test_a_deeply_nested_record_the_sdk_accepted_does_not_stop_report(prime_env, episodes):
    produced = subprocess.run(
        [sys.executable, "-c", _DEEP_PRODUCER, json.dumps(episodes[:2])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    run_id, logged = produced.stdout.split()
    assert logged == "3"  # the SDK took it, so every reader must cope with it

    show, report, sync = run_cli("show", run_id), run_cli("report", run_id), run_cli("sync", run_id)

    _clean(show, report, sync)
    assert (show.returncode, report.returncode) == (0, 0), report.stderr
    page = (archive_root() / run_id / "report.html").read_text()
    assert episodes[1]["id"] in page
    # Re-encoding it for upload may pass Python's recursion limit in sync's deeper stack
    # (interpreter-dependent): then it is rejected with that reason, and the rest lands.
    assert sync.returncode == 0 or "nested too deeply to encode" in sync.stdout, sync.stdout
    assert prime_env.episode_writes.get(episodes[0]["id"]) == 1, (sync.stdout, sync.stderr)


def _outside_record(tmp_path: Path) -> Path:
    """A file outside the run folder that reads as valid record lines."""
    outside = tmp_path / "elsewhere.jsonl"
    trace = {"id": f"tr-{SECRET}", "timing": {"start": time.time()}}
    line = json.dumps({"id": f"ep-{SECRET}", "env": {"id": "x"}, "ok": True, "traces": [trace]})
    outside.write_text((line + "\n") * 27)
    return outside


def test_no_command_reads_through_a_link_inside_a_run_folder(prime_env, episodes, tmp_path):
    run = offline_run(episodes[:3], "hostile")
    folder = Path(run.archive_path)
    outside = _outside_record(tmp_path)
    (folder / "records" / "episode-1-aaaaaa.jsonl").symlink_to(outside)
    (folder / "acks").mkdir(exist_ok=True)
    (folder / "acks" / "1-bbbbbb.jsonl").symlink_to(outside)

    ls, show, report = run_cli("ls"), run_cli("show", run.id), run_cli("report", run.id)
    sync = run_cli("sync", run.id)

    _clean(ls, show, report, sync)
    assert (ls.returncode, show.returncode, report.returncode, sync.returncode) == (0, 0, 0, 0)
    (row,) = [line for line in ls.stdout.splitlines() if line.startswith(run.id)]
    assert row.split()[4] == "3", row  # the 27 lines behind the link are not counted
    assert "links:        2 symbolic links in the run folder, not read" in show.stdout
    assert "records/episode-1-aaaaaa.jsonl" in show.stdout
    page = (folder / "report.html").read_text()
    assert SECRET not in page
    assert '"links":2' in page.replace(" ", "")
    assert "2 symbolic links in the run folder not read" in sync.stdout
    _assert_uploaded_once(prime_env, episodes[:3])
    assert not any(SECRET in key for key in prime_env.episode_writes)


def test_a_linked_status_json_is_not_read_and_says_so(episodes, tmp_path):
    run = offline_run(episodes[:1], "hostile")
    folder = Path(run.archive_path)
    outside = tmp_path / "status.json"
    outside.write_text((folder / "status.json").read_text())
    (folder / "status.json").unlink()
    (folder / "status.json").symlink_to(outside)

    show = run_cli("show", run.id)

    _clean(show)
    assert show.returncode == 0
    assert "status.json is a symbolic link (not followed); replace it with the file" in show.stdout
    assert RunArchive(folder).status() == {}


def test_report_never_writes_through_a_link_in_the_run_folder(episodes, tmp_path):
    run = offline_run(episodes[:1], "hostile")
    folder = Path(run.archive_path)
    target = tmp_path / "outside.txt"
    target.write_text("keep me")
    (folder / ".report.html.tmp").symlink_to(target)
    (folder / "report.html").symlink_to(target)

    report = run_cli("report", run.id)

    _clean(report)
    assert report.returncode == 0
    assert target.read_text() == "keep me"
    page = folder / "report.html"
    assert not page.is_symlink() and "<html" in page.read_text()

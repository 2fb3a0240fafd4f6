"""The journal under a file size limit, a full disk and symbolic links (issue 12, items 2, 3
and 10): real short writes from ``RLIMIT_FSIZE`` and a tiny tmpfs, in child processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
from _support import DATA
from prime_runs.cli import main

resource = pytest.importorskip("resource")  # RLIMIT_FSIZE is POSIX

# Logs `total` episodes with the file size limit at `limit` bytes, then lifts the limit
# (the disk has room again) and logs 20 more. Prints what escaped and what the run says.
CHILD = r"""
import json, os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a core dump
import prime_runs as pr

data, limit, total, on_error, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:6]
episodes = [json.loads(line) for line in open(data)]
run = pr.init(name="fsize", environments=[{"id": "env-1"}], mode=mode, on_error=on_error)
escaped = []

def log(i):
    episode = dict(episodes[i % len(episodes)], id=f"e-{i}")
    episode["traces"] = [dict(t, id=f"t-{i}-{j}") for j, t in enumerate(episode["traces"])]
    try:
        run.log_episodes(episode)
    except BaseException as exc:
        escaped.append(f"{i}: {type(exc).__name__}: {exc}")

soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
for i in range(total):
    log(i)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
for i in range(total, total + 20):
    log(i)
finish_error = None
try:
    run.finish()
except BaseException as exc:
    finish_error = type(exc).__name__
print(json.dumps({
    "escaped": escaped, "finish_error": finish_error, "path": run.archive_path,
    "id": run.id, "mode": run.mode, "logged": run.logged_records,
    "dropped": run.dropped_records, "errors": run.errors, "status": run.status.value,
}))
"""


def _run_child(total: int, limit: int, on_error: str, mode: str) -> dict[str, Any]:
    args = (on_error, mode)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(DATA / "episodes.jsonl"), str(limit), str(total), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _journal(path: str) -> tuple[list[str], dict[str, bytes]]:
    """Ids of every journaled record (each line must parse on its own), and the segments."""
    ids: list[str] = []
    segments: dict[str, bytes] = {}
    for segment in sorted((Path(path) / "records").glob("*.jsonl")):
        data = segment.read_bytes()
        segments[segment.name] = data
        assert data.endswith(b"\n"), f"{segment.name} ends inside a line"
        for line in data.splitlines():
            ids.append(json.loads(line)["id"])  # a torn fragment glued to a record fails here
    return ids, segments


def _assert_acks_point_at_line_starts(path: str, segments: dict[str, bytes]) -> int:
    acked = 0
    for ack_file in (Path(path) / "acks").glob("*.jsonl"):
        for line in ack_file.read_bytes().splitlines():
            entry = json.loads(line)
            data = segments[entry["f"]]
            for offset in entry["o"]:
                assert offset == 0 or data[offset - 1 : offset] == b"\n", (entry["f"], offset)
                acked += 1
    return acked


def _status(path: str) -> dict[str, Any]:
    return json.loads((Path(path) / "status.json").read_text())


def test_file_size_limit_offline_never_raises_and_keeps_every_line_whole(isolated_env):
    out = _run_child(total=60, limit=200_000, on_error="warn", mode="offline")
    assert out["escaped"] == [] and out["finish_error"] is None
    assert out["status"] == "completed"
    ids, _ = _journal(out["path"])
    status = _status(out["path"])
    lost = status["unjournaled"]
    assert lost > 0, "the limit must have cut the journal off"
    # Every record log_episodes() accepted is on a line of its own; the rest are counted.
    assert len(ids) == len(set(ids)) == out["logged"] == status["logged"]
    assert out["logged"] + lost == 80
    assert out["dropped"] == lost  # offline, a record the journal could not hold is lost
    assert {f"e-{i}" for i in range(60, 80)} <= set(ids)  # journaling resumed
    assert any("journal could not store" in e for e in out["errors"])


def test_file_size_limit_under_raise_surfaces_a_typed_error_at_finish(isolated_env):
    out = _run_child(total=60, limit=200_000, on_error="raise", mode="offline")
    assert out["escaped"] == []  # never an untyped OSError into the producer
    assert out["finish_error"] == "JournalError"
    assert out["status"] == "completed"  # the run still reached its terminal status
    ids, _ = _journal(out["path"])
    assert len(ids) == out["logged"] and {f"e-{i}" for i in range(60, 80)} <= set(ids)


def test_file_size_limit_online_still_delivers_every_record(prime_env):
    out = _run_child(total=60, limit=200_000, on_error="warn", mode="online")
    assert out["mode"] == "online" and out["escaped"] == [] and out["finish_error"] is None
    everything = {f"e-{i}" for i in range(80)}
    assert set(prime_env.episodes) == everything  # the platform got them all
    assert {r["sample_id"] for r in prime_env.samples(out["id"])} == everything
    ids, segments = _journal(out["path"])
    status = _status(out["path"])
    assert status["unjournaled"] > 0 and len(ids) + status["unjournaled"] == 80
    assert out["logged"] == 80 and status["failed"] == {}
    assert _assert_acks_point_at_line_starts(out["path"], segments) == 2 * len(ids)


def test_offline_records_that_survived_a_size_limit_sync_exactly_once(prime_env):
    out = _run_child(total=60, limit=200_000, on_error="warn", mode="offline")
    ids, _ = _journal(out["path"])
    assert main(["sync", out["id"]]) == 0
    assert set(prime_env.episodes) == set(ids)


# -- ENOSPC: a real full filesystem (a tiny tmpfs in a private mount namespace) --------

ENOSPC_CHILD = r"""
import json, os, sys
import prime_runs as pr

mount = sys.argv[1]
episodes = [json.loads(line) for line in open(sys.argv[2])]
filler = os.path.join(mount, "filler")
with open(filler, "wb") as f:  # most of the space, so the journal fills it up soon
    f.write(b"x" * 320_000)
run = pr.init(name="full", environments=[{"id": "env-1"}], mode="offline", dir=mount + "/a")
escaped = []
for i in range(70):
    if i == 50:
        os.unlink(filler)  # the disk has room again
    episode = dict(episodes[i % len(episodes)], id=f"e-{i}")
    try:
        run.log_episodes(episode)
    except BaseException as exc:
        escaped.append(f"{type(exc).__name__}: {exc}")
run.finish()
ids = [json.loads(line)["id"] for p in sorted(os.listdir(run.archive_path + "/records"))
       for line in open(run.archive_path + "/records/" + p, "rb")]
status = json.load(open(run.archive_path + "/status.json"))
print(json.dumps({"escaped": escaped, "ids": ids, "logged": run.logged_records,
                  "unjournaled": status["unjournaled"], "errors": run.errors}))
"""


def _tiny_tmpfs_command(mount: Path) -> list[str] | None:
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", f"mount -t tmpfs -o size=512k tmpfs {mount}"],
        capture_output=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return None
    return [unshare, "-rm", "sh", "-c", f'mount -t tmpfs -o size=512k tmpfs {mount} && "$@"', "-"]


def test_a_full_disk_is_counted_and_journaling_resumes(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    prefix = _tiny_tmpfs_command(mount)
    if prefix is None:  # EFBIG above exercises the same code path
        pytest.skip("no unprivileged mount namespace here to make a small filesystem")
    done = subprocess.run(
        [*prefix, sys.executable, "-c", ENOSPC_CHILD, str(mount), str(DATA / "episodes.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["escaped"] == []
    assert out["unjournaled"] > 0 and len(out["ids"]) == out["logged"]
    assert out["logged"] + out["unjournaled"] == 70
    assert {f"e-{i}" for i in range(50, 70)} <= set(out["ids"])
    assert any("No space left" in e for e in out["errors"])


# -- symbolic links inside a run folder -----------------------------------------------


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    return outside


def test_acks_dir_replaced_by_a_link_is_never_written_through(prime_env, episodes, tmp_path):
    outside = _outside(tmp_path)
    run = pr.init(name="links", environments=[{"id": "env-1"}])
    acks = Path(run.archive_path) / "acks"
    acks.rmdir()
    acks.symlink_to(outside, target_is_directory=True)
    run.log_episodes(episodes[:3])
    run.finish()
    assert list(outside.iterdir()) == []
    assert set(prime_env.episodes) == {e["id"] for e in episodes[:3]}  # delivery unaffected
    # Both sinks' batches failed to record; one report, not one per batch.
    assert len([e for e in run.errors if "symbolic link" in e and "acks" in e]) == 1


def test_records_dir_replaced_by_a_link_is_a_counted_journal_failure(episodes, tmp_path):
    outside = _outside(tmp_path)
    run = pr.init(name="links", environments=[{"id": "env-1"}], mode="offline")
    records = Path(run.archive_path) / "records"
    records.rmdir()
    records.symlink_to(outside, target_is_directory=True)
    run.log_episodes(episodes[:2])
    run.finish()
    assert list(outside.iterdir()) == []
    assert run.dropped_records == 2
    assert any("symbolic link" in e for e in run.errors)


def test_status_json_replaced_by_a_link_replaces_the_link_not_its_target(tmp_path):
    outside = _outside(tmp_path)
    target = outside / "precious.json"
    target.write_text('{"keep": true}')
    run = pr.init(name="links", environments=[{"id": "env-1"}], mode="offline")
    status = Path(run.archive_path) / "status.json"
    status.unlink()
    status.symlink_to(target)
    run.finish()
    assert target.read_text() == '{"keep": true}'
    assert not status.is_symlink() and json.loads(status.read_text())["status"] == "completed"


def test_sync_refuses_a_lock_file_that_is_a_link(prime_env, episodes, tmp_path, capsys):
    outside = _outside(tmp_path)
    run = pr.init(name="links", environments=[{"id": "env-1"}], mode="offline")
    run.log_episodes(episodes[:2])
    run.finish()
    lock = Path(run.archive_path) / ".sync.lock"
    lock.symlink_to(outside / "lock")
    assert main(["sync", run.id]) == 1
    assert list(outside.iterdir()) == []
    captured = capsys.readouterr()
    assert "symbolic link" in captured.out + captured.err
    assert prime_env.episodes == {}


def test_sync_acks_through_a_linked_acks_dir_are_refused(prime_env, episodes, tmp_path):
    outside = _outside(tmp_path)
    run = pr.init(name="links", environments=[{"id": "env-1"}], mode="offline")
    run.log_episodes(episodes[:2])
    run.finish()
    acks = Path(run.archive_path) / "acks"
    acks.rmdir()
    acks.symlink_to(outside, target_is_directory=True)
    main(["sync", run.id])
    assert list(outside.iterdir()) == []


def test_open_in_run_names_the_link(tmp_path):
    from prime_runs._journal.archive import open_in_run
    from prime_runs.errors import JournalError

    outside = _outside(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "acks").symlink_to(outside, target_is_directory=True)
    with pytest.raises(JournalError, match=r"symbolic link .*acks"):
        open_in_run(run_dir, "acks/x.jsonl", os.O_WRONLY | os.O_CREAT)
    (run_dir / "lock").symlink_to(outside / "lock")
    with pytest.raises(JournalError, match="real file"):
        open_in_run(run_dir, "lock", os.O_RDWR | os.O_CREAT)
    assert list(outside.iterdir()) == []

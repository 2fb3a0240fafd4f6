"""Quickstart: track an eval run offline, the way verifiers does. No API key needed.

    make demo            # or: python examples/quickstart.py

The run goes to the local archive (``PRIME_RUNS_DIR``, default ``./prime-runs``);
``prime-runs ls`` / ``show`` read it, ``prime-runs report`` draws it as one HTML file
(written at the end of this script), and ``prime-runs sync`` uploads it later.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from _fixture_records import fresh_episodes

import prime_runs as pr

NUM_EPISODES = 36


def eval_loop(run: pr.Run, episodes: list[dict[str, Any]]) -> None:
    """Roll out on the main thread; a worker logs each finished episode, one at a time."""
    finished: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def log_worker() -> None:
        while (episode := finished.get()) is not None:
            run.log_episodes(episode)  # encoded and archived before this returns

    worker = threading.Thread(target=log_worker, name="log-episodes")
    worker.start()
    for episode in episodes:  # stands in for generation + scoring
        finished.put(episode)
    finished.put(None)
    worker.join()


def cli() -> str:
    """How to call the CLI from here: ``prime-runs``, or its path inside the virtualenv."""
    script = Path(sys.executable).parent / "prime-runs"
    if shutil.which("prime-runs") or not script.exists():
        return "prime-runs"
    return show_path(str(script))


def show_path(path: str) -> str:
    """Relative to the working directory when it is below it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative.startswith("..") else relative


def archive_files(root: Path) -> list[str]:
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
        size = path.stat().st_size
        records = path.read_bytes().count(b"\n") if path.suffix == ".jsonl" else None
        extra = "" if records is None else f"  {records} records"
        lines.append(f"{path.relative_to(root).as_posix():<36} {size / 1024:6.1f} KiB{extra}")
    return lines


def write_report(archive: str) -> str:
    """``prime-runs report RUN``, as a user would run it; returns the path it wrote."""
    result = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "report", archive],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def main() -> None:
    episodes = fresh_episodes(NUM_EPISODES)
    run = pr.init(
        name="quickstart",
        environments=["best-of-n", "user-sim"],
        model="scripted/model",
        framework="verifiers",
        config={"num_examples": NUM_EPISODES, "rollouts_per_example": 1, "temperature": 0.7},
        mode="offline",  # stays local even when PRIME_API_KEY is set
    )
    eval_loop(run, episodes)
    summary = pr.metrics.from_episodes(episodes)
    run.finish(summary)

    assert run.archive_path is not None
    archive = Path(run.archive_path)
    metrics = "  ".join(f"{k} {v:.3f}" for k, v in sorted(summary["avg_metrics"].items()))
    cmd = cli()
    print(f"prime-runs quickstart: run {run.id} ({run.mode}, {run.status})")
    print()
    print(f"  episodes    {run.logged_records} logged, {run.dropped_records} dropped")
    print(f"  avg reward  {summary['avg_reward']:.3f}")
    print(f"  avg metrics {metrics}")
    print(f"  error rate  {summary['avg_error']:.1%}")
    print(f"  archive     {show_path(run.archive_path)}/")
    for line in archive_files(archive):
        print(f"    {line}")
    print(f"  report      {show_path(write_report(run.archive_path))}  (open it in a browser)")
    print()
    print("Next:")
    steps = [
        (f"{cmd} ls", "list the runs in the archive"),
        (f"{cmd} show {run.id}", "this run in detail"),
        (f"{cmd} report {run.id} --open", "this run as a page: charts, examples, episodes"),
        (f"{cmd} sync", "upload offline runs (needs an API key)"),
    ]
    width = max(len(command) for command, _ in steps)
    for command, what in steps:
        print(f"  {command:<{width}}  # {what}")


if __name__ == "__main__":
    main()

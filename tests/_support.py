"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from prime_runs._records.encode import encode, kind_of, stamp, traces_problem
from prime_runs._records.item import Item
from prime_runs._records.jsonio import encode_record

DATA = Path(__file__).parent / "data"


def load_jsonl(name: str) -> list[dict[str, Any]]:
    """A fixture file of tests/data as a list of records."""
    return [json.loads(line) for line in (DATA / name).read_text("utf-8").splitlines() if line]


def items(records: list[dict[str, Any]], run_id: str) -> list[Item]:
    """Records encoded for ``run_id`` as the sinks receive them (no journal key)."""
    out = []
    for record in records:
        if traces_problem(kind_of(record), record) is None:
            e = encode(record, run_id, "eval")
            out.append(Item(e.kind, e.data, None, e.problem, record.get("id")))
            continue
        # log_episodes() refuses such a record; a journal line (a v0 sample row, an archive
        # from before that check) can still carry one to the sinks, with its problem.
        stamped, _ = stamp(record, run_id, "eval")
        kind = kind_of(record)
        problem = traces_problem(kind, stamped)
        out.append(Item(kind, encode_record(stamped), None, problem, record.get("id")))
    return out


# -- archives and the CLI, for tests that run commands over runs they wrote ---------------


def archive_root() -> Path:
    """The archive root the ``isolated_env``/``prime_env`` fixtures point the SDK at."""
    return Path(os.environ["PRIME_RUNS_DIR"])


def cli_command(*args: str, chunk: int | None = None) -> list[str]:
    """The command line of ``prime-runs ARGS``; ``chunk`` makes sync send batches of that
    many records (so a kill can land between two acknowledged batches)."""
    if chunk is None:
        return [sys.executable, "-m", "prime_runs.cli", *args]
    code = (
        "import sys, prime_runs._sync.syncer as s; from prime_runs.cli import main; "
        f"s.CHUNK_RECORDS = {chunk}; sys.exit(main(sys.argv[1:]))"
    )
    return [sys.executable, "-c", code, *args]


def run_cli(
    *args: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    chunk: int | None = None,
) -> subprocess.CompletedProcess:
    """``prime-runs ARGS`` as its own process (see ``cli_command``)."""
    command = cli_command(*args, chunk=chunk)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def script_command(
    directory: Path, source: str, *args: str, name: str = "scenario.py"
) -> list[str]:
    """Write ``source`` as a script into ``directory``; the command that runs it."""
    path = directory / name
    path.write_text(source)
    return [sys.executable, str(path), *args]


def run_script(
    directory: Path,
    source: str,
    *args: str,
    timeout: float = 90,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a script in ``directory`` to its end, its output captured (text);
    ``env`` goes over this process's environment."""
    command = script_command(directory, source, *args)
    environ = {**os.environ, **env} if env is not None else None
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=directory, env=environ
    )


def start_script(directory: Path, source: str, *args: str) -> subprocess.Popen[str]:
    """Start ``source`` as a script in ``directory``, stdin, stdout and stderr piped (text)."""
    command = script_command(directory, source, *args)
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=directory,
    )


def offline_run(episodes: list[dict], name: str = "offline", **init: Any) -> Any:
    """A finished offline run in the archive root holding ``episodes``."""
    import prime_runs as pr

    options: dict[str, Any] = {"environments": ["gsm8k"], **init}
    run = pr.init(name=name, mode="offline", dir=archive_root(), **options)
    run.log_episodes(episodes)
    run.finish()
    return run


def only_segment(run: Any) -> Path:
    """The run's one episode segment."""
    (path,) = (Path(run.archive_path) / "records").glob("episode-*.jsonl")
    return path


def run_status(run: Any) -> dict[str, Any]:
    """The run's ``status.json`` in its archive."""
    assert run.archive_path is not None
    return json.loads((Path(run.archive_path) / "status.json").read_text())


def journal_lines(run: Any) -> list[bytes]:
    """Every line of the run's journal, segment by segment."""
    assert run.archive_path is not None
    lines = []
    for segment in sorted((Path(run.archive_path) / "records").glob("*.jsonl")):
        lines.extend(segment.read_bytes().splitlines())
    return lines

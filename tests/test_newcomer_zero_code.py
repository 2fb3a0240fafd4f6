"""Zero code on a plain ``opentelemetry-distro`` install (issue 23): every command the docs
show runs as written, offline and against the stand-in, and prints nothing on stderr but,
offline, the one line that says no key was found; the run is recorded; and when
OpenTelemetry's setup fails, prime-runs says so at exit. Real ``opentelemetry-instrument``
subprocesses (the dev extra installs the distro without the OTLP exporters, as a plain
install has it)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import _archives
from prime_runs.testing import StandInPlatform

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
DOCUMENTED = (ROOT / "README.md", ROOT / "docs" / "opentelemetry.md", EXAMPLES / "zero_code.py")


def _documented_commands() -> list[str]:
    """Every ``... opentelemetry-instrument python ...`` command line the docs show."""
    commands = set()
    for path in DOCUMENTED:
        # A shell line continuation (written ``\\`` inside the example's docstring).
        text = re.sub(r"\\+\n", " ", path.read_text("utf-8"))
        for line in text.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("OTEL_") and "opentelemetry-instrument python" in line:
                commands.add(re.sub(r"\s+", " ", line))
    return sorted(commands)


COMMANDS = _documented_commands()


def _run(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    *assignments, instrument, _python, _script = shlex.split(command)
    assert instrument == "opentelemetry-instrument"
    env = {**env, **dict(a.split("=", 1) for a in assignments), "PYTHONPATH": str(EXAMPLES)}
    argv = [str(BIN / instrument), sys.executable, str(EXAMPLES / "zero_code.py")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def test_the_docs_show_the_full_command_first():
    assert len(COMMANDS) >= 2
    for command in COMMANDS:
        assert "OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none" in command, command


@pytest.mark.parametrize("command", COMMANDS)
def test_each_documented_command_records_an_offline_run_with_a_clean_stderr(command, tmp_path):
    env = dict(os.environ, PRIME_RUNS_DIR=str(tmp_path / "archive"))

    result = _run(command, env, tmp_path)

    assert result.returncode == 0, result.stderr
    # No traceback, no false warning: only the one line that says no key kept it offline.
    (notice,) = result.stderr.splitlines()
    assert notice.startswith("prime-runs: no API key found, so runs are kept offline")
    assert "logged 10 episodes" in result.stdout
    (archive,) = _archives.runs(tmp_path / "archive")
    assert archive.status()["status"] == "completed"
    assert archive.count_records() == {"episode": 10}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_documented_command_lands_an_online_run_with_a_clean_stderr(command, tmp_path):
    with StandInPlatform() as platform:
        env = dict(
            os.environ,
            PRIME_API_KEY=platform.api_key,
            PRIME_API_BASE_URL=platform.base_url,
            PRIME_TRACES_URL=platform.base_url,
            PRIME_RUNS_DIR=str(tmp_path / "archive"),
        )
        result = _run(command, env, tmp_path)

        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        ((eval_id, evaluation),) = platform.evaluations.items()
        assert evaluation["finalize_count"] == 1
        assert len(platform.episode_writes) == 10
        assert len(platform.samples(eval_id)) == 10


def test_a_failed_setup_is_said_at_exit(tmp_path):
    # Only the traces variable, as a newcomer first tries: the distro's OTLP defaults for
    # metrics and logs cannot be built, so OpenTelemetry sets nothing up.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PRIME_RUNS_DIR"] = str(tmp_path / "archive")

    command = "OTEL_TRACES_EXPORTER=prime_runs opentelemetry-instrument python x"
    result = _run(command, env, tmp_path)

    assert result.returncode == 0  # the program itself ran
    assert "logged 10 episodes" in result.stdout
    assert _archives.runs(tmp_path / "archive") == []
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("prime-runs: OTEL_TRACES_EXPORTER names prime_runs, but")
    assert "no run was recorded" in last
    assert "OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none" in last

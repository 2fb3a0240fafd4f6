"""What the parity tests share: one script run by the published prime-runs 0.1.4 (the
``peer_python`` fixture of conftest.py) and once by this checkout (the tier's own
interpreter), each against a fresh stand-in platform; the test then compares what each
platform received."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conftest import eval_env
from prime_runs.testing import StandInPlatform

PEER_VERSION = "0.1.4"

Received = Callable[[StandInPlatform, str], dict[str, Any]]


def interpreters(peer: Path) -> tuple[tuple[str, Path], ...]:
    """The two sides, the peer first: (who, its interpreter)."""
    return (("peer", peer), ("ours", Path(sys.executable)))


def run_script(
    python: Path,
    script: str,
    args: Sequence[str],
    platform: StandInPlatform,
    runs_dir: Path,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``script`` under ``python`` against ``platform``; the JSON its last line prints."""
    environ = {**eval_env(platform.env(), runs_dir), **(env or {})}
    proc = subprocess.run(
        [str(python), "-c", script, *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def both(
    peer: Path,
    tmp_path: Path,
    script: str,
    args: Sequence[str],
    received: Received,
    *,
    traces: str = "enabled",
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``script`` run by the peer, then by this checkout, each against a fresh stand-in
    whose Prime Traces is ``traces``: what each platform received (``received`` of the run
    whose ``id`` the script printed, with the ``version`` it ran)."""
    out = []
    for who, python in interpreters(peer):
        with StandInPlatform(traces=traces) as platform:
            run = run_script(python, script, args, platform, tmp_path / who / "archive", env)
            assert (run["version"] == PEER_VERSION) == (who == "peer")
            out.append(received(platform, run["id"]))
    return out[0], out[1]

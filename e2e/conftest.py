"""Shared pieces of the verifiers end-to-end tier.

Runs inside .e2e/venv (built by e2e/run.sh): verifiers 0.4.0 with this checkout's
prime-runs installed over the published one. Evals run through verifiers' own CLI
(`vf-eval`) in a child process, against `fake_model.FakeModel` and the stand-in platform
(`prime_runs.testing.StandInPlatform`), both on 127.0.0.1 in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fake_model import MODEL_ID, FakeModel

E2E_DIR = Path(__file__).resolve().parent
REPO = E2E_DIR.parent
DATA = REPO / "tests" / "data"
TASKSET_DIR = E2E_DIR / "taskset"
TASKSET_ID = "pr-e2e"
STATE_DIR = Path(os.environ.get("E2E_STATE_DIR") or REPO / ".e2e")
BIN = Path(sys.executable).parent

#: Variables of the outer environment that must not leak into an eval: the platform
#: is chosen per test, and an inherited run context would join someone else's run.
_SCRUBBED_PREFIXES = ("PRIME_", "VF_", "TRACEPARENT", "BAGGAGE", "OTEL_")
EVAL_TIMEOUT_S = 600
# The parity tests' peer: verifiers 0.4.0 with prime-runs[train]==0.1.4 (tests/peer.py).
PEER_PYTHON = STATE_DIR / "peer-venv" / "bin" / "python"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, in order."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(frozen=True)
class EvalRun:
    """One finished `vf-eval` process and what it left on disk."""

    name: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    run_dir: Path

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """The episode records verifiers wrote locally (`traces.jsonl`), in order."""
        path = self.run_dir / "traces.jsonl"
        return read_jsonl(path) if path.exists() else []

    def describe(self) -> str:
        """The process's exit and output tail, for assertion messages."""
        return f"vf-eval exited {self.returncode}\n--- stderr (tail) ---\n{self.stderr[-4000:]}"


def eval_config(
    name: str,
    rows: list[dict[str, Any]],
    *,
    model_url: str,
    output_dir: Path,
    rollouts: int,
    max_concurrent: int,
) -> dict[str, Any]:
    """A `vf-eval` config: our taskset, the null harness on the subprocess runtime, push on."""
    agent = {
        "harness": {"id": "null"},
        "runtime": {"type": "subprocess"},
        "max_turns": 2,
        "retries": {"max_retries": 0},
    }
    return {
        "env": {
            "taskset": {"id": TASKSET_ID, "rows": rows},
            "agent": agent,
            "retries": {"max_retries": 0},
        },
        "model": MODEL_ID,
        "client": {"base_url": model_url},
        "num_rollouts": rollouts,
        "max_concurrent": max_concurrent,
        "rich": None,
        "push": True,
        "output_dir": str(output_dir),
        "run": {"name": name},
    }


def eval_env(platform_env: dict[str, str], runs_dir: Path | None = None) -> dict[str, str]:
    """The eval process's environment: the stand-in's settings, our taskset importable,
    verifiers' caches and uv's cache kept under the tier's state directory, and the
    SDK's local archive in `runs_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(platform_env)
    if runs_dir is not None:
        env["PRIME_RUNS_DIR"] = str(runs_dir)
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # uv and vf-eval
            "PYTHONPATH": str(TASKSET_DIR),
            "HOME": str(STATE_DIR / "home"),  # verifiers' ~/.cache/verifiers
            "UV_CACHE_DIR": str(STATE_DIR / "uv-cache"),
            "UV_PYTHON_INSTALL_DIR": str(STATE_DIR / "uv-python"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def run_vf_eval(
    name: str,
    rows: list[dict[str, Any]],
    *,
    model: FakeModel,
    platform_env: dict[str, str],
    workdir: Path,
    rollouts: int = 1,
    max_concurrent: int = 4,
) -> EvalRun:
    """Run verifiers' own eval CLI once, to completion, in a child process."""
    workdir.mkdir(parents=True, exist_ok=True)
    output_dir = workdir / "outputs"
    config = eval_config(
        name,
        rows,
        model_url=model.base_url,
        output_dir=output_dir,
        rollouts=rollouts,
        max_concurrent=max_concurrent,
    )
    config_path = workdir / "eval.json"
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    (STATE_DIR / "home").mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "vf-eval"), "@", str(config_path)],
        cwd=workdir,
        env=eval_env(platform_env, workdir / "prime-runs"),
        capture_output=True,
        text=True,
        timeout=EVAL_TIMEOUT_S,
        check=False,
    )
    return EvalRun(
        name=name,
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        seconds=time.monotonic() - start,
        run_dir=output_dir / name,
    )


@pytest.fixture(scope="session")
def fake_model() -> Iterator[FakeModel]:
    with FakeModel() as model:
        yield model


@pytest.fixture(scope="module")
def peer_python() -> Path:
    """The peer's interpreter (published 0.1.4); fails the test when it is not built."""
    if not PEER_PYTHON.exists():
        pytest.fail(f"{PEER_PYTHON} is missing: e2e/run.sh builds it")
    return PEER_PYTHON

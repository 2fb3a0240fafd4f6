"""Fixtures of the integrations tier: the scripted model server, the OTLP receiver that
stands in for the other tool's backend, and the recipes as docs/integrations.md writes them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _collector import OtlpReceiver
from _model import ScriptedModel

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
# What would point a recipe elsewhere than this machine's servers.
CLEARED = ("OTEL_", "LANGFUSE_", "LOGFIRE_", "MLFLOW_", "LITELLM_", "OPENAI_", "PRIME_",
           "TRACELOOP_")  # fmt: skip


def section(heading: str) -> str:
    """The first Python block under ``## heading`` in docs/integrations.md."""
    text = DOC.read_text()
    start = text.index(f"\n## {heading}\n")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no python block under {heading!r}"
    return block.group(1)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as server:
        yield server


def run_recipe(
    tmp_path: Path, script: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``script`` beside ``adder.py``, as its own process with ``env`` added to a cleared
    environment."""
    (tmp_path / "adder.py").write_text(section("The agent every recipe runs"))
    (tmp_path / "recipe.py").write_text(script)
    base = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    base.update(env)
    base["HOME"] = str(tmp_path)
    base["PRIME_RUNS_DIR"] = str(tmp_path / "prime-runs")
    base["PYTHONPATH"] = os.pathsep.join([str(tmp_path), base.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "recipe.py"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, env=base,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    return done

"""The tier's environment: verifiers 0.4.0, with this checkout's prime-runs, not PyPI's."""

from __future__ import annotations

import importlib.metadata as md
import inspect
import json
import subprocess
from pathlib import Path

import verifiers

import prime_runs as pr
from conftest import BIN, REPO, eval_env


def test_verifiers_is_the_pinned_release() -> None:
    assert verifiers.__version__ == "0.4.0"
    assert md.version("verifiers") == "0.4.0"


def test_prime_runs_is_this_checkout() -> None:
    ours = (REPO / "src" / "prime_runs").resolve()
    assert Path(pr.__file__).resolve().parent == ours
    assert md.version("prime-runs") == pr.__version__
    assert pr.__version__ != "0.1.4"
    direct = json.loads(md.distribution("prime-runs").read_text("direct_url.json") or "{}")
    assert direct.get("dir_info", {}).get("editable") is True
    assert Path(direct["url"].removeprefix("file://")).resolve() == REPO.resolve()


def test_the_eval_process_imports_the_same_package() -> None:
    # vf-eval runs with the same interpreter and environment the evals below get.
    code = "import prime_runs, verifiers.v1.utils.platform as p; print(p.pr.__file__)"
    out = subprocess.run(
        [str(BIN / "python"), "-c", code],
        env=eval_env({}),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out).resolve() == Path(pr.__file__).resolve()


def test_verifiers_finds_the_names_it_uses() -> None:
    from verifiers.v1.utils import platform

    assert platform.pr is pr
    assert platform.build_samples is pr.projection.build_samples
    assert pr.MODE_ENV == "PRIME_RUNS_MODE"
    for status in ("RUNNING", "COMPLETED", "FAILED", "CANCELLED"):
        assert isinstance(getattr(pr.RunStatus, status), pr.RunStatus)
    assert isinstance(pr.Run, type)
    assert callable(pr.metrics.from_episodes)
    for name in ("url", "status", "finished", "errors", "failed_records", "dropped_records"):
        assert hasattr(pr.Run, name), name


def test_init_accepts_every_keyword_verifiers_passes() -> None:
    # verifiers falls back to a disabled run when init() rejects a keyword, so a
    # signature mismatch would pass every eval silently.
    signature = inspect.signature(pr.init)
    signature.bind(
        mode="online",
        id=None,
        name="n",
        environments=["pr-e2e"],
        model="m",
        framework="verifiers",
        config={"model": "m", "num_examples": 1, "rollouts_per_example": 1},
    )
    finish = inspect.signature(pr.Run.finish)
    finish.bind(None, None, status=pr.RunStatus.FAILED, error="E: boom")

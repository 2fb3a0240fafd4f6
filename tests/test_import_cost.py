"""What importing prime-runs loads, checked in fresh interpreters.

``import prime_runs`` and the pytest plugin (imported by every pytest session once the
package is installed) load nothing heavy; an offline run never loads prime-traces or its
pydantic models; an online traces sink does, when it is built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.testing import StandInPlatform

HEAVY = ("prime_traces", "pydantic", "httpx", "opentelemetry.sdk.trace", "http.server")
SDK_MODULES = (
    "prime_runs.api",
    "prime_runs._runs.opening",
    "prime_runs.run",
    "prime_runs.exporters.traces",
    "prime_runs.platform._http",
    "prime_runs.testing._standin",
)


def loaded_after(code: str, cwd: Path, *, env: dict[str, str] | None = None) -> set[str]:
    """The module names a fresh interpreter holds after running ``code``."""
    script = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_prime_runs_loads_nothing_heavy(tmp_path: Path) -> None:
    modules = loaded_after("import prime_runs", tmp_path)
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))
    assert modules.isdisjoint(SDK_MODULES), sorted(modules & set(SDK_MODULES))


def test_an_offline_run_never_loads_prime_traces_or_pydantic(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import prime_runs as pr
        run = pr.init(name="offline", environments=["gsm8k"], mode="offline", dir="archive")
        run.log_episodes([{"id": "e-1", "example_id": 0, "reward": 1.0}])
        run.finish()
        assert run.status is pr.RunStatus.COMPLETED, run.status
        """
    )
    modules = loaded_after(code, tmp_path)
    assert "prime_runs.api" in modules  # the run really happened
    assert "prime_traces" not in modules
    assert "pydantic" not in modules


_ONE_RUN = """
import prime_runs as pr
run = pr.init(name="one", environments=["gsm8k"], model="m", framework="f")
run.log_episodes({"id": "e1", "traces": [{"id": "t1", "timing": {"start": 1.0}}]})
run.finish(timeout=10)
"""


def test_an_online_run_whose_uploads_succeed_never_loads_prime_traces(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    assert "prime_traces" not in loaded_after(_ONE_RUN, tmp_path)
    assert len(prime_env.episodes) == 1  # uploaded all the same


def test_a_refused_upload_loads_prime_traces_and_is_its_typed_rejection(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.fail("traces_upload", 400)
    assert "prime_traces.exceptions" in loaded_after(_ONE_RUN, tmp_path)
    assert len(prime_env.episodes) == 0
    assert [r.status for r in prime_env.requests_for("traces_upload")] == [400]  # not retried


def test_the_pytest_plugin_module_loads_nothing_heavy(tmp_path: Path) -> None:
    modules = loaded_after("import prime_runs.testing.plugin", tmp_path)
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))
    assert modules.isdisjoint(SDK_MODULES), sorted(modules & set(SDK_MODULES))


def test_a_pytest_session_that_uses_no_fixture_loads_no_sdk_module(tmp_path: Path) -> None:
    """Through the real ``pytest11`` entry point, in a session of someone else's tests."""
    (tmp_path / "test_other.py").write_text(
        textwrap.dedent(
            f"""
            import sys

            def test_nothing_of_prime_runs_is_loaded(request):
                assert request.config.pluginmanager.has_plugin("prime_runs")
                loaded = set(sys.modules) & set({SDK_MODULES + HEAVY!r})
                assert not loaded, sorted(loaded)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_every_public_name_still_resolves() -> None:
    for name in pr.__all__:
        assert getattr(pr, name) is not None, name
    assert set(pr.__all__) <= set(dir(pr))
    assert pr.init is pr.api.init
    with pytest.raises(AttributeError, match="no_such_name"):
        pr.no_such_name  # noqa: B018

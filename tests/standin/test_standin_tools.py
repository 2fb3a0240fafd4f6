"""The pytest fixtures and ``python -m prime_runs.testing``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from prime_runs.testing import StandInPlatform


def test_prime_platform_fixture_is_started(prime_platform: StandInPlatform) -> None:
    response = httpx.get(
        f"{prime_platform.base_url}/api/v1/evaluations/",
        headers={"Authorization": f"Bearer {prime_platform.api_key}"},
    )
    assert response.status_code == 200


@pytest.mark.prime_platform(variant="S-ignore", traces="forbidden", api_key="other")
def test_marker_configures_the_platform(prime_platform: StandInPlatform) -> None:
    assert (prime_platform.variant, prime_platform.traces_mode, prime_platform.api_key) == (
        "S-ignore",
        "forbidden",
        "other",
    )


def test_prime_env_points_the_process_at_the_stand_in(prime_env: StandInPlatform) -> None:
    for name, value in prime_env.env().items():
        assert os.environ[name] == value
    home = Path(os.environ["HOME"])
    assert home.is_dir() and not (home / ".prime").exists()
    assert Path(os.environ["PRIME_RUNS_DIR"]).is_dir()
    assert "PRIME_TEAM_ID" not in os.environ


def test_prime_env_makes_prime_traces_resolve_the_stand_in(prime_env: StandInPlatform) -> None:
    from prime_traces import TracesClient

    client = TracesClient()
    client.upload_records([{"id": "t", "timing": {"start": 1.0}}])
    assert "t" in prime_env.traces
    assert "x-prime-team-id" not in prime_env.requests[0].headers


def test_module_runs_in_the_foreground_until_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "prime_runs.testing", "--variant", "S", "--api-key", "k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        exports = {}
        for _ in range(4):
            name, _, value = (
                process.stdout.readline().strip().removeprefix("export ").partition("=")
            )
            exports[name] = value
        assert exports["PRIME_API_KEY"] == "k"
        base = exports["PRIME_API_BASE_URL"]
        assert exports["PRIME_TRACES_URL"] == exports["PRIME_FRONTEND_URL"] == base
        headers = {"Authorization": "Bearer k"}
        created = httpx.post(
            f"{base}/api/v1/evaluations/",
            json={"name": "r", "environments": [{"id": "e"}]},
            headers=headers,
        ).json()
        status_put = httpx.put(
            f"{base}/api/v1/evaluations/{created['evaluation_id']}",
            content=json.dumps({"status": "FAILED"}),
            headers=headers,
        )
        assert status_put.status_code == 422  # variant S
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

"""The pytest fixtures and ``python -m prime_runs.testing``."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import IO

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


def _lines(stream: IO[str]) -> queue.Queue[str | None]:
    """The stream's lines, then None at its end, read on a thread so a test can wait for
    one with a timeout."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _rest(lines: queue.Queue[str | None]) -> list[str]:
    """Every line still to come, up to the end of the stream (the process has exited)."""
    rest = []
    while (line := lines.get(timeout=30)) is not None:
        rest.append(line)
    return rest


def _serve(*args: str) -> tuple[subprocess.Popen[str], str, queue.Queue[str | None]]:
    """``python -m prime_runs.testing`` started: the process, its base URL, its stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "prime_runs.testing", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    exports = dict(
        process.stdout.readline().strip().removeprefix("export ").partition("=")[::2]
        for _ in range(4)
    )
    errors = _lines(process.stderr)
    first = errors.get(timeout=30)
    assert first is not None and first.startswith("# stand-in serving on"), first
    return process, exports["PRIME_API_BASE_URL"], errors


def test_verbose_module_says_what_each_request_carried() -> None:
    process, base, errors = _serve("--verbose", "--api-key", "secret-k")
    try:
        headers = {"Authorization": "Bearer secret-k"}
        resolved = httpx.post(
            f"{base}/api/v1/environmentshub/resolve", json={"name": "gsm8k"}, headers=headers
        )
        assert resolved.status_code == 200
        line = errors.get(timeout=30) or ""
        assert "POST /api/v1/environmentshub/resolve [env_resolve] -> 200" in line
        assert 'json={"name":"gsm8k"}' in line
        httpx.get(f"{base}/api/v1/evaluations/", headers={"Authorization": "Bearer wrong"})
        refused = errors.get(timeout=30) or ""
        assert "GET /api/v1/evaluations/ [eval_list] -> 401" in refused
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert _rest(errors) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # The key is never printed, neither the accepted one nor a refused one.
    assert "secret-k" not in line and "wrong" not in refused


def test_without_verbose_the_module_prints_no_request_lines() -> None:
    process, base, errors = _serve()
    try:
        assert httpx.get(f"{base}/api/v1/evaluations/").status_code == 401
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert _rest(errors) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_docs_list_exactly_the_variables_prime_env_clears() -> None:
    from prime_runs.testing.plugin import CLEARED_VARIABLES

    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text("utf-8")
    table = text.split("<!-- cleared-variables")[1].split("<!-- /cleared-variables -->")[0]
    documented = re.findall(r"^\| `([A-Z_]+)` \|", table, flags=re.MULTILINE)
    assert documented == list(CLEARED_VARIABLES)


def test_prime_env_clears_every_listed_variable_from_the_shell(tmp_path: Path) -> None:
    """Run in a pytest whose environment sets every variable, as a developer's shell might."""
    from prime_runs.testing.plugin import CLEARED_VARIABLES

    (tmp_path / "test_leak.py").write_text(
        textwrap.dedent(
            f"""
            import os

            def test_nothing_leaks(prime_env):
                set_by_fixture = set(prime_env.env()) | {{"PRIME_RUNS_DIR"}}
                for name in {CLEARED_VARIABLES!r}:
                    if name in set_by_fixture:
                        assert os.environ[name] != "from-the-shell", name
                    else:
                        assert name not in os.environ, name
            """
        )
    )
    shell = {name: "from-the-shell" for name in CLEARED_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, **shell},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_samples_body_beyond_4_mib_is_read_as_json_loads_reads_it(
    prime_platform: StandInPlatform,
) -> None:
    # Large bodies are decoded by orjson too (the stand-in must not compete with the client
    # it measures), except where orjson would read them otherwise than json.loads does.
    eval_id = prime_platform.add_evaluation("ev-large-body")
    headers = {"Authorization": f"Bearer {prime_platform.api_key}"}
    pad = "x" * (5 * 2**20)
    url = f"{prime_platform.base_url}/api/v1/evaluations/{eval_id}/samples"
    bodies = [
        b'{"samples":[{"pad":"%s","n":12345678901234567890123}]}' % pad.encode(),
        b'{"samples":[{"pad":"%s","score":NaN}]}' % pad.encode(),
        b'{"samples":[{"pad":"%s","text":"\\u00e9\\ud83d\\ude00"}]}' % pad.encode(),
    ]
    for body in bodies:
        assert len(body) > 4 * 2**20
        reply = httpx.post(url, content=body, headers=headers, timeout=30)
        assert reply.status_code == 200, reply.text
    stored = prime_platform.samples(eval_id)
    assert [row["pad"] == pad for row in stored] == [True, True, True]
    assert stored[0]["n"] == 12345678901234567890123 and isinstance(stored[0]["n"], int)
    assert stored[1]["score"] != stored[1]["score"]  # NaN, as json.loads reads it
    assert stored[2]["text"] == "\u00e9\U0001f600"

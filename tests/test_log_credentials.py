"""No credential in a log line the SDK causes: an application that turns on DEBUG logging
for everything sees the SDK's requests in the HTTP library's lines, but never a presigned
object-store URL's signature (a write credential for an hour) nor the API key."""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterator

import pytest

import prime_runs as pr
from prime_runs.platform import retry
from prime_runs.testing import StandInPlatform

SIGNATURE = re.compile(r"X-Amz-(Signature|Credential|Security-Token)=", re.IGNORECASE)


class _Everything(logging.Handler):
    """Every record any logger emits, formatted as a handler would write it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def debug_logging() -> Iterator[_Everything]:
    """``logging.basicConfig(level=logging.DEBUG)``, as an application might: the root logger
    at DEBUG and every library's records reaching one handler."""
    root = logging.getLogger()
    handler = _Everything()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _at_step(episode: dict, step: int, n: int) -> dict:
    record = copy.deepcopy(episode)
    record["id"] = f"s{step}-{n}-{record['id']}"
    for member in record["traces"]:
        member["id"] = f"s{step}-{n}-{member['id']}"
    record["run"] = {"name": "rl", "work": {"type": "train", "step": step}}
    return record


def _signatures(platform: StandInPlatform) -> set[str]:
    return {
        r.query["X-Amz-Signature"]
        for r in platform.requests_for("object_put")
        if "X-Amz-Signature" in r.query
    }


def test_a_training_run_with_object_store_faults_logs_no_credential(
    prime_env: StandInPlatform,
    episodes: list[dict],
    debug_logging: _Everything,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.0)  # retried at once
    prime_env.fail("object_put", 503, times=3)  # retried, then stored
    prime_env.fail("object_put", 403, times=1)  # a refused PUT: its answer is logged too
    run = pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=20),
    )
    run.log_episodes([_at_step(episodes[0], 0, 0), _at_step(episodes[1], 0, 1)])
    run.flush(30)  # False: the refused PUT's batch failed
    run.log_episodes([_at_step(episodes[2], 10, 0)])
    run.log_metrics({"loss": 0.1}, step=11)
    run.finish(timeout=60)

    signatures = _signatures(prime_env)
    assert len(prime_env.requests_for("object_put")) >= 4 and signatures  # the faults ran
    lines = debug_logging.lines
    # The HTTP library still says what it sent: the PUTs are visible, their query is not.
    puts = [line for line in lines if line.startswith("httpx ") and "PUT " in line]
    assert len(puts) >= 4, lines
    leaked = [
        line
        for line in lines
        if SIGNATURE.search(line) or any(s in line for s in signatures) or prime_env.api_key in line
    ]
    assert leaked == []
    # The platform API's own request lines keep their (credential-free) form.
    assert any("POST" in line and "/rft/samples/presign" in line for line in lines)


def test_sync_of_a_training_run_logs_no_credential(
    prime_env: StandInPlatform,
    episodes: list[dict],
    debug_logging: _Everything,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`prime-runs sync -v` of an offline training run: the same, from the command line."""
    from prime_runs.cli import main

    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.0)
    run = pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=20),
        mode="offline",
    )
    run.log_episodes([_at_step(episodes[0], 0, 0)])
    run.finish()
    prime_env.fail("object_put", 503, times=2)

    assert main(["sync", "-v", run.id]) == 0

    signatures = _signatures(prime_env)
    assert signatures
    lines = debug_logging.lines
    assert [line for line in lines if "PUT " in line]
    assert [
        line
        for line in lines
        if SIGNATURE.search(line) or any(s in line for s in signatures) or prime_env.api_key in line
    ] == []

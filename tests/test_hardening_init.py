"""init() when the hub cannot be reached or refuses the key, and init() argument checks.

A failure to reach or be authorised by the environment hub is a registration failure
(offline fallback under ``on_error="warn"``, the typed error under ``"raise"``), the same
for environments given by name, slug or id. Only the hub saying an environment does not
exist is an ``EnvironmentResolutionError``. Bad ``init()`` arguments are a
``ConfigurationError`` naming the argument, raised before any request.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from prime_runs.platform import retry
from prime_runs.testing import StandInPlatform

ENVIRONMENTS = {
    "name": ["gsm8k"],
    "slug": ["alice/gsm8k"],
    "id": [{"id": "env-1"}],
}
# fault -> the error type init() raises under on_error="raise"
FAULTS = {
    "outage_503": pr.RetryableAPIError,
    "wrong_key_401": pr.UnauthorizedError,
    "forbidden_403": pr.ForbiddenError,
    "closed_port": pr.TransportError,
}


@pytest.fixture(autouse=True)
def retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Retries still happen (the policy is unchanged), without the back-off waits; the
    list holds one entry per retry the platform client scheduled."""
    waits: list[int] = []

    def no_wait(attempt: int) -> float:
        waits.append(attempt)
        return 0.0

    monkeypatch.setattr(retry, "backoff", no_wait)
    return waits


@pytest.fixture
def platform() -> Iterator[StandInPlatform]:
    with StandInPlatform() as p:
        p.add_environment("alice/gsm8k", id="env-published")
        yield p


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def target(fault: str, platform: StandInPlatform) -> dict[str, str]:
    """init() keywords that point at a hub failing as ``fault`` says."""
    if fault == "closed_port":
        return {"api_key": "some-key", "base_url": f"http://127.0.0.1:{closed_port()}"}
    if fault == "wrong_key_401":
        return {"api_key": "not-the-stand-in-key", "base_url": platform.base_url}
    platform.outage(503 if fault == "outage_503" else 403)
    return {"api_key": platform.api_key, "base_url": platform.base_url}


def open_run(environments: list[Any], **kw: Any) -> pr.Run:
    return pr.init(name="hub-down", environments=environments, framework="verifiers", **kw)


@pytest.mark.parametrize("given", sorted(ENVIRONMENTS))
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_unreachable_or_refusing_hub_falls_back_offline_under_warn(
    platform: StandInPlatform, fault: str, given: str, episodes, caplog
) -> None:
    kw = target(fault, platform)
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run = open_run(ENVIRONMENTS[given], **kw)
    assert run.mode == "offline"
    assert platform.evaluations == {}
    fallbacks = [r for r in caplog.records if "runs offline" in r.getMessage()]
    assert len(fallbacks) == 1
    assert FAULTS[fault].__name__ in fallbacks[0].getMessage()
    assert kw["api_key"] not in caplog.text
    run.log_episodes(episodes[:2])
    run.finish()
    assert run.status is pr.RunStatus.COMPLETED
    assert run.archive_path is not None and Path(run.archive_path).is_dir()


@pytest.mark.parametrize("given", sorted(ENVIRONMENTS))
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_unreachable_or_refusing_hub_raises_its_typed_error_under_raise(
    platform: StandInPlatform, fault: str, given: str, isolated_env: Path
) -> None:
    kw = target(fault, platform)
    with pytest.raises(pr.APIError) as info:
        open_run(ENVIRONMENTS[given], on_error="raise", **kw)
    assert type(info.value) is FAULTS[fault] or isinstance(info.value, FAULTS[fault])
    assert not isinstance(info.value, pr.EnvironmentResolutionError)
    assert kw["api_key"] not in str(info.value)
    assert platform.evaluations == {}
    assert not isolated_env.exists() or not any(isolated_env.iterdir())


@pytest.mark.parametrize("on_error", ["warn", "raise"])
def test_an_environment_the_hub_does_not_know_is_a_resolution_error(
    platform: StandInPlatform, on_error: str
) -> None:
    with pytest.raises(pr.EnvironmentResolutionError, match="bob/missing") as info:
        open_run(
            ["gsm8k", "bob/missing"],
            on_error=on_error,
            api_key=platform.api_key,
            base_url=platform.base_url,
        )
    assert "404" in str(info.value)
    assert platform.evaluations == {}


def test_the_retry_wait_is_announced_once_when_it_starts(platform: StandInPlatform, caplog) -> None:
    platform.outage(503)
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run = open_run(["gsm8k"], api_key=platform.api_key, base_url=platform.base_url)
    assert run.mode == "offline"
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 1, [r.getMessage() for r in retries]
    message = retries[0].getMessage()
    assert "/environmentshub/resolve" in message and "503" in message
    assert "4 more times" in message and "before giving up" in message
    assert len(platform.requests_for("env_resolve")) == 5  # the retries did happen
    # The retry line comes before the fallback line: the wait is explained while it runs.
    messages = [r.getMessage() for r in caplog.records]
    fallback = next(i for i, m in enumerate(messages) if "runs offline" in m)
    assert messages.index(message) < fallback
    run.finish()


# -- argument checks --------------------------------------------------------------------

BAD_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("environments", {"environments": 5}),
    ("environments", {"environments": b"gsm8k"}),
    ("dir", {"dir": 5}),
    ("api_key", {"api_key": "clé-sécrète"}),
    ("api_key", {"api_key": "two words"}),
    ("api_key", {"api_key": 5}),
    ("tags", {"tags": "abc"}),
    ("tags", {"tags": [1, 2]}),
    ("tags", {"tags": 5}),
    ("mode", {"mode": 5}),
    ("base_url", {"base_url": "ftp://127.0.0.1:1"}),
    ("base_url", {"base_url": "127.0.0.1:8000"}),
    ("base_url", {"base_url": "http://"}),
    ("base_url", {"base_url": 5}),
    ("name", {"name": 5}),
    ("model", {"model": ["m"]}),
    ("framework", {"framework": 5}),
    ("description", {"description": 5}),
    ("team_id", {"team_id": 5}),
    ("id", {"id": 5}),
    ("id", {"id": "  "}),
    ("on_error", {"on_error": 5}),
    ("traces", {"traces": "no"}),
    ("samples", {"samples": None}),
    ("journal", {"journal": 0}),
    ("handle_signals", {"handle_signals": "yes"}),
    ("join", {"join": "abc"}),
]


@pytest.mark.parametrize(("argument", "kw"), BAD_ARGUMENTS, ids=lambda v: repr(v)[:40])
@pytest.mark.parametrize("on_error", ["warn", "raise"])
def test_a_bad_argument_is_a_configuration_error_naming_it_before_any_request(
    prime_env: StandInPlatform,
    argument: str,
    kw: dict[str, Any],
    on_error: str,
    retry_waits: list[int],
) -> None:
    kw = {"name": "args", "environments": ["gsm8k"], "on_error": on_error, **kw}
    with pytest.raises(pr.ConfigurationError) as info:
        pr.init(**kw)
    message = str(info.value)
    assert f"{argument}=" in message, message
    assert prime_env.requests == []
    assert retry_waits == []  # at once: no request was even attempted, none retried
    root = Path(os.environ["PRIME_RUNS_DIR"])  # prime_env's archive root
    assert not root.exists() or not any(root.iterdir())  # nothing written
    assert prime_env.api_key not in message
    assert "sécrète" not in message  # a key is never echoed, not even a wrong one


def test_a_one_shot_iterable_of_tags_is_checked_too(prime_env: StandInPlatform) -> None:
    with pytest.raises(pr.ConfigurationError, match="tags="):
        pr.init(name="x", environments=["gsm8k"], tags=(t for t in ("a", 5)))
    assert prime_env.requests == []


def test_tags_given_as_a_string_are_never_split_into_letters(prime_env) -> None:
    with pytest.raises(pr.ConfigurationError, match="tags="):
        pr.init(name="x", environments=["gsm8k"], tags="abc", mode="offline")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PRIME_API_KEY", "clé"),
        ("PRIME_API_BASE_URL", "ftp://127.0.0.1:1"),
        ("PRIME_TRACES_URL", "file:///tmp/x"),
        ("PRIME_RUNS_MODE", "sideways"),
    ],
)
def test_a_bad_environment_variable_is_named(
    prime_env: StandInPlatform, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(pr.ConfigurationError, match=variable):
        pr.init(name="env", environments=["gsm8k"])
    assert prime_env.requests == []


def test_disabled_mode_ignores_bad_connection_settings(monkeypatch) -> None:
    monkeypatch.setenv("PRIME_API_BASE_URL", "ftp://nowhere")
    run = pr.init(name="off", environments=["gsm8k"], mode="disabled")
    assert run.mode == "disabled"


def test_good_arguments_still_work(prime_env: StandInPlatform, tmp_path: Path) -> None:
    run = pr.init(
        name="ok",
        environments=("gsm8k",),
        tags=(t for t in ("a", "b")),  # any iterable, read once
        dir=tmp_path / "archive",
        mode="ONLINE",
        base_url=prime_env.base_url + "/api/v1/",
        join=False,
        traces=True,
    )
    assert run.mode == "online"
    assert prime_env.evaluations[run.id]["tags"] == ["a", "b"]
    run.finish()
    assert os.path.isdir(tmp_path / "archive")


def test_configure_exporter_checks_its_settings_the_same_way() -> None:
    provider = TracerProvider()
    with pytest.raises(pr.ConfigurationError, match="dir="):
        pr.configure_exporter(provider, dir=5)
    with pytest.raises(pr.ConfigurationError, match="journal="):
        pr.configure_exporter(provider, journal="no")


def test_sync_says_what_it_waits_for_when_the_hub_is_down(prime_env, episodes, capsys) -> None:
    from prime_runs.cli import main

    run = pr.init(name="later", environments=["gsm8k"], mode="offline")
    run.log_episodes(episodes[:2])
    run.finish()
    prime_env.outage(503)
    capsys.readouterr()
    assert main(["sync"]) != 0
    err = capsys.readouterr().err
    retries = [line for line in err.splitlines() if "retrying" in line]
    assert len(retries) == 1, err
    assert "/environmentshub/resolve -> 503" in retries[0]
    assert "4 more times" in retries[0]
    assert prime_env.api_key not in err
    assert prime_env.evaluations == {}

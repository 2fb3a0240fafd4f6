"""OnlineLifecycle end to end against the stand-in: settings from the environment and a
fake HOME, config capture, registration, and every way a run closes."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest

from prime_runs._runs.config import capture_config
from prime_runs.errors import NotFoundError, PrimeRunsError, UnauthorizedError
from prime_runs.platform import evaluations
from prime_runs.platform.lifecycle import (
    OnlineLifecycle,
    Registration,
    RunDescription,
    clean_summary,
)
from prime_runs.settings import Settings
from prime_runs.status import RunStatus
from prime_runs.testing import StandInPlatform

SECRET = "pk-lifecycle-secret-9f8e7d6c5b"
TOML = '# measured env\nenvironment = "gsm8k"   # inline comment\n\n[sampling]\nt = 0.7\n'


@pytest.fixture(autouse=True)
def _fresh_variant_cache() -> Iterator[None]:
    evaluations._reset_variant_cache()
    yield
    evaluations._reset_variant_cache()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "PRIME_API_KEY", "PRIME_TEAM_ID", "PRIME_API_BASE_URL", "PRIME_BASE_URL",
        "PRIME_TRACES_URL", "PRIME_FRONTEND_URL", "PRIME_RUNS_MODE",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def platform(home: Path) -> Iterator[StandInPlatform]:
    with StandInPlatform(api_key=SECRET) as p:
        yield p


def lifecycle_for(p: StandInPlatform, **settings: object) -> OnlineLifecycle:
    s = Settings.resolve(api_key=p.api_key, base_url=p.base_url, **settings)  # type: ignore[arg-type]
    life = OnlineLifecycle(s)
    life.client._sleep = lambda _: None  # retries must not wait in tests
    return life


def describe(**overrides: object) -> RunDescription:
    fields: dict = dict(
        name="gsm8k-run", environments=["gsm8k"], model="Qwen/Qwen3-8B", framework="verifiers",
        description=None, tags=[], team_id=None, config={"rollouts": 2},
    )  # fmt: skip
    fields.update(overrides)
    return RunDescription(**fields)


def test_register_resolves_then_creates(platform: StandInPlatform) -> None:
    life = lifecycle_for(platform)
    reg = life.register(describe(environments=["gsm8k", {"name": "math", "version_id": "v1"}]))
    assert [r.route for r in platform.requests] == ["env_resolve", "env_resolve", "eval_create"]
    body = platform.requests_for("eval_create")[0].json
    assert body["environments"] == [{"id": "env_gsm8k"}, {"id": "env_math", "version_id": "v1"}]
    assert body["dataset"] == "gsm8k" and body["metadata"] == {"rollouts": 2}
    assert reg == Registration(
        id=reg.id, name="gsm8k-run", url=f"{platform.base_url}/dashboard/evaluations/{reg.id}"
    )
    life.shutdown()


def test_default_name_comes_from_the_first_environment(platform: StandInPlatform) -> None:
    platform.add_environment("alice/gsm8k")
    reg = lifecycle_for(platform).register(describe(name=None, environments=["alice/gsm8k"]))
    assert reg.name.startswith("gsm8k-")


def test_settings_team_is_used_when_the_run_has_none(
    platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_TEAM_ID", "team_env")
    lifecycle_for(platform).register(describe())
    assert platform.requests_for("env_resolve")[0].json["team_id"] == "team_env"
    assert platform.requests_for("eval_create")[0].json["team_id"] == "team_env"


def test_no_environments_is_a_configuration_error_before_any_request(
    platform: StandInPlatform,
) -> None:
    with pytest.raises(PrimeRunsError, match="at least one environment"):
        lifecycle_for(platform).register(describe(environments=[]))
    assert platform.requests == []


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1", "/api/v1/"])
def test_base_url_forms_from_the_environment(
    platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    monkeypatch.setenv("PRIME_API_KEY", SECRET)
    monkeypatch.setenv("PRIME_API_BASE_URL", platform.base_url + suffix)
    life = OnlineLifecycle(Settings.resolve())
    life.register(describe())
    assert [r.path for r in platform.requests] == [
        "/api/v1/environmentshub/resolve",
        "/api/v1/evaluations/",
    ]


def test_settings_from_the_config_file_in_home(platform: StandInPlatform, home: Path) -> None:
    (home / ".prime").mkdir(parents=True)
    (home / ".prime" / "config.json").write_text(
        json.dumps({"api_key": SECRET, "base_url": platform.base_url + "/api/v1", "team_id": "t9"})
    )
    settings = Settings.resolve()
    assert settings.mode == "online"
    OnlineLifecycle(settings).register(describe())
    assert platform.requests_for("eval_create")[0].json["team_id"] == "t9"


def test_a_config_file_is_stored_byte_for_byte(platform: StandInPlatform, tmp_path: Path) -> None:
    path = tmp_path / "eval.toml"
    path.write_bytes(TOML.encode())
    reg = lifecycle_for(platform).register(describe(config=capture_config(str(path))))
    stored = platform.evaluations[reg.id]["metadata"]
    assert stored == {"config_source": {"format": "toml", "text": TOML, "filename": "eval.toml"}}
    assert platform.requests_for("eval_create")[0].json["metadata"]["config_source"]["text"] == TOML


class Cfg(pydantic.BaseModel):
    model: str
    rollouts: int = 4
    temperature: float | None = None


def test_a_pydantic_config_is_stored_with_exclude_unset(platform: StandInPlatform) -> None:
    config = capture_config(Cfg(model="m", temperature=None))
    reg = lifecycle_for(platform).register(describe(config=config))
    assert platform.evaluations[reg.id]["metadata"] == {"model": "m", "temperature": None}


def test_completed_run_puts_then_finalizes(platform: StandInPlatform) -> None:
    life = lifecycle_for(platform)
    config = {"config_source": {"format": "toml", "text": TOML}}
    reg = life.register(describe(config=config))
    summary = {"avg_reward": 0.5, "prime_runs": {"traces_episodes_written": 3}}
    life.close(reg, status=RunStatus.COMPLETED, summary=summary, reason=None, config=config,
               attached=False)  # fmt: skip
    tail = platform.requests[-2:]
    assert [(r.route, r.json) for r in tail] == [
        ("eval_update", {"metadata": config, "metrics": summary}),
        ("eval_finalize", {"metrics": summary}),
    ]
    assert platform.evaluations[reg.id]["finalize_count"] == 1


def test_summary_is_cleaned_at_every_depth(platform: StandInPlatform) -> None:
    life = lifecycle_for(platform)
    reg = life.register(describe())
    summary = {
        "avg_reward": math.nan,
        "avg_metrics": {"a": math.inf, "b": 1.0},
        "only_bad": {"x": -math.inf},
        "series": [1.0, math.nan, {"y": math.nan}, 2],
        "empty": {},
    }
    life.close(reg, status="completed", summary=summary, reason=None, config={},  # type: ignore[arg-type]
               attached=False)  # fmt: skip
    expected = {"avg_metrics": {"b": 1.0}, "series": [1.0, 2], "empty": {}}
    assert platform.requests_for("eval_finalize")[0].json == {"metrics": expected}
    assert summary["avg_reward"] != summary["avg_reward"]  # the caller's dict is untouched
    assert clean_summary(None) == {}
    assert clean_summary({"a": math.nan}) == {}
    huge = {"avg_reward": 10**400, "avg_metrics": {"m": -(10**400), "ok": 10**300}}
    assert clean_summary(huge) == {"avg_metrics": {"ok": 10**300}}


@pytest.mark.parametrize("variant", ["N", "S", "S-ignore"])
def test_failed_run_close_out_on_each_variant(variant: str, home: Path) -> None:
    with StandInPlatform(variant=variant, api_key=SECRET) as p:
        life = lifecycle_for(p)
        config = {"rollouts": 2}
        reg = life.register(describe(config=config))
        life.close(reg, status=RunStatus.FAILED, summary={"avg_reward": 0.1},
                   reason="ValueError: boom", config=config, attached=False)  # fmt: skip
        bodies = [r.json for r in p.requests_for("eval_update")]
        assert bodies[:2] == [
            {"metadata": config, "metrics": {"avg_reward": 0.1}},
            {"status": "FAILED", "error_message": "ValueError: boom"},
        ]
        stored = p.evaluations[reg.id]
        assert p.requests_for("eval_finalize") == []
        if variant == "N":
            assert len(bodies) == 2 and stored["status"] == "FAILED"
        else:
            assert len(bodies) == 3 and stored["status"] == "RUNNING"
            assert stored["metadata"]["rollouts"] == 2
            assert stored["metadata"]["prime_runs"]["status"] == "failed"
            assert stored["metadata"]["prime_runs"]["error"] == "ValueError: boom"


def test_attached_completed_sends_metrics_only_then_finalizes(platform: StandInPlatform) -> None:
    platform.add_evaluation("ev_launcher", metadata={"launcher": True})
    life = lifecycle_for(platform)
    reg = life.attach("ev_launcher")
    assert platform.requests == []
    assert reg == Registration(
        "ev_launcher",
        "ev_launcher",
        "https://app.primeintellect.ai/dashboard/evaluations/ev_launcher",
    )
    life.close(reg, status=RunStatus.COMPLETED, summary={"avg_reward": 1.0}, reason=None,
               config={"ignored": 1}, attached=True)  # fmt: skip
    assert [(r.route, r.json) for r in platform.requests] == [
        ("eval_update", {"metrics": {"avg_reward": 1.0}}),
        ("eval_finalize", {"metrics": {"avg_reward": 1.0}}),
    ]
    assert platform.evaluations["ev_launcher"]["metadata"] == {"launcher": True}


def test_attached_failed_sends_only_metrics(
    platform: StandInPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    platform.add_evaluation("ev_launcher")
    life = lifecycle_for(platform)
    caplog.set_level(logging.INFO, logger="prime_runs")
    life.close(life.attach("ev_launcher"), status=RunStatus.CRASHED, summary={"n": 1},
               reason="x", config={"c": 1}, attached=True)  # fmt: skip
    assert [(r.route, r.json) for r in platform.requests] == [
        ("eval_update", {"metrics": {"n": 1}})
    ]
    assert platform.evaluations["ev_launcher"]["status"] == "RUNNING"
    assert "launcher" in caplog.text


def test_a_failed_put_still_finalizes_then_raises(platform: StandInPlatform) -> None:
    life = lifecycle_for(platform)
    reg = life.register(describe())
    platform.fail("eval_update", 404)
    with pytest.raises(NotFoundError):
        life.close(reg, status=RunStatus.COMPLETED, summary={"a": 1}, reason=None, config={},
                   attached=False)  # fmt: skip
    assert platform.evaluations[reg.id]["finalize_count"] == 1


def test_running_is_not_a_closing_status(platform: StandInPlatform) -> None:
    life = lifecycle_for(platform)
    with pytest.raises(ValueError):
        life.close(Registration("e", "e", None), status=RunStatus.RUNNING, summary={},
                   reason=None, config={}, attached=False)  # fmt: skip
    assert platform.requests == []


def test_the_key_never_appears_in_logs_errors_or_reprs(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with StandInPlatform(api_key="the-right-key") as p:
        s = Settings.resolve(api_key=SECRET, base_url=p.base_url)
        life = OnlineLifecycle(s)
        life.client._sleep = lambda _: None
        with pytest.raises(UnauthorizedError) as info:
            life.register(describe(environments=[{"id": "env-1"}]))
        # A retried failure with the key in the server's answer, and a close-out warning.
        p.fail("eval_create", 503, times=2)
        with pytest.raises(PrimeRunsError) as second:
            OnlineLifecycle(s).register(describe(environments=[{"id": "env-1"}]))
        texts = [
            caplog.text,
            str(info.value),
            repr(info.value),
            str(second.value),
            repr(second.value),
            repr(s),
            str(s),
            repr(life.client),
        ]
        for text in texts:
            assert SECRET not in text
        assert "401" in str(info.value) and "POST /api/v1/evaluations/" in str(info.value)
        # The key did travel where it belongs.
        assert p.requests[0].headers["authorization"] == f"Bearer {SECRET}"

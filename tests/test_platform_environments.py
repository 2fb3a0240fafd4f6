"""Environment resolution (contract §3) against the stand-in platform."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from prime_runs.errors import (
    APIError,
    ConfigurationError,
    EnvironmentResolutionError,
    ForbiddenError,
    RetryableAPIError,
    UnauthorizedError,
)
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.environments import (
    EnvironmentRef,
    coerce_environments,
    dataset_name,
    resolve_environments,
)
from prime_runs.platform.lifecycle import OnlineLifecycle, RunDescription
from prime_runs.settings import Settings
from prime_runs.testing import StandInPlatform


def settings_for(p: StandInPlatform, team_id: str | None = None) -> Settings:
    return Settings(p.api_key, team_id, p.base_url, p.base_url, p.base_url, "online")


@pytest.fixture
def platform() -> Iterator[StandInPlatform]:
    with StandInPlatform() as p:
        yield p


@pytest.fixture
def client(platform: StandInPlatform) -> Iterator[PlatformClient]:
    c = PlatformClient(settings_for(platform), sleep=lambda _: None)
    yield c
    c.close()


def test_every_input_form(platform: StandInPlatform, client: PlatformClient) -> None:
    platform.add_environment("alice/gsm8k", id="env-published")
    resolved = resolve_environments(
        client,
        [
            "math",
            "alice/gsm8k",
            {"id": "env-given"},
            {"name": "math", "version_id": "v-7"},
            EnvironmentRef(slug="alice/gsm8k", version_id="v-9"),
        ],
        team_id=None,
    )
    assert resolved == [
        {"id": "env_math"},
        {"id": "env-published"},
        {"id": "env-given"},
        {"id": "env_math", "version_id": "v-7"},
        {"id": "env-published", "version_id": "v-9"},
    ]
    assert [r.route for r in platform.requests] == [
        "env_resolve",
        "env_lookup",
        "env_resolve",
        "env_lookup",
    ]
    assert platform.requests[0].json == {"name": "math"}
    assert platform.requests[1].path == "/api/v1/environmentshub/alice/gsm8k/@latest"


def test_team_travels_in_the_resolve_body(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    resolve_environments(client, ["math"], team_id="team_1")
    assert platform.requests_for("env_resolve")[0].json == {"name": "math", "team_id": "team_1"}
    assert "x-prime-team-id" not in platform.requests[0].headers


def test_resolve_is_replayed_after_an_ambiguous_failure(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.fail("env_resolve", 502, after_processing=True)
    platform.fail("env_lookup", 504)
    platform.add_environment("alice/gsm8k", id="env-published")
    assert resolve_environments(client, ["math", "alice/gsm8k"], None) == [
        {"id": "env_math"},
        {"id": "env-published"},
    ]
    assert len(platform.requests_for("env_resolve")) == 2
    assert len(platform.requests_for("env_lookup")) == 2


def test_an_unknown_slug_fails_naming_it(platform: StandInPlatform, client: PlatformClient) -> None:
    with pytest.raises(EnvironmentResolutionError) as info:
        resolve_environments(client, ["math", "bob/missing"], None)
    assert info.value.environment == "bob/missing"
    assert "bob/missing" in str(info.value) and "404" in str(info.value)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, APIError),
        (503, RetryableAPIError),
        (429, RetryableAPIError),
        (401, UnauthorizedError),
        (403, ForbiddenError),
    ],
)
@pytest.mark.parametrize("given", ["math", "alice/math"])
def test_a_hub_that_fails_or_refuses_the_key_is_not_a_resolution_error(
    platform: StandInPlatform, client: PlatformClient, status: int, error: type, given: str
) -> None:
    """Failing to reach or be authorised by the hub says nothing about the environment:
    the caller gets the API error (a registration failure), never a resolution error."""
    platform.outage(status)
    with pytest.raises(error) as info:
        resolve_environments(client, [given], None)
    assert not isinstance(info.value, EnvironmentResolutionError)
    assert str(status) in str(info.value)


def test_a_hub_answer_without_an_id_is_a_resolution_error() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={"data": {"name": "x"}}))
    settings = Settings(
        "k", None, "http://hub.test", "http://hub.test", "http://hub.test", "online"
    )
    with PlatformClient(settings, transport=transport) as client:
        with pytest.raises(EnvironmentResolutionError, match="without an id") as info:
            resolve_environments(client, ["math"], None)
    assert info.value.environment == "math"


def test_a_name_the_hub_refuses_is_a_resolution_error(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.fail("env_resolve", 422)
    with pytest.raises(EnvironmentResolutionError, match=r"'math'.*422"):
        resolve_environments(client, ["math"], None)


@pytest.mark.parametrize("bad", [5, b"math", 2.5, object()])
def test_environments_that_are_not_a_list_fail_locally(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="environments="):
        coerce_environments(bad)  # type: ignore[arg-type]


def test_no_evaluation_is_created_when_an_environment_fails(platform: StandInPlatform) -> None:
    lifecycle = OnlineLifecycle(settings_for(platform))
    desc = RunDescription(
        name="r", environments=["math", "bob/missing"], model=None, framework=None,
        description=None, tags=[], team_id=None, config={},
    )  # fmt: skip
    with pytest.raises(EnvironmentResolutionError, match="bob/missing"):
        lifecycle.register(desc)
    assert platform.requests_for("eval_create") == []
    assert platform.evaluations == {}


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [""],
        ["/gsm8k"],
        ["alice/"],
        ["a/b/c"],
        [{"version_id": "v"}],
        [{"nam": "typo"}],
        [3],
        [{"name": 3}],
    ],
)
def test_bad_entries_fail_locally_before_any_request(
    platform: StandInPlatform, client: PlatformClient, bad: list
) -> None:
    with pytest.raises(ConfigurationError):
        resolve_environments(client, ["math", *bad] if bad else bad, None)
    assert platform.requests == []


def test_dataset_name() -> None:
    assert dataset_name(["alice/gsm8k", "math"]) == "gsm8k"
    assert dataset_name([{"id": "x"}, "math"]) == "math"
    assert dataset_name([{"id": "x"}]) is None
    assert dataset_name("gsm8k") == "gsm8k"


def test_coerce_single_values() -> None:
    assert coerce_environments("gsm8k") == [EnvironmentRef(name="gsm8k")]
    assert coerce_environments({"id": "e"}) == [EnvironmentRef(id="e")]

"""The evaluation lifecycle calls (contract §2.3, §4, §13.1; design §4.2-4.3) against the
stand-in platform, with faults injected and outcomes counted server-side."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import datetime, timezone

import httpx
import pytest

from prime_runs.errors import APIError, RetryableAPIError, TransportError, ValidationRejectedError
from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient
from prime_runs.settings import Settings
from prime_runs.status import RunStatus
from prime_runs.testing import StandInPlatform

ENVS = [{"id": "env_math"}]
CONFIG = {"config_source": {"format": "toml", "text": "# c\na = 1\n", "filename": "e.toml"}}


def settings_for(p: StandInPlatform) -> Settings:
    return Settings(p.api_key, None, p.base_url, p.base_url, "http://app.test", "online")


@pytest.fixture(autouse=True)
def _fresh_variant_cache() -> Iterator[None]:
    evaluations._reset_variant_cache()
    yield
    evaluations._reset_variant_cache()


def start(variant: str = "N") -> StandInPlatform:
    return StandInPlatform(variant=variant).start()


@pytest.fixture
def platform() -> Iterator[StandInPlatform]:
    p = start()
    yield p
    p.stop()


@pytest.fixture
def client(platform: StandInPlatform) -> Iterator[PlatformClient]:
    c = PlatformClient(settings_for(platform), sleep=lambda _: None)
    yield c
    c.close()


def create(client: PlatformClient, **overrides: object) -> evaluations.Created:
    kwargs: dict = dict(
        name="run-1", environments=ENVS, model="m/1", framework="verifiers", description=None,
        tags=[], team_id=None, metadata=CONFIG, dataset="math",
    )  # fmt: skip
    kwargs.update(overrides)
    return evaluations.create(client, **kwargs)


# -- create ----------------------------------------------------------------------------


def test_create_body_and_result(platform: StandInPlatform, client: PlatformClient) -> None:
    created = create(client, description="d", tags=["a"], team_id="team_1")
    (request,) = platform.requests_for("eval_create")
    assert request.path == "/api/v1/evaluations/"
    assert request.json == {
        "name": "run-1",
        "environments": ENVS,
        "tags": ["a"],
        "model_name": "m/1",
        "dataset": "math",
        "framework": "verifiers",
        "description": "d",
        "metadata": CONFIG,
        "team_id": "team_1",
    }
    assert created.id in platform.evaluations
    assert created.name == "run-1"
    assert created.url == f"{platform.base_url}/dashboard/evaluations/{created.id}"


def test_create_leaves_out_what_was_not_given(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    created = create(
        client, name=None, model=None, framework=None, metadata={}, dataset=None, tags=None
    )
    body = platform.requests_for("eval_create")[0].json
    assert set(body) == {"name", "environments", "tags"}
    assert body["tags"] == []
    assert body["name"].startswith("eval-") and len(body["name"]) == len("eval-") + 8
    assert created.name == body["name"]


def test_default_name_stem() -> None:
    assert evaluations.default_name("gsm8k", "verifiers").startswith("gsm8k-")
    assert evaluations.default_name(None, "verifiers").startswith("verifiers-")


@pytest.mark.parametrize("reset", [False, True])
def test_ambiguous_create_that_landed_is_adopted_not_repeated(
    platform: StandInPlatform, client: PlatformClient, reset: bool
) -> None:
    platform.fail("eval_create", 502, after_processing=True, reset=reset)
    created = create(client)
    assert len(platform.evaluations) == 1
    assert created.id in platform.evaluations
    assert len(platform.requests_for("eval_create")) == 1
    assert len(platform.requests_for("eval_list")) == 1
    assert created.url == f"{platform.base_url}/dashboard/evaluations/{created.id}"


def test_ambiguous_create_that_did_not_land_is_sent_once_more(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.fail("eval_create", 504)
    created = create(client)
    assert list(platform.evaluations) == [created.id]
    assert len(platform.requests_for("eval_create")) == 2


def test_an_older_evaluation_with_the_same_name_is_not_adopted(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.add_evaluation(
        "ev_old", name="run-1", model_name="m/1", framework="verifiers", metadata=CONFIG,
        created_at="2020-01-01T00:00:00Z",
    )  # fmt: skip
    platform.fail("eval_create", 503)
    created = create(client)
    assert created.id != "ev_old"
    assert len(platform.evaluations) == 2


def test_a_different_config_is_not_adopted(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    create(client, metadata={"other": 1})
    platform.fail("eval_create", 503)
    created = create(client)
    assert platform.evaluations[created.id]["metadata"] == CONFIG
    assert len(platform.evaluations) == 2


def test_twice_ambiguous_create_raises_and_leaves_no_duplicate(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.fail("eval_create", 502, times=2)
    with pytest.raises(RetryableAPIError):
        create(client)
    assert platform.evaluations == {}
    assert len(platform.requests_for("eval_create")) == 2


def test_unreadable_listing_raises_the_create_error_without_resending(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.fail("eval_create", 502, after_processing=True, reset=True)
    platform.fail("eval_list", 500)
    with pytest.raises(TransportError):
        create(client)
    assert len(platform.requests_for("eval_create")) == 1
    assert len(platform.evaluations) == 1  # landed; never duplicated


def test_create_is_replayed_after_429(platform: StandInPlatform, client: PlatformClient) -> None:
    platform.fail("eval_create", 429, retry_after=1)
    create(client)
    assert len(platform.evaluations) == 1
    assert [r.status for r in platform.requests_for("eval_create")] == [429, 201]


def test_create_is_not_replayed_after_a_rejection(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    platform.fail("eval_create", 422)
    with pytest.raises(ValidationRejectedError):
        create(client)
    assert len(platform.requests_for("eval_create")) == 1


def test_missing_evaluation_id_lists_the_returned_keys() -> None:
    s = Settings("k", None, "http://p", "http://p", "http://a", "online")
    transport = httpx.MockTransport(lambda r: httpx.Response(201, json={"name": "x", "ok": 1}))
    client = PlatformClient(s, transport=transport)
    with pytest.raises(APIError, match=r"no evaluation_id \(keys: \['name', 'ok'\]\)"):
        create(client)


# -- update / get ----------------------------------------------------------------------


def test_update_sends_only_what_is_given(platform: StandInPlatform, client: PlatformClient) -> None:
    eval_id = create(client).id
    assert evaluations.update(client, eval_id) is None
    assert evaluations.update(client, eval_id, metadata={}, metrics={}) is None
    evaluations.update(client, eval_id, metrics={"avg_reward": 1.0})
    evaluations.update(client, eval_id, metadata={"a": 1})
    bodies = [r.json for r in platform.requests_for("eval_update")]
    assert bodies == [{"metrics": {"avg_reward": 1.0}}, {"metadata": {"a": 1}}]
    assert evaluations.get(client, eval_id)["metadata"] == {"a": 1}


def test_update_is_replayed_after_an_ambiguous_failure(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    platform.fail("eval_update", 503, after_processing=True)
    evaluations.update(client, eval_id, metrics={"x": 1})
    assert len(platform.requests_for("eval_update")) == 2
    assert platform.evaluations[eval_id]["metrics"] == {"x": 1}


# -- finalize --------------------------------------------------------------------------


def test_finalize_body(platform: StandInPlatform, client: PlatformClient) -> None:
    eval_id = create(client).id
    evaluations.finalize(client, eval_id, None)
    (request,) = platform.requests_for("eval_finalize")
    assert request.json == {"metrics": {}}
    assert platform.evaluations[eval_id]["status"] == "PROCESSING"


@pytest.mark.parametrize("reset", [False, True])
def test_finalize_that_landed_is_not_repeated(
    platform: StandInPlatform, client: PlatformClient, reset: bool
) -> None:
    eval_id = create(client).id
    platform.fail("eval_finalize", 502, after_processing=True, reset=reset)
    evaluations.finalize(client, eval_id, {"avg_reward": 0.5})
    assert platform.evaluations[eval_id]["finalize_count"] == 1
    assert len(platform.requests_for("eval_finalize")) == 1
    assert len(platform.requests_for("eval_get")) == 1


def test_finalize_that_did_not_land_is_resent_once(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    platform.fail("eval_finalize", 504)
    evaluations.finalize(client, eval_id, {"avg_reward": 0.5})
    assert platform.evaluations[eval_id]["finalize_count"] == 1
    assert platform.evaluations[eval_id]["metrics"] == {"avg_reward": 0.5}
    assert len(platform.requests_for("eval_finalize")) == 2


def test_finalize_raises_when_the_read_back_fails(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    platform.fail("eval_finalize", 502)
    platform.fail("eval_get", 404)
    with pytest.raises(RetryableAPIError):
        evaluations.finalize(client, eval_id, {})
    assert len(platform.requests_for("eval_finalize")) == 1


def test_finalize_is_replayed_after_429(platform: StandInPlatform, client: PlatformClient) -> None:
    eval_id = create(client).id
    platform.fail("eval_finalize", 429)
    evaluations.finalize(client, eval_id, {})
    assert platform.evaluations[eval_id]["finalize_count"] == 1
    assert platform.requests_for("eval_get") == []


# -- close-out ---------------------------------------------------------------------------


def close(client: PlatformClient, eval_id: str, status: RunStatus, reason: str | None) -> str:
    return evaluations.close_out(
        client, eval_id, status, reason, config=CONFIG, summary={"avg_reward": 0.25}
    )


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (RunStatus.FAILED, "E: boom", {"status": "FAILED", "error_message": "E: boom"}),
        (RunStatus.CANCELLED, None, {"status": "CANCELLED"}),
        (RunStatus.CANCELLED, "stop", {"status": "CANCELLED", "error_message": "stop"}),
        (RunStatus.CRASHED, "exit", {"status": "FAILED", "error_message": "crashed: exit"}),
        (RunStatus.CRASHED, None, {"status": "FAILED", "error_message": "crashed"}),
    ],
)  # fmt: skip
def test_variant_n_close_out_bodies(
    platform: StandInPlatform,
    client: PlatformClient,
    caplog: pytest.LogCaptureFixture,
    status: RunStatus,
    reason: str | None,
    expected: dict,
) -> None:
    eval_id = create(client).id
    caplog.set_level(logging.INFO, logger="prime_runs")
    assert close(client, eval_id, status, reason) == "status"
    bodies = [r.json for r in platform.requests_for("eval_update")]
    assert bodies == [{"metadata": CONFIG, "metrics": {"avg_reward": 0.25}}, expected]
    stored = platform.evaluations[eval_id]
    assert stored["status"] == expected["status"]
    assert stored["metadata"] == CONFIG
    assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_error_message_is_cut_to_4096(platform: StandInPlatform, client: PlatformClient) -> None:
    eval_id = create(client).id
    close(client, eval_id, RunStatus.FAILED, "x" * 5000)
    assert len(platform.requests_for("eval_update")[1].json["error_message"]) == 4096


def test_already_closed_gets_one_status_put_and_an_info_line(
    platform: StandInPlatform, client: PlatformClient, caplog: pytest.LogCaptureFixture
) -> None:
    eval_id = create(client).id
    evaluations.finalize(client, eval_id, {})
    caplog.set_level(logging.INFO, logger="prime_runs")
    assert close(client, eval_id, RunStatus.FAILED, "late") == "already-closed"
    updates = platform.requests_for("eval_update")
    assert [r.status for r in updates] == [200, 409]
    assert "already closed" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert platform.evaluations[eval_id]["status"] == "PROCESSING"


def test_a_400_on_the_status_write_is_raised(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    platform.fail("eval_update", 400)
    with pytest.raises(ValidationRejectedError):
        evaluations.close_out(client, eval_id, RunStatus.FAILED, "x", config={}, summary={})
    assert len(platform.requests_for("eval_update")) == 1


def test_a_failed_config_put_still_marks_the_run(
    platform: StandInPlatform, client: PlatformClient, caplog: pytest.LogCaptureFixture
) -> None:
    eval_id = create(client).id
    platform.fail("eval_update", 422)
    assert close(client, eval_id, RunStatus.FAILED, "boom") == "status"
    assert "still marking it failed" in caplog.text
    assert platform.evaluations[eval_id]["status"] == "FAILED"


@pytest.mark.parametrize("variant", ["S", "S-ignore"])
def test_variant_s_writes_the_marker_merged_into_the_config(
    variant: str, caplog: pytest.LogCaptureFixture
) -> None:
    with StandInPlatform(variant=variant) as p:
        client = PlatformClient(settings_for(p), sleep=lambda _: None)
        eval_id = create(client).id
        before = datetime.now(timezone.utc).replace(microsecond=0)
        caplog.set_level(logging.INFO, logger="prime_runs")
        assert close(client, eval_id, RunStatus.CRASHED, "SIGTERM") == "marker"
        bodies = [r.json for r in p.requests_for("eval_update")]
        assert bodies[0] == {"metadata": CONFIG, "metrics": {"avg_reward": 0.25}}
        assert bodies[1] == {"status": "FAILED", "error_message": "crashed: SIGTERM"}
        marker_body = bodies[2]
        assert set(marker_body) == {"metadata"}
        stored = p.evaluations[eval_id]["metadata"]
        assert stored == marker_body["metadata"]
        assert {k: v for k, v in stored.items() if k != "prime_runs"} == CONFIG
        mark = stored["prime_runs"]
        assert mark["status"] == "crashed" and mark["error"] == "SIGTERM"
        finished = datetime.strptime(mark["finished_at"], "%Y-%m-%dT%H:%M:%SZ")
        assert finished.replace(tzinfo=timezone.utc) >= before
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "running" in warnings[0].getMessage()
        assert p.evaluations[eval_id]["status"] == "RUNNING"

        # Remembered for the process: the next close-out skips the status write.
        second = create(client, name="run-2").id
        assert close(client, second, RunStatus.FAILED, None) == "marker"
        assert [set(r.json) for r in p.requests_for("eval_update")[3:]] == [
            {"metadata", "metrics"},
            {"metadata"},
        ]
        assert p.evaluations[second]["metadata"]["prime_runs"]["error"] is None
        client.close()


def test_variant_s_without_config_still_gets_a_marker() -> None:
    with StandInPlatform(variant="S") as p:
        client = PlatformClient(settings_for(p), sleep=lambda _: None)
        eval_id = create(client, metadata=None).id
        evaluations.close_out(client, eval_id, RunStatus.CANCELLED, None, config=None, summary=None)
        bodies = [r.json for r in p.requests_for("eval_update")]
        assert bodies[0] == {"status": "CANCELLED"}
        assert set(bodies[1]["metadata"]) == {"prime_runs"}
        client.close()


def test_close_out_needs_a_non_completed_status(client: PlatformClient) -> None:
    with pytest.raises(ValueError):
        evaluations.close_out(client, "e", RunStatus.COMPLETED, None, config={}, summary={})


def test_status_write_is_replayed_after_an_ambiguous_failure(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    platform.fail("eval_update", 502, after_processing=True)
    outcome = evaluations.close_out(
        client, eval_id, RunStatus.FAILED, "boom", config={}, summary={}
    )
    # The replay meets a closed run (409): the first attempt had landed.
    assert outcome == "already-closed"
    assert platform.evaluations[eval_id]["status"] == "FAILED"
    assert [r.status for r in platform.requests_for("eval_update")] == [502, 409]


def test_config_put_is_replayed_after_a_gateway_error(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    platform.fail("eval_update", 504)
    assert close(client, eval_id, RunStatus.FAILED, "boom") == "status"
    assert [r.status for r in platform.requests_for("eval_update")] == [504, 200, 200]
    assert platform.evaluations[eval_id]["metrics"] == {"avg_reward": 0.25}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_pool(
    platform: StandInPlatform, client: PlatformClient
) -> None:
    eval_id = create(client).id
    parent_pool = client._client
    pid = os.fork()
    if pid == 0:  # child: must not reuse the parent's sockets
        code = 1
        try:
            evaluations.update(client, eval_id, metrics={"from": "child"})
            code = 0 if client._client is not parent_pool else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert client._client is parent_pool
    evaluations.update(client, eval_id, metadata={"from": "parent"})
    stored = platform.evaluations[eval_id]
    assert stored["metrics"] == {"from": "child"} and stored["metadata"] == {"from": "parent"}

"""The stand-in platform's platform-API routes, driven over real HTTP with httpx."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from prime_runs.testing import StandInPlatform


@pytest.fixture
def client(prime_platform: StandInPlatform) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {prime_platform.api_key}"}
    with httpx.Client(base_url=prime_platform.base_url, headers=headers) as c:
        yield c


def _create(client: httpx.Client, **fields: object) -> str:
    body = {"name": "run", "environments": [{"id": "env_gsm8k"}], "tags": [], **fields}
    response = client.post("/api/v1/evaluations/", json=body)
    assert response.status_code == 201, response.text
    return response.json()["evaluation_id"]


# -- auth --------------------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", "test-key"])
def test_platform_routes_require_the_bearer_key(
    prime_platform: StandInPlatform, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.post(
        f"{prime_platform.base_url}/api/v1/evaluations/",
        json={"name": "x", "environments": [{"id": "e"}]},
        headers=headers,
    )
    assert response.status_code == 401
    assert "detail" in response.json()
    assert prime_platform.api_key not in response.text
    assert prime_platform.evaluations == {}


def test_traces_routes_answer_401_with_the_traces_envelope(
    prime_platform: StandInPlatform,
) -> None:
    response = httpx.get(f"{prime_platform.base_url}/api/v1/traces/t-1")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_api_key_is_not_in_reprs(prime_platform: StandInPlatform, client: httpx.Client) -> None:
    client.get("/api/v1/evaluations/")
    assert prime_platform.api_key not in repr(prime_platform)
    assert prime_platform.api_key not in repr(prime_platform.requests)
    assert prime_platform.requests[0].headers["authorization"] == "Bearer test-key"


def test_unknown_path_is_404_and_wrong_method_405(client: httpx.Client) -> None:
    assert client.get("/api/v1/nothing-here").status_code == 404
    assert client.delete("/api/v1/evaluations/").status_code == 405


# -- environment hub ---------------------------------------------------------------------


def test_resolve_is_get_or_create_by_name(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    first = client.post("/api/v1/environmentshub/resolve", json={"name": "gsm8k"}).json()
    again = client.post("/api/v1/environmentshub/resolve", json={"name": "gsm8k"}).json()
    assert first["data"]["created"] is True
    assert again["data"]["created"] is False
    assert first["data"]["id"] == again["data"]["id"]
    assert "name" in first["data"]["owner"]
    assert [r.route for r in prime_platform.requests] == ["env_resolve", "env_resolve"]


def test_resolve_returns_a_preregistered_name(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    env_id = prime_platform.add_environment("gsm8k", id="env-123")
    data = client.post("/api/v1/environmentshub/resolve", json={"name": "gsm8k"}).json()["data"]
    assert data == {**data, "id": "env-123", "created": False}
    assert env_id == "env-123"


def test_resolve_without_a_name_is_422(client: httpx.Client) -> None:
    assert client.post("/api/v1/environmentshub/resolve", json={}).status_code == 422


def test_lookup_finds_registered_slugs_and_never_creates(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.add_environment("alice/gsm8k", id="env-published")
    found = client.get("/api/v1/environmentshub/alice/gsm8k/@latest")
    assert found.status_code == 200
    assert found.json()["data"]["id"] == "env-published"
    assert client.get("/api/v1/environmentshub/bob/gsm8k/@latest").status_code == 404
    assert client.get("/api/v1/environmentshub/bob/gsm8k/@latest").status_code == 404
    # A slug registration does not hijack resolve-by-name.
    resolved = client.post("/api/v1/environmentshub/resolve", json={"name": "gsm8k"}).json()
    assert resolved["data"]["id"] != "env-published"


# -- evaluations -------------------------------------------------------------------------


def test_create_answers_201_and_stores_the_body(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    body = {
        "name": "gsm8k-3f9a1c2e",
        "environments": [{"id": "env-123", "version_id": "v-7"}],
        "tags": ["a"],
        "model_name": "Qwen/Qwen3-8B",
        "dataset": "gsm8k",
        "framework": "verifiers",
        "metadata": {"config_source": {"format": "toml", "text": "x = 1\n"}},
        "team_id": "team_123",
    }
    response = client.post("/api/v1/evaluations/", json=body)
    assert response.status_code == 201
    created = response.json()
    eval_id = created["evaluation_id"]
    assert created["name"] == "gsm8k-3f9a1c2e"
    assert created["status"] == "RUNNING"
    assert created["viewer_url"] == f"{prime_platform.base_url}/dashboard/evaluations/{eval_id}"
    stored = prime_platform.evaluations[eval_id]
    for key in ("name", "environments", "tags", "model_name", "dataset", "framework"):
        assert stored[key] == body[key]
    assert stored["metadata"] == body["metadata"]
    assert stored["team_id"] == "team_123"
    assert (stored["status"], stored["finalize_count"], stored["error_message"]) == (
        "RUNNING",
        0,
        None,
    )
    assert prime_platform.requests_for("eval_create")[0].json == body


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"environments": [{"id": "e"}]},
        {"name": "x"},
        {"name": "x", "environments": [{"id": "e"}], "metadata": "not an object"},
        {"name": "x", "environments": [{"id": "e"}], "tags": [1]},
    ],
)
def test_create_validates_its_body(
    prime_platform: StandInPlatform, client: httpx.Client, body: object
) -> None:
    response = client.post("/api/v1/evaluations/", json=body)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)
    assert prime_platform.evaluations == {}


def test_get_answers_camel_case_fields(client: httpx.Client) -> None:
    eval_id = _create(client, model_name="m", metadata={"k": 1}, team_id="t")
    client.post(f"/api/v1/evaluations/{eval_id}/samples", json={"samples": [{"a": 1}, {"a": 2}]})
    got = client.get(f"/api/v1/evaluations/{eval_id}").json()
    assert got["evaluation_id"] == eval_id
    assert got["status"] == "RUNNING"
    assert got["modelName"] == "m"
    assert got["metadata"] == {"k": 1}
    assert got["metrics"] == {}
    assert got["totalSamples"] == 2
    assert got["environmentIds"] == ["env_gsm8k"]
    assert got["teamId"] == "t"
    assert got["createdAt"]
    assert client.get("/api/v1/evaluations/ev-missing").status_code == 404


def test_list_is_newest_first_with_skip_and_limit(client: httpx.Client) -> None:
    ids = [_create(client, name=f"run-{n}") for n in range(3)]
    page = client.get("/api/v1/evaluations/", params={"skip": 1, "limit": 1}).json()
    assert page["total"] == 3
    assert (page["skip"], page["limit"]) == (1, 1)
    assert [e["evaluation_id"] for e in page["evaluations"]] == [ids[1]]
    everything = client.get("/api/v1/evaluations/").json()["evaluations"]
    assert [e["evaluation_id"] for e in everything] == ids[::-1]
    assert all(e["createdAt"] for e in everything)


def test_list_filters_by_team(client: httpx.Client) -> None:
    mine = _create(client, team_id="t1")
    _create(client, team_id="t2")
    page = client.get("/api/v1/evaluations/", params={"team_id": "t1"}).json()
    assert [e["evaluation_id"] for e in page["evaluations"]] == [mine]


def test_update_replaces_metadata_and_metrics_whole(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client, metadata={"a": 1, "b": 2})
    client.put(f"/api/v1/evaluations/{eval_id}", json={"metrics": {"x": 1, "y": 2}})
    response = client.put(
        f"/api/v1/evaluations/{eval_id}", json={"metadata": {"c": 3}, "metrics": {"z": 0}}
    )
    assert response.status_code == 200
    assert response.json()["evaluation_id"] == eval_id
    stored = prime_platform.evaluations[eval_id]
    assert stored["metadata"] == {"c": 3}
    assert stored["metrics"] == {"z": 0}


def test_update_of_an_unknown_evaluation_is_404(client: httpx.Client) -> None:
    assert client.put("/api/v1/evaluations/nope", json={"metrics": {}}).status_code == 404


def test_variant_n_writes_status_then_409s_once_terminal(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    closed = client.put(
        f"/api/v1/evaluations/{eval_id}",
        json={"status": "FAILED", "error_message": "ValueError: boom"},
    )
    assert closed.status_code == 200
    stored = prime_platform.evaluations[eval_id]
    assert (stored["status"], stored["error_message"]) == ("FAILED", "ValueError: boom")
    assert client.get(f"/api/v1/evaluations/{eval_id}").json()["status"] == "FAILED"

    again = client.put(f"/api/v1/evaluations/{eval_id}", json={"status": "CANCELLED"})
    assert again.status_code == 409
    assert again.json()["detail"].startswith("Evaluation is FAILED; only PENDING or RUNNING")
    assert prime_platform.evaluations[eval_id]["status"] == "FAILED"
    # The guard only concerns status writes: config and summary still land.
    assert client.put(f"/api/v1/evaluations/{eval_id}", json={"metrics": {"m": 1}}).is_success


def test_variant_n_caps_the_error_message_and_refuses_other_statuses(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    bad = client.put(f"/api/v1/evaluations/{eval_id}", json={"status": "COMPLETED"})
    assert bad.status_code == 422
    client.put(
        f"/api/v1/evaluations/{eval_id}", json={"status": "CANCELLED", "error_message": "x" * 5000}
    )
    assert prime_platform.evaluations[eval_id]["error_message"] == "x" * 4096


@pytest.mark.prime_platform(variant="S")
def test_variant_s_rejects_a_status_field(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    response = client.put(f"/api/v1/evaluations/{eval_id}", json={"status": "FAILED"})
    assert response.status_code == 422
    assert prime_platform.evaluations[eval_id]["status"] == "RUNNING"
    marker = {"metadata": {"k": 1, "prime_runs": {"status": "failed"}}}
    assert client.put(f"/api/v1/evaluations/{eval_id}", json=marker).status_code == 200
    assert prime_platform.evaluations[eval_id]["metadata"] == marker["metadata"]


@pytest.mark.prime_platform(variant="S-ignore")
def test_variant_s_ignore_accepts_status_but_the_run_stays_running(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    response = client.put(
        f"/api/v1/evaluations/{eval_id}", json={"status": "FAILED", "error_message": "boom"}
    )
    assert response.status_code == 200
    confirm = client.get(f"/api/v1/evaluations/{eval_id}").json()
    assert confirm["status"] == "RUNNING"
    assert prime_platform.evaluations[eval_id]["error_message"] is None


def test_variant_can_change_while_running(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    prime_platform.variant = "S"
    assert (
        client.put(f"/api/v1/evaluations/{eval_id}", json={"status": "FAILED"}).status_code == 422
    )
    with pytest.raises(ValueError):
        prime_platform.variant = "X"


def test_finalize_moves_to_processing_and_counts(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    response = client.post(
        f"/api/v1/evaluations/{eval_id}/finalize", json={"metrics": {"avg_reward": 0.75}}
    )
    assert response.status_code == 200
    assert response.json()["status"] == "PROCESSING"
    client.post(f"/api/v1/evaluations/{eval_id}/finalize", json={})
    stored = prime_platform.evaluations[eval_id]
    assert (stored["status"], stored["finalize_count"]) == ("PROCESSING", 2)
    assert stored["metrics"] == {"avg_reward": 0.75}
    # Finalized means no longer PENDING/RUNNING: a status write is refused.
    late = client.put(f"/api/v1/evaluations/{eval_id}", json={"status": "FAILED"})
    assert late.status_code == 409
    prime_platform.complete(eval_id)
    assert client.get(f"/api/v1/evaluations/{eval_id}").json()["status"] == "COMPLETED"


def test_finalize_of_a_closed_run_is_409(client: httpx.Client) -> None:
    eval_id = _create(client)
    client.put(f"/api/v1/evaluations/{eval_id}", json={"status": "CANCELLED"})
    assert client.post(f"/api/v1/evaluations/{eval_id}/finalize", json={}).status_code == 409


def test_add_evaluation_seeds_a_launcher_run(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.add_evaluation("ev-launched", name="hosted")
    assert client.put("/api/v1/evaluations/ev-launched", json={"metrics": {"a": 1}}).is_success
    assert prime_platform.evaluations["ev-launched"]["metrics"] == {"a": 1}


# -- samples -----------------------------------------------------------------------------


def test_samples_are_appended_in_order_with_duplicates(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    url = f"/api/v1/evaluations/{eval_id}/samples"
    first = client.post(url, json={"samples": [{"sample_id": "a"}, {"sample_id": "b"}]})
    assert first.json()["samples_pushed"] == 2
    client.post(url, json={"samples": [{"sample_id": "a"}]})
    assert [r["sample_id"] for r in prime_platform.samples(eval_id)] == ["a", "b", "a"]
    assert prime_platform.samples("unknown") == []
    assert client.post("/api/v1/evaluations/nope/samples", json={"samples": []}).status_code == 404
    assert client.post(url, json={"samples": "x"}).status_code == 422


def test_samples_list_paginates(client: httpx.Client) -> None:
    eval_id = _create(client)
    url = f"/api/v1/evaluations/{eval_id}/samples"
    client.post(url, json={"samples": [{"n": n} for n in range(5)]})
    page = client.get(url, params={"page": 2, "limit": 2}).json()
    assert page == {
        "samples": [{"n": 2}, {"n": 3}],
        "total": 5,
        "page": 2,
        "limit": 2,
        "hasMore": True,
    }
    last = client.get(url, params={"page": 3, "limit": 2}).json()
    assert (last["samples"], last["hasMore"]) == ([{"n": 4}], False)
    assert client.get(url, params={"page": 0}).status_code == 422


def test_samples_list_newest_first_when_asked(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    url = f"/api/v1/evaluations/{eval_id}/samples"
    client.post(url, json={"samples": [{"n": n} for n in range(3)]})
    prime_platform.samples_order = "newest"
    assert client.get(url, params={"page": 1, "limit": 2}).json()["samples"] == [
        {"n": 2},
        {"n": 1},
    ]
    with pytest.raises(ValueError, match="samples_order"):
        prime_platform.samples_order = "random"


def test_a_held_request_is_stored_after_its_client_gave_up(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    url = f"/api/v1/evaluations/{eval_id}/samples"
    prime_platform.hold("samples_append", 1.0)
    with pytest.raises(httpx.ReadTimeout):
        client.post(url, json={"samples": [{"sample_id": "a"}]}, timeout=0.2)
    assert prime_platform.samples(eval_id) == []
    assert client.post(url, json={"samples": [{"sample_id": "b"}]}).status_code == 200  # not held
    deadline = time.monotonic() + 30
    while len(prime_platform.samples(eval_id)) < 2:  # the held one lands later
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert [r["sample_id"] for r in prime_platform.samples(eval_id)] == ["b", "a"]


def test_samples_over_25_mib_are_refused_with_413(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client)
    envelope = b'{"samples":[{"s":""}]}'
    body = envelope.replace(b'""', b'"' + b"x" * (26_214_400 - len(envelope) + 1) + b'"')
    assert len(body) == 26_214_401
    url = f"/api/v1/evaluations/{eval_id}/samples"
    headers = {"Content-Type": "application/json"}
    assert client.post(url, content=body, headers=headers).status_code == 413
    assert prime_platform.samples(eval_id) == []
    at_limit = body[:-5] + b'"}]}'
    assert len(at_limit) == 26_214_400
    assert client.post(url, content=at_limit, headers=headers).status_code == 200
    assert len(prime_platform.samples(eval_id)) == 1


# -- lifecycle ---------------------------------------------------------------------------


def test_env_points_every_url_at_the_stand_in(prime_platform: StandInPlatform) -> None:
    env = prime_platform.env()
    assert env == {
        "PRIME_API_KEY": "test-key",
        "PRIME_API_BASE_URL": prime_platform.base_url,
        "PRIME_TRACES_URL": prime_platform.base_url,
        "PRIME_FRONTEND_URL": prime_platform.base_url,
    }
    assert prime_platform.base_url.startswith("http://127.0.0.1:")


def test_restart_keeps_port_and_state() -> None:
    platform = StandInPlatform(api_key="k")
    with platform:
        url = platform.base_url
        headers = {"Authorization": "Bearer k"}
        httpx.post(f"{url}/api/v1/environmentshub/resolve", json={"name": "e"}, headers=headers)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/api/v1/evaluations/", headers=headers)
    with platform:
        assert platform.base_url == url
        assert httpx.get(f"{url}/api/v1/evaluations/", headers=headers).status_code == 200
        assert [r.route for r in platform.requests] == ["env_resolve", "eval_list"]


def test_reset_forgets_everything(prime_platform: StandInPlatform, client: httpx.Client) -> None:
    eval_id = _create(client)
    prime_platform.fail("eval_get", 503)
    prime_platform.reset()
    assert prime_platform.requests == []
    assert prime_platform.evaluations == {}
    assert client.get(f"/api/v1/evaluations/{eval_id}").status_code == 404  # no 503 left


def test_constructor_validates_its_choices() -> None:
    with pytest.raises(ValueError):
        StandInPlatform(variant="Z")
    with pytest.raises(ValueError):
        StandInPlatform(traces="maybe")
    with pytest.raises(RuntimeError):
        _ = StandInPlatform().base_url


def test_on_request_sees_each_answered_request_summarised_without_headers() -> None:
    from prime_traces import TracesClient

    seen: list = []
    with StandInPlatform(api_key="sk-summary-key", on_request=seen.append) as platform:
        TracesClient(api_key="sk-summary-key", base_url=platform.base_url).upload_records(
            [{"id": "t-1", "timing": {"start": 1.0}}, {"id": "t-2", "timing": {"start": 2.0}}]
        )
        httpx.get(f"{platform.base_url}/api/v1/evaluations/?limit=2")
    upload, listing = seen
    assert upload is platform.requests[0]
    summary = upload.summary()
    assert summary.startswith("POST /api/v1/traces [traces_upload] -> 201")
    assert "2 trace lines gzip" in summary and "key=sha256:" in summary
    assert listing.summary() == "GET /api/v1/evaluations/?limit=2 [eval_list] -> 401"
    assert all("sk-summary-key" not in r.summary() for r in seen)


def test_a_failing_on_request_observer_never_breaks_an_answer() -> None:
    def broken(record: object) -> None:
        raise RuntimeError("observer bug")

    with StandInPlatform(on_request=broken) as platform:
        answer = httpx.get(f"{platform.base_url}/api/v1/evaluations/")
        assert answer.status_code == 401
        assert any("observer bug" in e for e in platform.server_errors)

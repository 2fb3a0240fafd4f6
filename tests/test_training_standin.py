"""The stand-in's training endpoints (contract Appendix A), over real HTTP, and the
platform client that speaks them (platform/training.py)."""

from __future__ import annotations

import httpx
import pytest

from prime_runs.errors import (
    APIError,
    ConfigurationError,
    ForbiddenError,
    ValidationRejectedError,
)
from prime_runs.platform.training import (
    TrainingClient,
    TrainingPlatform,
    TrainingSpec,
    register_body,
    split_root,
)
from prime_runs.settings import Settings
from prime_runs.status import RunStatus

PARQUET = b"PAR1" + b"\x00" * 16 + b"PAR1"


def platform_for(standin, base_url: str | None = None) -> TrainingPlatform:
    settings = Settings.resolve(api_key=standin.api_key, base_url=base_url or standin.base_url)
    return TrainingPlatform(settings, TrainingClient(settings, max_attempts=2))


def post(standin, path: str, body: object, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {standin.api_key}", **headers}
    return httpx.post(f"{standin.base_url}{path}", json=body, headers=auth)


def register(platform: TrainingPlatform, **kw: object) -> str:
    body = register_body(
        model="Qwen/Qwen3-4B",
        team_id="team-1",
        spec=TrainingSpec(max_steps=3),
        environments=[],
        name=None,
        config={},
    )
    body.update(kw)
    return platform.register(body).id


def test_register_stores_the_body_and_answers_the_run(prime_platform):
    platform = platform_for(prime_platform)
    spec = TrainingSpec(max_steps=10, batch_size=8, rollouts_per_example=4, seq_len=2048)

    class Ref:
        id, slug, name, version_id = None, "alice/gsm8k", None, "v-7"

    body = register_body(
        model="Qwen/Qwen3-4B",
        team_id="team-1",
        spec=spec,
        environments=[Ref()],
        name="r1",
        config={"lr": 1e-5},
    )
    registration = platform.register(body)
    stored = prime_platform.training_runs[registration.id]
    assert stored["status"] == "running" and registration.name == "r1"
    assert stored["environments"] == [{"id": "alice/gsm8k", "version_id": "v-7"}]
    assert stored["run_config"] == {"lr": 1e-5} and stored["seq_len"] == 2048
    assert registration.url.endswith(f"/dashboard/training/{registration.id}")
    (request,) = prime_platform.requests_for("rft_register")
    assert request.headers["authorization"] == f"Bearer {prime_platform.api_key}"


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"team_id": None}, 422),
        ({"base_model": None}, 422),
        ({"max_steps": -1}, 422),
        ({"max_steps": "3"}, 422),
        ({"unexpected": 1}, 422),
        ({"environments": [{"name": "gsm8k"}]}, 422),
    ],
)
def test_register_is_strict(prime_platform, change, status):
    body = {"base_model": "m", "max_steps": 1, "team_id": "t", "environments": []}
    body.update(change)
    body = {k: v for k, v in body.items() if v is not None}
    assert post(prime_platform, "/api/v1/rft/external-runs", body).status_code == status
    assert prime_platform.training_runs == {}


def test_a_team_off_the_allowlist_gets_403(prime_platform):
    prime_platform.train_teams = ["team-ok"]
    with pytest.raises(ForbiddenError):
        register(platform_for(prime_platform))
    assert register(platform_for(prime_platform), team_id="team-ok")


def test_register_body_needs_a_model_and_a_team():
    with pytest.raises(ConfigurationError, match="model="):
        register_body(
            model=None, team_id="t", spec=TrainingSpec(), environments=[], name=None, config={}
        )
    with pytest.raises(ConfigurationError, match="team"):
        register_body(
            model="m", team_id=None, spec=TrainingSpec(), environments=[], name=None, config={}
        )


@pytest.mark.parametrize(
    "bad",
    [
        {"max_steps": -1},
        {"batch_size": 0},
        {"seq_len": "1"},
        {"max_steps": True},
        {"wandb_project": 3},
    ],
)
def test_training_spec_refuses_bad_values(bad):
    with pytest.raises(ConfigurationError):
        TrainingSpec(**bad)
    with pytest.raises(ValueError):  # 0.1.4 callers catch ValueError
        TrainingSpec(**bad)


def test_metrics_rows_are_kept_one_per_step(prime_platform):
    platform = platform_for(prime_platform)
    run_id = register(platform)
    for step, loss in ((0, 1.0), (1, 0.5), (1, 0.4)):
        body = f'{{"run_id":"{run_id}","metrics":{{"loss":{loss},"step":{step}}}}}'
        platform.send_metrics(run_id, body.encode(), None)
    assert len(prime_platform.training_metrics(run_id)) == 3
    assert prime_platform.training_steps(run_id)[1]["loss"] == 0.4
    bad = post(prime_platform, "/api/v1/rft/metrics", {"run_id": run_id, "metrics": {"step": -2}})
    assert bad.status_code == 422
    unknown = post(prime_platform, "/api/v1/rft/metrics", {"run_id": "nope", "metrics": {}})
    assert unknown.status_code == 404


def test_samples_presign_upload_confirm(prime_platform):
    platform = platform_for(prime_platform)
    run_id = register(platform)
    url, key = platform.presign(run_id, 10, None)
    with pytest.raises(APIError):  # confirm before the object exists
        platform.confirm(run_id, 10, key, None)
    platform.upload(url, PARQUET)
    platform.confirm(run_id, 10, key, None)
    platform.confirm(run_id, 10, key, None)  # a replay confirms once
    assert prime_platform.training_samples(run_id) == [{"step": 10, "s3_key": key}]
    assert prime_platform.object_bytes(key) == PARQUET
    with pytest.raises(APIError):  # presigned for step 10, not 20
        platform.confirm(run_id, 20, key, None)
    (put,) = prime_platform.requests_for("object_put")
    assert "authorization" not in put.headers and "x-api-key" not in put.headers


def test_the_object_store_is_strict(prime_platform):
    platform = platform_for(prime_platform)
    run_id = register(platform)
    url, _ = platform.presign(run_id, 0, None)
    headers = {"Content-Type": "application/parquet"}
    assert httpx.put(url, content=b"not parquet", headers=headers).status_code == 400
    assert httpx.put(url, content=PARQUET).status_code == 403  # no content type
    assert httpx.put(url.split("?")[0], content=PARQUET, headers=headers).status_code == 403
    with_auth = {**headers, "Authorization": "Bearer x"}
    assert httpx.put(url, content=PARQUET, headers=with_auth).status_code == 400
    with pytest.raises(APIError) as info:  # 4xx is final
        platform.upload(url, b"nope")
    assert info.value.status_code == 400


def test_upload_retries_a_5xx(prime_platform):
    platform = platform_for(prime_platform)
    run_id = register(platform)
    url, key = platform.presign(run_id, 0, None)
    prime_platform.fail("object_put", 503)
    platform.upload(url, PARQUET)
    assert len(prime_platform.requests_for("object_put")) == 2
    assert prime_platform.object_bytes(key) == PARQUET


def test_finalize_completes_and_status_closes(prime_platform):
    platform = platform_for(prime_platform)
    done, failed, cancelled = register(platform), register(platform), register(platform)
    platform.close(done, RunStatus.COMPLETED, None, None)
    platform.close(done, RunStatus.COMPLETED, None, None)  # compare-and-set: still fine
    platform.close(failed, RunStatus.FAILED, "ValueError: boom", None)
    platform.close(cancelled, RunStatus.CANCELLED, "interrupted", None)
    runs = prime_platform.training_runs
    assert runs[done]["status"] == "completed" and runs[done]["finalize_count"] == 2
    assert (runs[failed]["status"], runs[failed]["error_message"]) == ("failed", "ValueError: boom")
    assert runs[cancelled]["error_message"] == "cancelled: interrupted"
    platform.close(failed, RunStatus.CRASHED, "exit", None)  # 409 = already closed: no error
    assert prime_platform.training_runs[failed]["error_message"] == "ValueError: boom"
    assert [r.status for r in prime_platform.requests_for("rft_status")][-1] == 409


def test_finalize_failing_falls_back_to_a_status_put(prime_platform):
    platform = platform_for(prime_platform)
    run_id = register(platform)
    prime_platform.fail("rft_finalize", 500)
    platform.close(run_id, RunStatus.COMPLETED, None, None)
    assert prime_platform.training_runs[run_id]["status"] == "completed"
    (put,) = prime_platform.requests_for("rft_status")
    assert put.json == {"status": "completed"}


@pytest.mark.parametrize("suffix", ["/api/internal", "/api/internal/rft", "/api/internal/rft/"])
def test_hosted_runs_through_the_internal_root(prime_platform, suffix):
    run_id = prime_platform.add_training_run("hosted-1", hosted=True)
    public = platform_for(prime_platform)
    with pytest.raises(ValidationRejectedError):  # the public root refuses a hosted run
        public.send_metrics(run_id, b'{"run_id":"hosted-1","metrics":{"step":0}}', None)
    internal = platform_for(prime_platform, prime_platform.base_url + suffix)
    assert internal.client.internal
    internal.send_metrics(run_id, b'{"run_id":"hosted-1","metrics":{"step":0}}', None)
    internal.close(run_id, RunStatus.COMPLETED, None, None)
    (metrics,) = prime_platform.requests_for("internal_rft_metrics")
    assert metrics.headers["x-api-key"] == prime_platform.api_key
    assert prime_platform.training_runs[run_id]["status"] == "completed"
    with pytest.raises(ConfigurationError):  # no registering through the internal root
        register(internal)
    assert "test-key" not in repr(internal.client)


def test_the_internal_root_needs_the_run_token(prime_platform):
    prime_platform.add_training_run("hosted-2", hosted=True)
    body = {"run_id": "hosted-2", "metrics": {"step": 0}}
    assert post(prime_platform, "/api/internal/rft/metrics", body).status_code == 401
    ok = post(prime_platform, "/api/internal/rft/metrics", body, **{"x-api-key": "test-key"})
    assert ok.status_code == 200
    status = httpx.put(f"{prime_platform.base_url}/api/internal/rft/external-runs/hosted-2/status")
    assert status.status_code == 404  # not served on the internal root


def test_split_root():
    assert split_root("http://h/api/internal/rft") == ("http://h", True)
    assert split_root("http://h/api/v1/rft") == ("http://h", False)
    assert split_root("http://rft") == ("http://rft", False)

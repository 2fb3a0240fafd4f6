"""Fault injection on the stand-in: fail(), stall(), outage(), and stop() under load."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from prime_traces import TracesClient
from prime_traces.exceptions import RetryableAPIError

from prime_runs.testing import StandInPlatform

TRACE = {"id": "t-1", "timing": {"start": 1795970000.0}}


@pytest.fixture
def client(prime_platform: StandInPlatform) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {prime_platform.api_key}"}
    with httpx.Client(base_url=prime_platform.base_url, headers=headers) as c:
        yield c


def _create(client: httpx.Client) -> httpx.Response:
    return client.post("/api/v1/evaluations/", json={"name": "r", "environments": [{"id": "e"}]})


def _wait_until(condition: Callable[[], bool]) -> None:
    """Poll for a state change made by another thread (fails after 10 s)."""
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


class _Background:
    """Run one request in a thread; keep its response or exception."""

    def __init__(self, send: Callable[[], httpx.Response]) -> None:
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(send,), daemon=True)
        self._thread.start()

    def _run(self, send: Callable[[], httpx.Response]) -> None:
        try:
            self.response = send()
        except BaseException as exc:
            self.error = exc

    def join(self) -> None:
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()


def test_fail_answers_without_processing_then_recovers(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.fail("eval_create", 503, times=2)
    assert [_create(client).status_code for _ in range(3)] == [503, 503, 201]
    assert len(prime_platform.evaluations) == 1
    assert [r.status for r in prime_platform.requests_for("eval_create")] == [503, 503, 201]
    assert prime_platform.requests_for("eval_create")[0].json["name"] == "r"


def test_fail_after_processing_creates_the_evaluation_anyway(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.fail("eval_create", 502, after_processing=True)
    response = _create(client)
    assert response.status_code == 502
    assert "detail" in response.json()
    assert len(prime_platform.evaluations) == 1  # the untracked evaluation


def test_fail_after_processing_on_samples_stores_the_rows(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    eval_id = _create(client).json()["evaluation_id"]
    url = f"/api/v1/evaluations/{eval_id}/samples"
    prime_platform.fail("samples_append", 504, after_processing=True)
    assert client.post(url, json={"samples": [{"sample_id": "a"}]}).status_code == 504
    assert client.post(url, json={"samples": [{"sample_id": "a"}]}).status_code == 200
    assert prime_platform.samples(eval_id) == [{"sample_id": "a"}, {"sample_id": "a"}]


def test_upload_failing_after_commit_is_replayed_by_the_client(
    prime_platform: StandInPlatform,
) -> None:
    prime_platform.fail("traces_upload", 503, after_processing=True, retry_after=0)
    client = TracesClient(
        api_key=prime_platform.api_key, base_url=prime_platform.base_url, team_id=""
    )
    (receipt,) = client.upload_records([TRACE])
    assert receipt.status == "committed"
    uploads = prime_platform.requests_for("traces_upload")
    assert [(r.status, r.replayed) for r in uploads] == [(503, False), (200, True)]
    assert prime_platform.trace_writes == {"t-1": 1}
    assert len(prime_platform.receipts) == 1


def test_reset_drops_the_connection_without_an_answer(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.fail("eval_create", reset=True)
    with pytest.raises(httpx.TransportError):
        _create(client)
    assert prime_platform.requests_for("eval_create")[0].status is None
    assert prime_platform.evaluations == {}
    assert _create(client).status_code == 201  # the client reconnects


def test_reset_after_processing_stores_then_drops(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.fail("eval_create", reset=True, after_processing=True)
    with pytest.raises(httpx.TransportError):
        _create(client)
    assert len(prime_platform.evaluations) == 1


def test_traces_faults_use_the_error_envelope_and_retry_after(
    prime_platform: StandInPlatform,
) -> None:
    prime_platform.fail("traces_upload", 429, retry_after=0.0, times=2)
    prime_platform.fail("traces_upload", 503, code="writer_pool_saturated", retry_after=0)
    client = TracesClient(
        api_key=prime_platform.api_key, base_url=prime_platform.base_url, team_id=""
    )
    with pytest.raises(RetryableAPIError) as caught:
        client.upload_records([TRACE], max_attempts=3)
    assert (caught.value.status_code, caught.value.code) == (503, "writer_pool_saturated")
    codes = [r.error_code for r in prime_platform.requests_for("traces_upload")]
    assert codes == ["rate_limited", "rate_limited", "writer_pool_saturated"]
    assert prime_platform.traces == {}


@pytest.mark.parametrize(
    ("retry_after", "header"),
    [(2.0, "2"), (7.5, "7.5"), ("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT")],
)
def test_retry_after_header(
    prime_platform: StandInPlatform, client: httpx.Client, retry_after: float | str, header: str
) -> None:
    prime_platform.fail("eval_list", 429, retry_after=retry_after)
    response = client.get("/api/v1/evaluations/")
    assert (response.status_code, response.headers["retry-after"]) == (429, header)


def test_wildcard_fault_hits_the_next_request_of_any_route(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.fail("*", 500)
    assert client.get("/api/v1/evaluations/").status_code == 500
    assert client.get("/api/v1/evaluations/").status_code == 200


def test_fail_rejects_unknown_routes(prime_platform: StandInPlatform) -> None:
    with pytest.raises(ValueError):
        prime_platform.fail("eval_creat")
    with pytest.raises(ValueError):
        prime_platform.stall("nope", 1)
    with pytest.raises(ValueError):
        prime_platform.outage(routes=["nope"])


def test_outage_fails_everything_until_recover(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.outage(503, routes=["eval_create"])
    assert _create(client).status_code == 503
    assert client.get("/api/v1/evaluations/").status_code == 200
    prime_platform.outage(502)
    assert client.get("/api/v1/evaluations/").status_code == 502
    prime_platform.recover()
    assert _create(client).status_code == 201
    assert len(prime_platform.evaluations) == 1


def test_stall_holds_requests_until_unstall(
    prime_platform: StandInPlatform, client: httpx.Client
) -> None:
    prime_platform.stall("eval_list", 3600)
    assert _create(client).status_code == 201  # other routes are not held
    held = _Background(lambda: client.get("/api/v1/evaluations/"))
    _wait_until(lambda: len(prime_platform.requests_for("eval_list")) == 1)
    assert prime_platform.requests_for("eval_list")[0].status is None  # still waiting
    prime_platform.unstall()
    held.join()
    assert held.response is not None and held.response.status_code == 200


def test_stop_returns_while_requests_are_stalled_or_delayed() -> None:
    platform = StandInPlatform().start()
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    url = f"{platform.base_url}/api/v1/evaluations/"
    platform.stall("eval_list", 3600)
    platform.fail("eval_get", delay=3600)
    stalled = _Background(lambda: httpx.get(url, headers=headers, timeout=60))
    delayed = _Background(lambda: httpx.get(f"{url}ev-1", headers=headers, timeout=60))
    _wait_until(lambda: len(platform.requests) == 2)
    platform.stop()
    for background in (stalled, delayed):
        background.join()
        assert isinstance(background.error, httpx.TransportError)
    assert all(r.status is None for r in platform.requests)


def test_stop_closes_idle_keep_alive_connections() -> None:
    platform = StandInPlatform(api_key="test-key").start()
    headers = {"Authorization": "Bearer test-key"}
    with httpx.Client(base_url=platform.base_url, headers=headers) as keep_alive:
        assert keep_alive.get("/api/v1/evaluations/").status_code == 200
        platform.stop()
        with pytest.raises(httpx.TransportError):
            keep_alive.get("/api/v1/evaluations/")
    assert len(platform.requests) == 1

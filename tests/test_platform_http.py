"""PlatformClient unit checks over httpx.MockTransport: headers, decoding, error mapping,
retry policy and instrumentation suppression. Wire behaviour against a real server is in
test_platform_wire.py."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest
from opentelemetry import context as otel_context

from prime_runs import errors
from prime_runs._version import __version__
from prime_runs.platform._http import PlatformClient, is_ambiguous, parse_retry_after
from prime_runs.platform.retry import backoff
from prime_runs.settings import Settings

KEY = "pk-http-secret-abcdef0123"
Handler = Callable[[httpx.Request], httpx.Response]


def settings(base_url: str = "http://platform.test") -> Settings:
    return Settings(
        api_key=KEY,
        team_id=None,
        base_url=base_url,
        traces_url="http://traces.test",
        frontend_url="http://app.test",
        mode="online",
    )


class Harness:
    def __init__(self, handler: Handler, base_url: str = "http://platform.test") -> None:
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

        def record(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return handler(request)

        self.client = PlatformClient(
            settings(base_url), transport=httpx.MockTransport(record), sleep=self.sleeps.append
        )


def answers(*responses: httpx.Response | Exception) -> Handler:
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item

    return handler


def test_headers_url_and_compact_body() -> None:
    h = Harness(answers(httpx.Response(200, json={"ok": True})))
    assert h.client.request("POST", "/evaluations/", json={"a": "é", "b": [1]}, idempotent=False)
    request = h.requests[0]
    assert str(request.url) == "http://platform.test/api/v1/evaluations/"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    v = sys.version_info
    assert request.headers["User-Agent"] == (
        f"prime-runs/{__version__} python/{v.major}.{v.minor}.{v.micro}"
    )
    assert request.headers["Content-Type"] == "application/json"
    assert request.content == '{"a":"é","b":[1]}'.encode()
    assert "x-prime-team-id" not in request.headers


def test_get_has_no_content_type_and_sends_params() -> None:
    h = Harness(answers(httpx.Response(200, json={})))
    h.client.request("GET", "/evaluations/", params={"limit": 5}, idempotent=True)
    request = h.requests[0]
    assert "Content-Type" not in request.headers
    assert request.url.params["limit"] == "5"
    assert request.headers["Authorization"] == f"Bearer {KEY}"


def test_prefixed_base_url() -> None:
    h = Harness(answers(httpx.Response(200)), base_url="https://rft.internal:8080/prefix")
    h.client.request("GET", "/x", idempotent=True)
    assert str(h.requests[0].url) == "https://rft.internal:8080/prefix/api/v1/x"


def test_non_finite_numbers_are_refused_before_sending() -> None:
    h = Harness(answers(httpx.Response(200)))
    with pytest.raises(ValueError):
        h.client.request("PUT", "/x", json={"m": float("inf")}, idempotent=True)
    assert h.requests == []


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (httpx.Response(200), {}),
        (httpx.Response(201, json={"a": 1}), {"a": 1}),
        (httpx.Response(200, json=[1, 2]), {"data": [1, 2]}),
    ],
)
def test_success_decoding(response: httpx.Response, expected: dict) -> None:
    assert Harness(answers(response)).client.request("GET", "/x", idempotent=True) == expected


def test_non_json_success_is_an_error_naming_method_path_and_body() -> None:
    h = Harness(answers(httpx.Response(200, text="<html>" + "x" * 500)))
    with pytest.raises(errors.APIError) as info:
        h.client.request("GET", "/evaluations/e1", idempotent=True)
    message = str(info.value)
    assert "GET /api/v1/evaluations/e1" in message
    assert "<html>" in message
    assert len(message) < 300


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, errors.ValidationRejectedError),
        (401, errors.UnauthorizedError),
        (402, errors.PaymentRequiredError),
        (403, errors.ForbiddenError),
        (404, errors.NotFoundError),
        (405, errors.APIError),
        (409, errors.ConflictError),
        (413, errors.ValidationRejectedError),
        (422, errors.ValidationRejectedError),
        (500, errors.APIError),
    ],
)
def test_status_mapping(status: int, cls: type[errors.APIError]) -> None:
    body = {"detail": f"nope {KEY} " + "y" * 400}  # a server echoing the key must not leak it
    h = Harness(answers(httpx.Response(status, json=body)))
    with pytest.raises(errors.APIError) as info:
        h.client.request("PUT", "/evaluations/e1", json={}, idempotent=True)
    error = info.value
    assert type(error) is cls
    assert error.status_code == status
    assert (error.method, error.path) == ("PUT", "/evaluations/e1")
    message = str(error)
    assert f"PUT /api/v1/evaluations/e1 -> {status}: nope" in message
    assert KEY not in message and KEY not in repr(error)
    assert len(h.requests) == 1  # none of these is replayed


def test_error_envelope_code_and_raw_text() -> None:
    h = Harness(
        answers(
            httpx.Response(403, json={"error": {"code": "forbidden", "message": "scope"}}),
            httpx.Response(404, text="plain text"),
        )
    )
    with pytest.raises(errors.ForbiddenError) as info:
        h.client.request("GET", "/x", idempotent=True)
    assert info.value.code == "forbidden"
    assert "scope" in str(info.value)
    with pytest.raises(errors.NotFoundError, match="plain text"):
        h.client.request("GET", "/x", idempotent=True)


def test_429_is_replayed_even_when_not_idempotent() -> None:
    h = Harness(answers(httpx.Response(429), httpx.Response(429), httpx.Response(201, json={})))
    h.client.request("POST", "/evaluations/", json={}, idempotent=False)
    assert len(h.requests) == 3
    assert len(h.sleeps) == 2


@pytest.mark.parametrize("status", [502, 503, 504])
def test_gateway_errors_are_replayed_only_when_idempotent(status: int) -> None:
    h = Harness(answers(httpx.Response(status), httpx.Response(200, json={"ok": 1})))
    with pytest.raises(errors.RetryableAPIError) as info:
        h.client.request("POST", "/evaluations/", json={}, idempotent=False)
    assert info.value.status_code == status
    assert is_ambiguous(info.value)
    assert len(h.requests) == 1 and h.sleeps == []
    assert h.client.request("PUT", "/evaluations/e", json={}, idempotent=True) == {"ok": 1}


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("refused"),
        httpx.ConnectTimeout("slow connect"),
        httpx.PoolTimeout("pool"),
    ],
)
def test_unambiguous_transport_failures_are_replayed_for_every_call(exc: Exception) -> None:
    h = Harness(answers(exc, httpx.Response(201, json={"evaluation_id": "e"})))
    assert h.client.request("POST", "/evaluations/", json={}, idempotent=False) == {
        "evaluation_id": "e"
    }
    assert len(h.requests) == 2


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (httpx.ReadTimeout("slow read"), errors.APITimeoutError),
        (httpx.WriteTimeout("slow write"), errors.APITimeoutError),
        (httpx.ReadError("reset"), errors.TransportError),
        (httpx.WriteError("broken pipe"), errors.TransportError),
        (httpx.RemoteProtocolError("disconnected"), errors.TransportError),
    ],
)
def test_ambiguous_transport_failures(exc: Exception, cls: type[errors.APIError]) -> None:
    h = Harness(answers(exc, httpx.Response(200, json={"ok": 1})))
    with pytest.raises(cls) as info:
        h.client.request("POST", "/evaluations/e/samples", content=b"{}", idempotent=False)
    assert is_ambiguous(info.value)
    assert "POST /api/v1/evaluations/e/samples" in str(info.value)
    assert len(h.requests) == 1
    assert h.client.request("GET", "/evaluations/e", idempotent=True) == {"ok": 1}


def test_connect_timeout_is_a_timeout_but_not_ambiguous() -> None:
    h = Harness(answers(httpx.ConnectTimeout("x")))
    with pytest.raises(errors.APITimeoutError) as info:
        h.client.request("GET", "/x", idempotent=True)
    assert not is_ambiguous(info.value)


def test_five_attempts_then_the_last_error_with_backoff_between() -> None:
    h = Harness(answers(httpx.Response(503, json={"detail": "busy"})))
    with pytest.raises(errors.RetryableAPIError, match="busy"):
        h.client.request("GET", "/x", idempotent=True)
    assert len(h.requests) == 5
    assert len(h.sleeps) == 4  # no wait after the final attempt
    for n, wait in enumerate(h.sleeps):
        assert min(30, 2**n) * 0.5 <= wait <= min(30, 2**n) * 1.5


def test_a_retry_sequence_is_announced_once_when_it_starts(caplog) -> None:
    """The ~15 s of retries is never silent: one warning line when the first retry starts
    (what failed, how many more attempts, about how long), quiet until a request succeeds."""
    h = Harness(answers(httpx.Response(503, text=f"busy {KEY}")))
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        with pytest.raises(errors.RetryableAPIError):
            h.client.request("POST", "/environmentshub/resolve", json={}, idempotent=True)
        with pytest.raises(errors.RetryableAPIError):
            h.client.request("GET", "/x", idempotent=True)  # same outage: no second line
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "POST /api/v1/environmentshub/resolve -> 503" in lines[0]
    assert "retrying up to 4 more times over about 15 s before giving up" in lines[0]
    assert KEY not in caplog.text
    assert len(h.requests) == 10  # the policy itself is unchanged


def test_the_retry_line_comes_again_after_a_success(caplog) -> None:
    h = Harness(
        answers(
            httpx.Response(429, headers={"Retry-After": "2"}),
            httpx.Response(200, json={}),
            httpx.Response(200, json={}),
            httpx.Response(502),
            httpx.Response(200, json={}),
        )
    )
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        h.client.request("GET", "/a", idempotent=True)
        h.client.request("GET", "/b", idempotent=True)  # first attempt succeeds: no line
        h.client.request("GET", "/c", idempotent=True)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "GET /api/v1/a -> 429" in lines[0] and "about 16 s" in lines[0]  # 2 + 2 + 4 + 8
    assert "GET /api/v1/c -> 502" in lines[1]


def test_retry_after_seconds_are_honoured_and_capped() -> None:
    h = Harness(
        answers(
            httpx.Response(429, headers={"Retry-After": "7.5"}),
            httpx.Response(429, headers={"Retry-After": "3600"}),
            httpx.Response(200),
        )
    )
    h.client.request("GET", "/x", idempotent=True)
    assert h.sleeps == [7.5, 60.0]


def test_retry_after_http_date() -> None:
    now = datetime(2026, 8, 19, 12, 0, 0, tzinfo=timezone.utc)
    future = format_datetime(now + timedelta(seconds=20), usegmt=True)
    assert parse_retry_after(future, now=now) == pytest.approx(20.0)
    past = format_datetime(now - timedelta(seconds=20), usegmt=True)
    assert parse_retry_after(past, now=now) == 0.0
    assert parse_retry_after("Wed, 19 Aug 2026 12:00:10 -0000", now=now) == pytest.approx(10.0)
    far = format_datetime(now + timedelta(hours=2), usegmt=True)
    assert parse_retry_after(far, now=now) == 60.0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


def test_unparseable_retry_after_falls_back_to_backoff() -> None:
    h = Harness(
        answers(httpx.Response(429, headers={"Retry-After": "whenever"}), httpx.Response(200))
    )
    h.client.request("GET", "/x", idempotent=True)
    assert 0.5 <= h.sleeps[0] <= 1.5


def test_backoff_bounds() -> None:
    for n in range(8):
        for _ in range(20):
            assert min(30, 2**n) * 0.5 <= backoff(n) <= min(30, 2**n) * 1.5
    assert max(backoff(10) for _ in range(200)) <= 45.0


def test_deadline_stops_retrying_instead_of_waiting_past_it() -> None:
    h = Harness(answers(httpx.Response(429, headers={"Retry-After": "30"})))
    with pytest.raises(errors.RetryableAPIError):
        h.client.request("GET", "/x", idempotent=True, deadline=time.monotonic() + 5)
    assert len(h.requests) == 1
    assert h.sleeps == []


def test_deadline_caps_each_attempt_timeout() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200)

    h = Harness(handler)
    h.client.request("GET", "/x", idempotent=True, deadline=time.monotonic() + 3)
    h.client.request("POST", "/y", content=b"{}", idempotent=False, timeout=300.0)
    assert seen[0]["read"] <= 3.0
    assert seen[1]["read"] == 300.0
    assert seen[1]["connect"] == 10.0


def test_requests_run_with_instrumentation_suppressed() -> None:
    seen: list[tuple[object, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(
            (
                otel_context.get_value("suppress_instrumentation"),
                otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY),
            )
        )
        return httpx.Response(200)

    h = Harness(handler)
    h.client.request("GET", "/x", idempotent=True)
    assert seen == [(True, True)]
    assert otel_context.get_value("suppress_instrumentation") is None


def test_the_key_never_reaches_logs_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    h = Harness(
        answers(httpx.ConnectError(f"refused {KEY}"), httpx.Response(503), httpx.Response(200))
    )
    h.client.request("GET", "/x", idempotent=True)
    assert caplog.records  # the retries were logged
    assert KEY not in caplog.text
    assert KEY not in repr(h.client)


def test_a_client_needs_a_key() -> None:
    s = Settings(None, None, "http://p", "http://t", "http://a", "offline")
    with pytest.raises(errors.ConfigurationError, match="API key"):
        PlatformClient(s)


def test_error_message_json_detail_list() -> None:
    detail = [{"loc": ["body", "status"], "msg": "extra fields not permitted"}]
    h = Harness(answers(httpx.Response(422, json={"detail": detail})))
    with pytest.raises(errors.ValidationRejectedError) as info:
        h.client.request("PUT", "/evaluations/e", json={"status": "FAILED"}, idempotent=True)
    assert "extra fields not permitted" in str(info.value)
    assert json.loads(str(info.value).split(": ", 1)[1])[0]["loc"] == ["body", "status"]

"""Authenticated client for the Prime platform API with a per-call retry policy.

Requests go to ``{base_url}/api/v1{path}``. A failure is *ambiguous* when the server
may already have processed the request (502/503/504, read or write timeouts and
errors, a stream broken after the request went out); replaying one is only safe
for calls the caller declares ``idempotent``. Unambiguous failures (the connection
never opened, 429) are replayed for every call. Callers that must not replay (create,
finalize, sample appends) reconcile by reading back instead; :func:`is_ambiguous`
tells them which errors need that. How many attempts and how long between them is the
one policy of ``platform/retry``.

Every request runs with OpenTelemetry instrumentation suppressed, so an instrumented
httpx in the user's process never traces the SDK's own traffic.
"""

from __future__ import annotations

import json as _json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

import prime_runs.platform._tls as _tls
import prime_runs.platform.retry as retry
from prime_runs._otel_private import suppress_instrumentation
from prime_runs._records.jsonio import (
    encode_json,  # refuses non-finite numbers locally, not as a 400
)
from prime_runs._version import __version__
from prime_runs.errors import (
    APIError,
    APITimeoutError,
    ConfigurationError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PaymentRequiredError,
    RetryableAPIError,
    TransportError,
    UnauthorizedError,
    ValidationRejectedError,
)
from prime_runs.platform._bodies import Body
from prime_runs.settings import Settings

logger = logging.getLogger("prime_runs")

API_PATH = "/api/v1"
DEFAULT_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0
Deadline = retry.Budget  # a time.monotonic() value, or a deadline its owner may cut


UNAMBIGUOUS_STATUS = frozenset({429})
AMBIGUOUS_STATUS = frozenset({502, 503, 504})

# Failures before the request could reach the server: connection setup, the pool, the
# proxy, local protocol errors. Nothing was sent; any other transport failure (a read or
# write timeout or error, a closed or garbled reply) may have come after the server acted.
UNAMBIGUOUS_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.ProxyError,
    httpx.UnsupportedProtocol,
    httpx.LocalProtocolError,
)


def user_agent() -> str:
    v = sys.version_info
    return f"prime-runs/{__version__} python/{v.major}.{v.minor}.{v.micro}"


def is_ambiguous(error: BaseException) -> bool:
    """Whether a failure may have happened after the server processed the request."""
    if isinstance(error, RetryableAPIError):
        return error.status_code in AMBIGUOUS_STATUS
    if isinstance(error, TransportError):
        cause = error.__cause__
        return not isinstance(cause, UNAMBIGUOUS_TRANSPORT_ERRORS)
    return False


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Retry-After as seconds (delta-seconds or HTTP-date), capped at 60 s; ``None`` if
    absent or unparseable. A past date is 0; a date without a zone is UTC."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            target = parsedate_to_datetime(value)
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
        if target is None:  # pragma: no cover - older Pythons return None
            return None
        if target.tzinfo is None:
            target = target.replace(tzinfo=timezone.utc)
        seconds = (target - (now or datetime.now(timezone.utc))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(0.0, seconds), retry.RETRY_AFTER_CAP)


def _error_text(response: httpx.Response) -> tuple[str | None, str]:
    """(code, message): the traces envelope, then FastAPI's ``detail``, then the raw body."""
    try:
        body = response.json()
    except ValueError:
        return None, response.text
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            return (code if isinstance(code, str) else None), str(error.get("message") or "")
        if body.get("detail") is not None:
            detail = body["detail"]
            text = detail if isinstance(detail, str) else _json.dumps(detail)
            return None, text
    return None, response.text


_STATUS_ERRORS: dict[int, type[APIError]] = {
    400: ValidationRejectedError,
    401: UnauthorizedError,
    402: PaymentRequiredError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: ValidationRejectedError,
    422: ValidationRejectedError,
}


class PlatformClient:
    """One connection pool to the platform API. Safe to share between threads."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int | None = None,
    ) -> None:
        if not settings.api_key:
            raise ConfigurationError(
                "the platform API needs an API key: pass api_key=, set PRIME_API_KEY, "
                "or run `prime login`"
            )
        self.settings = settings
        self.api_root = f"{settings.base_url}{API_PATH}"
        self.max_attempts = max_attempts  # None: the policy's (``retry.ATTEMPTS``)
        self._api_key = settings.api_key
        self._transport = transport
        self._sleep = sleep
        self._headers = {
            "Authorization": f"Bearer {settings.api_key}",
            "User-Agent": user_agent(),
        }
        self._pid = os.getpid()
        self._client = self._new_client()
        self._announced = False  # a retry warning was logged and no request succeeded since

    def __repr__(self) -> str:
        return f"PlatformClient(api_root={self.api_root!r})"

    def _new_client(self) -> httpx.Client:
        return httpx.Client(
            transport=self._transport,
            follow_redirects=True,
            timeout=httpx.Timeout(DEFAULT_TIMEOUT, connect=CONNECT_TIMEOUT),
            verify=_tls.context(),  # built once, not per client
        )

    def _pool(self) -> httpx.Client:
        # A forked child must not share the parent's sockets: drop them (never close,
        # that would disturb the parent) and open a fresh pool.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._client = self._new_client()
        return self._client

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | Body | None = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool,
        timeout: float = DEFAULT_TIMEOUT,
        deadline: Deadline | None = None,
        max_attempts: int | None = None,
        before_attempt: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send one call, replaying it per the policy in the module docstring.

        ``json`` is encoded compactly (``content`` is sent as is, already JSON; a
        :class:`~prime_runs.platform._bodies.Body` slice by slice, never joined). Returns
        the response object (``{}`` for an empty body, ``{"data": v}`` for a non-object).
        ``deadline`` (a ``time.monotonic()`` value, or a :class:`Cuttable` read afresh at
        each attempt): no retry wait runs past it and each attempt's timeout is cut to the
        time left (at least 1 s); the first attempt is always made. Raises an
        :class:`~prime_runs.errors.APIError` subclass. ``before_attempt`` is called before
        each attempt is sent (a sink notes when its request may still be stored).
        """
        method = method.upper()
        body = content if content is not None else (None if json is None else encode_json(json))
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        if isinstance(body, Body):
            # Declared, so httpx frames the parts by length rather than sending them chunked.
            headers["Content-Length"] = str(len(body))
        url = f"{self.api_root}{path}"

        def retryable(error: BaseException) -> bool:
            if not isinstance(error, (RetryableAPIError, TransportError)):
                return False
            return idempotent or not is_ambiguous(error)

        def send(timeout: float) -> dict[str, Any]:
            if before_attempt is not None:
                before_attempt()
            return self._send(method, path, url, body, headers, params, timeout)

        with suppress_instrumentation():
            result = retry.retrying(
                send,
                timeout=timeout,
                deadline=deadline,
                retryable=retryable,
                attempts=max_attempts or self.max_attempts,
                on_retry=self._announce_retry,
                sleep=self._sleep,
            )
        self._announced = False
        return result

    def _announce_retry(
        self,
        error: BaseException,
        attempt: int,
        attempts: int,
        wait: float,
        time_left: float | None,
    ) -> None:
        """One warning when a retry sequence starts, so a wait of ~15 s is never silent.
        Quiet (debug only) until a request succeeds again, so an outage is one line."""
        logger.debug("prime-runs: %s; retrying in %.1fs", error, wait)
        if self._announced:
            return
        self._announced = True
        left = attempts - 1 - attempt
        first = getattr(error, "retry_after", None)
        nominal = [min(retry.BACKOFF_CAP, 2.0**n) for n in range(attempt, attempts - 1)]
        expected = sum(nominal) if first is None else first + sum(nominal[1:])
        if time_left is not None:
            expected = max(0.0, min(expected, time_left))
        logger.warning(
            "prime-runs: %s; retrying up to %d more time%s over about %.0f s before giving up",
            error,  # names the call and the failure; never the key (redacted)
            left,
            "" if left == 1 else "s",
            expected,
        )

    def _send(
        self,
        method: str,
        path: str,
        url: str,
        body: bytes | Body | None,
        headers: dict[str, str],
        params: Mapping[str, Any] | None,
        timeout: float,
    ) -> dict[str, Any]:
        where = f"{method} {API_PATH}{path}"
        try:
            response = self._pool().request(
                method,
                url,
                # httpx's stubs say bytes; its transports write any buffer, and a Body's
                # memoryview slices spare a copy of each part.
                content=body,  # type: ignore[arg-type]
                headers=headers,
                params=dict(params) if params else None,
                timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            )
        except httpx.TimeoutException as exc:
            raise APITimeoutError(
                self._redact(f"{where} timed out ({type(exc).__name__})"), method=method, path=path
            ) from exc
        except httpx.TransportError as exc:
            raise TransportError(
                self._redact(f"{where} failed: {type(exc).__name__}: {exc}"),
                method=method,
                path=path,
            ) from exc
        return self._decode(response, where, method, path)

    def _decode(
        self, response: httpx.Response, where: str, method: str, path: str
    ) -> dict[str, Any]:
        status = response.status_code
        if 200 <= status < 300:
            if not response.content:
                return {}
            try:
                payload = response.json()
            except ValueError:
                raise APIError(
                    self._redact(
                        f"{where} returned {status} with a non-JSON body: {response.text[:200]!r}"
                    ),
                    status_code=status,
                    method=method,
                    path=path,
                ) from None
            return payload if isinstance(payload, dict) else {"data": payload}
        code, text = _error_text(response)
        message = self._redact(f"{where} -> {status}: {text[:200]}")
        kw: dict[str, Any] = {"status_code": status, "code": code, "method": method, "path": path}
        if status in UNAMBIGUOUS_STATUS or status in AMBIGUOUS_STATUS:
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            raise RetryableAPIError(message, retry_after=retry_after, **kw)
        raise _STATUS_ERRORS.get(status, APIError)(message, **kw)

    def close(self) -> None:
        """Release the connection pool (only in the process that opened it)."""
        if os.getpid() == self._pid:
            self._client.close()

    def __enter__(self) -> PlatformClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "AMBIGUOUS_STATUS",
    "API_PATH",
    "PlatformClient",
    "encode_json",
    "is_ambiguous",
    "parse_retry_after",
    "suppress_instrumentation",
    "user_agent",
]

"""The Prime Traces upload request, and what prime-traces gives it: its error classes.

The request is the project's own (contract §8: a multipart POST, the traces part
gzip-compressed from the lines' parts, never joined). prime-traces gives it its public
pieces only: the error classes and ``raise_for_response``, which maps a failed response to
them as its own client does. It is imported at the first failure, not before: importing
the package loads its async client and pydantic models (about 270 ms), which a run whose
uploads succeed never needs.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import httpx

import prime_runs.platform._bodies as _bodies
import prime_runs.platform._tls as _tls

# Either ISA-L's modules or the standard library's: the same functions.
_gzip: ModuleType
_zlib: ModuleType
try:  # ISA-L's gzip: 6x faster than zlib at level 1, and smaller output (docs/benchmarks.md)
    from isal import igzip as _gzip
    from isal import isal_zlib as _zlib
except ImportError:  # a platform without an isal wheel: the standard library's, same format
    _gzip = gzip
    _zlib = zlib

_GZIP_WBITS = 31  # a gzip member (header and trailer), not a zlib stream
EPISODE_FORMAT = "episode"  # X-Prime-Line-Format; a trace line sends no header (§8.5)


def _errors() -> ModuleType:
    """prime-traces' error classes (the package loads on the first call)."""
    from prime_traces import exceptions

    return exceptions


def is_transient(exc: BaseException) -> bool:
    """A failure that the same bytes, sent again, may get past: 429/502/503/504, transport."""
    errors = _errors()
    return isinstance(exc, (errors.RetryableAPIError, errors.TransportError))


def as_failure(exc: BaseException) -> BaseException:
    """``exc`` as the upload's failure: a prime-traces error as it is; anything else (a
    local fault) a transport error, so it counts as transient."""
    errors = _errors()
    if isinstance(exc, errors.APIError):
        return exc
    return errors.TransportError(f"{type(exc).__name__}: {exc}")


class UploadClient:
    """One connection pool to Prime Traces and the one request the SDK sends there."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str,
        team_id: str | None,
        user_agent: str,
        transport: httpx.BaseTransport | None,
        gzip_level: int,
        connect_timeout: float,
    ) -> None:
        # URLs are often written with the API prefix already on them.
        self.url = base_url.rstrip("/").removesuffix("/api/v1") + "/api/v1/traces"
        self._keyed = bool(api_key)
        headers = {"User-Agent": user_agent}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if team_id:
            headers["X-Prime-Team-ID"] = team_id
        self.client = httpx.Client(
            headers=headers, follow_redirects=True, transport=transport, verify=_tls.context()
        )
        self.gzip_level = gzip_level
        self.connect_timeout = connect_timeout

    def __repr__(self) -> str:
        return f"UploadClient({self.url!r})"  # never the key

    def upload_batch(
        self,
        body: bytes | Sequence[bytes | memoryview],
        idempotency_key: str,
        *,
        line_format: str | None = None,
        context: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> dict[str, Any]:
        """POST one batch (``body``: its lines, or their parts); the receipt (§8.7), or
        prime-traces' typed error for the response or the transport."""
        if not self._keyed:
            raise _errors().APIError(
                "No API key configured. Set PRIME_API_KEY environment variable."
            )
        compressed = compress_body(body, self.gzip_level)
        metadata: dict[str, Any] = {"schema_version": 1}
        if context:
            metadata["context"] = context
        # Any: httpx types a part as a union a mixed literal does not infer to
        files: dict[str, Any] = {
            "metadata": (None, json.dumps(metadata).encode(), "application/json"),
            "traces": (
                "traces.jsonl",
                compressed,
                "application/x-ndjson",
                {"Content-Encoding": "gzip"},
            ),
        }
        headers = {"Idempotency-Key": idempotency_key}
        if line_format == EPISODE_FORMAT:
            headers["X-Prime-Line-Format"] = EPISODE_FORMAT
        try:
            response = self.client.post(
                self.url,
                headers=headers,
                files=files,
                timeout=httpx.Timeout(timeout, connect=min(self.connect_timeout, timeout)),
            )
        except httpx.TimeoutException as exc:
            raise _errors().APITimeoutError(f"Request timed out: {exc}") from exc
        except httpx.RequestError as exc:
            raise _errors().TransportError(
                f"Request failed: {type(exc).__name__} at POST {self.url}: {exc}"
            ) from exc
        finally:
            _bodies.sent(len(compressed))  # what httpx held is the gzip member
        if not response.is_success:
            from prime_traces.core import raise_for_response

            raise_for_response(response)
        receipt = response.json()
        if not isinstance(receipt, dict):
            raise _errors().APIError("API response was not a dictionary")
        return receipt

    def close(self) -> None:
        self.client.close()


def compress_body(body: bytes | Sequence[bytes | memoryview], level: int) -> bytes:
    """One gzip member with mtime 0, so a retry sends identical bytes (contract §8).
    ``body`` may be its parts (the lines and their newlines): the uncompressed body is then
    never joined, which spares a copy of a batch of megabytes."""
    if isinstance(body, bytes):
        return _gzip.compress(body, compresslevel=level, mtime=0)
    compressor = _zlib.compressobj(level, _zlib.DEFLATED, _GZIP_WBITS)
    # In the pieces a request body is sent in: small lines joined a megabyte at a time (a
    # compress call per line would cost more than the join), long ones sliced.
    out = [compressor.compress(piece) for piece in _bodies.Body(list(body))]
    out.append(compressor.flush())
    return b"".join(out)


def line_format(kind: str) -> str | None:
    """The ``X-Prime-Line-Format`` of a batch of ``kind`` records (None: a trace batch)."""
    return EPISODE_FORMAT if kind == "episode" else None


def is_rejection(exc: BaseException) -> bool:
    """Refused for what the request carried: the same bytes can never succeed."""
    errors = _errors()
    if isinstance(exc, (errors.ValidationRejectedError, errors.LineFormatConflictError)):
        return True
    # A gateway's 413/422 says the same about the body, without a service code.
    return isinstance(exc, errors.APIError) and getattr(exc, "status_code", None) in (413, 422)


def is_service_off(exc: BaseException) -> bool:
    """Prime Traces is not enabled for the account (a quiet retirement)."""
    forbidden = _errors().ForbiddenError
    return isinstance(exc, forbidden) and getattr(exc, "code", None) == "service_not_enabled"


__all__ = [
    "UploadClient",
    "as_failure",
    "compress_body",
    "is_rejection",
    "is_service_off",
    "is_transient",
    "line_format",
]

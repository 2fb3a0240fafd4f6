"""Everything that touches prime-traces, imported only when a traces sink is built.

prime-traces imports its pydantic models on import (about half of ``import prime_runs``
before this module existed), so offline runs, the CLI and the pytest plugin never load
it. ``UploadClient`` reuses prime-traces' upload helpers, which are private: ``PRIVATE_API``
lists the ones used and the signatures tested against (``tests/test_traces_private_api.py``
fails naming the method if a prime-traces release changes one).
"""

from __future__ import annotations

import gzip
import inspect
import zlib
from collections.abc import Sequence
from typing import Any

try:  # ISA-L's gzip: 6x faster than zlib at level 1, and smaller output (docs/benchmarks.md)
    from isal import igzip as _gzip
    from isal import isal_zlib as _zlib
except ImportError:  # a platform without an isal wheel: the standard library's, same format
    _gzip = gzip  # type: ignore[no-redef]
    _zlib = zlib  # type: ignore[no-redef]

import httpx
from prime_traces import LineFormat, TracesAPIClient
from prime_traces import exceptions as pt_errors

import prime_runs.platform._bodies as _bodies

_GZIP_WBITS = 31  # a gzip member (header and trailer), not a zlib stream

#: Private members of ``TracesAPIClient`` that ``UploadClient.upload_batch`` calls, with the
#: parameters they take in the prime-traces versions pyproject.toml allows.
PRIVATE_API: dict[str, str] = {
    "_check_auth": "(self)",
    "_url": "(self, endpoint)",
    "_multipart_files": "(self, body, *, schema_version, context, compressed)",
    "_upload_headers": "(idempotency_key, line_format)",
    "_upload_result": "(response)",
    "_wrap_transport_errors": "(self, exc)",
}


def parameters(function: Any) -> str:
    """A callable's parameter shape, without annotations or defaults: ``(self, a, *, b)``."""
    shown: list[str] = []
    for param in inspect.signature(function).parameters.values():
        if param.kind is param.KEYWORD_ONLY and not any(p.startswith("*") for p in shown):
            shown.append("*")
        prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        shown.append(prefix + param.name)
    return f"({', '.join(shown)})"


def private_api_problems(client_class: type = TracesAPIClient) -> list[str]:
    """What differs between ``PRIVATE_API`` and ``client_class``, one message per method."""
    problems = []
    for name, expected in PRIVATE_API.items():
        member = getattr(client_class, name, None)
        if not callable(member):
            problems.append(f"TracesAPIClient.{name} is gone (prime_runs calls it {expected})")
            continue
        found = parameters(member)
        if found != expected:
            problems.append(
                f"TracesAPIClient.{name} now takes {found}; prime_runs calls {expected}"
            )
    return problems


TRANSIENT: tuple[type[BaseException], ...] = (pt_errors.RetryableAPIError, pt_errors.TransportError)
APIError = pt_errors.APIError
TransportError = pt_errors.TransportError


class UploadClient(TracesAPIClient):
    """prime-traces' client with a chosen gzip level and a per-call timeout."""

    gzip_level = 1
    connect_timeout = 10.0

    def upload_batch(  # type: ignore[override]
        self,
        body: bytes | Sequence[bytes | memoryview],
        idempotency_key: str,
        *,
        line_format: LineFormat = LineFormat.TRACE,
        schema_version: int = 1,
        context: dict[str, str] | None = None,
        compress: bool = True,
        timeout: float = 120.0,
    ) -> dict[str, Any]:
        self._check_auth()
        level = self.gzip_level
        if not isinstance(body, bytes) and not compress:
            body = b"".join(body)
        compressed = compress_body(body, level) if compress else None
        # Compressed, the helper sends the gzip member alone: the lines may stay unjoined
        # (tests/test_traces_private_api.py holds prime-traces to that).
        files = self._multipart_files(
            body, schema_version=schema_version, context=context, compressed=compressed
        )
        try:
            response = self.client.post(
                self._url("/traces"),
                headers=self._upload_headers(idempotency_key, line_format),
                files=files,
                timeout=httpx.Timeout(timeout, connect=min(self.connect_timeout, timeout)),
            )
        except Exception as exc:
            raise self._wrap_transport_errors(exc) from exc
        finally:
            # What httpx held is the body sent: the gzip member, or the joined lines.
            _bodies.sent(len(compressed if compressed is not None else body))
        return self._upload_result(response)


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


def new_client(
    *,
    api_key: str,
    base_url: str,
    team_id: str | None,
    user_agent: str,
    transport: httpx.BaseTransport | None,
    gzip_level: int,
    connect_timeout: float,
) -> UploadClient:
    client = UploadClient(
        api_key=api_key,
        base_url=base_url,
        team_id=team_id,
        user_agent=user_agent,
        transport=transport,
    )
    client.gzip_level = gzip_level
    client.connect_timeout = connect_timeout
    return client


def line_format(kind: str) -> LineFormat:
    return LineFormat.EPISODE if kind == "episode" else LineFormat.TRACE


def is_rejection(exc: BaseException) -> bool:
    """Refused for what the request carried: the same bytes can never succeed."""
    if isinstance(exc, (pt_errors.ValidationRejectedError, pt_errors.LineFormatConflictError)):
        return True
    # A gateway's 413/422 says the same about the body, without a service code.
    return isinstance(exc, pt_errors.APIError) and getattr(exc, "status_code", None) in (413, 422)


def is_service_off(exc: BaseException) -> bool:
    """Prime Traces is not enabled for the account (a quiet retirement)."""
    return isinstance(exc, pt_errors.ForbiddenError) and exc.code == "service_not_enabled"


__all__ = [
    "PRIVATE_API",
    "TRANSIENT",
    "APIError",
    "TransportError",
    "UploadClient",
    "compress_body",
    "is_rejection",
    "is_service_off",
    "line_format",
    "new_client",
    "parameters",
    "private_api_problems",
]

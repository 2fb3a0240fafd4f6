"""The Prime Traces sink: stamped records uploaded as content-addressed JSONL batches.

Uploads go through prime-traces' client (multipart, Idempotency-Key, line
format header, error mapping). We build the batches ourselves from the bytes
encoded at log time, retry within the caller's deadline, and split a batch
rejected for one line's sake until only the bad record is left out.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import time
from typing import Any

import prime_traces
from prime_traces import LineFormat, TracesAPIClient
from prime_traces import exceptions as pt_errors
from prime_traces.core.client import retry_delay

from ..platform._http import suppress_instrumentation
from ._base import Item, Outcome

logger = logging.getLogger("prime_runs")

TARGET_BATCH_BYTES = 30 * 1024 * 1024  # keeps a request under the transport's 32 MiB cap
MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_ATTEMPTS = 5
# Gzip is transport-only (the digest covers the uncompressed bytes). Level 1 costs
# a fraction of the default level's CPU for JSON and still shrinks it several-fold.
GZIP_LEVEL = 1


class _Client(TracesAPIClient):
    """prime-traces' client with a cheaper gzip level."""

    def upload_batch(  # type: ignore[override]
        self,
        body: bytes,
        idempotency_key: str,
        *,
        line_format: LineFormat = LineFormat.TRACE,
        schema_version: int = 1,
        context: dict[str, str] | None = None,
        compress: bool = True,
    ) -> dict[str, Any]:
        self._check_auth()
        compressed = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0) if compress else None
        files = self._multipart_files(
            body, schema_version=schema_version, context=context, compressed=compressed
        )
        try:
            response = self.client.post(
                self._url("/traces"),
                headers=self._upload_headers(idempotency_key, line_format),
                files=files,
            )
        except Exception as exc:
            raise self._wrap_transport_errors(exc) from exc
        return self._upload_result(response)


_REJECTIONS = (pt_errors.ValidationRejectedError, pt_errors.LineFormatConflictError)
_PERMANENT = (
    pt_errors.UnauthorizedError,
    pt_errors.PaymentRequiredError,
    pt_errors.ForbiddenError,
    pt_errors.NotFoundError,
)


def _reason(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    status = getattr(exc, "status_code", None)
    head = f"HTTP {status}" if status else type(exc).__name__
    return f"{head}{f' {code}' if code else ''}: {exc}"


class TracesSink:
    """Uploads episode and trace lines to Prime Traces for one run."""

    name = "traces"

    def __init__(
        self,
        *,
        api_key: str,
        traces_url: str,
        team_id: str | None,
        context: dict[str, str],
        sleep: Any = time.sleep,
    ) -> None:
        self._api_key = api_key
        self._url = traces_url
        self._team_id = team_id
        self._context = context
        self._sleep = sleep
        self._client: _Client | None = None
        self.receipts = 0

    def __repr__(self) -> str:
        return f"TracesSink(url={self._url!r})"

    def _api(self) -> _Client:
        if self._client is None:
            self._client = _Client(
                api_key=self._api_key,
                base_url=self._url,
                team_id=self._team_id,
                user_agent=f"prime-runs/{prime_traces.__version__} via prime-traces",
            )
        return self._client

    # -- export --------------------------------------------------------------------

    def export(self, items: list[Item], deadline: float) -> Outcome:
        outcome = Outcome()
        sendable: list[Item] = []
        for item in items:
            if item.problem is not None:
                outcome.rejected.append((item, item.problem))
            elif len(item.data) > MAX_LINE_BYTES:
                outcome.rejected.append((item, "trace_too_large: the line exceeds 64 MiB"))
            else:
                sendable.append(item)
        batches = _batches(sendable)
        for n, batch in enumerate(batches):
            if self._send(batch, deadline, outcome):
                for later in batches[n + 1 :]:
                    outcome.retry.extend(later)
                break
        return outcome

    def _send(self, batch: list[Item], deadline: float, outcome: Outcome) -> bool:
        """Send one batch (splitting on rejection). True when the sink must stop this round."""
        body = b"".join(i.data + b"\n" for i in batch)
        key = "sha256:" + hashlib.sha256(body).hexdigest()
        fmt = LineFormat.EPISODE if batch[0].kind == "episode" else LineFormat.TRACE
        attempt = 0
        while True:
            try:
                with suppress_instrumentation():
                    self._api().upload_batch(body, key, line_format=fmt, context=self._context)
            except _REJECTIONS as exc:
                if len(batch) == 1:
                    outcome.rejected.append((batch[0], _reason(exc)))
                    return False
                half = len(batch) // 2
                return self._send(batch[:half], deadline, outcome) or self._send(
                    batch[half:], deadline, outcome
                )
            except pt_errors.ForbiddenError as exc:
                outcome.retire = _reason(exc)
                outcome.quiet = exc.code == "service_not_enabled" and self.receipts == 0
                outcome.retry.extend(batch)
                return True
            except _PERMANENT as exc:
                outcome.retire = _reason(exc)
                outcome.retry.extend(batch)
                return True
            except (pt_errors.RetryableAPIError, pt_errors.TransportError) as exc:
                # Content-addressed: replaying the same bytes is always safe.
                attempt += 1
                wait = retry_delay(exc, attempt - 1)
                if attempt >= MAX_ATTEMPTS or time.monotonic() + wait >= deadline:
                    outcome.retry.extend(batch)
                    outcome.retry_reason = _reason(exc)
                    outcome.retry_after = getattr(exc, "retry_after", None)
                    return True
                self._sleep(wait)
                continue
            except pt_errors.APIError as exc:
                outcome.retire = _reason(exc)
                outcome.retry.extend(batch)
                return True
            self.receipts += 1
            outcome.acked.extend(batch)
            return False

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def after_fork(self) -> None:
        self._client = None  # the parent's pool; never closed from the child


def _batches(items: list[Item]) -> list[list[Item]]:
    batches: list[list[Item]] = []
    current: list[Item] = []
    size = 0
    for item in items:
        line = len(item.data) + 1
        if current and (size + line > TARGET_BATCH_BYTES or current[0].kind != item.kind):
            batches.append(current)
            current, size = [], 0
        current.append(item)
        size += line
    if current:
        batches.append(current)
    return batches

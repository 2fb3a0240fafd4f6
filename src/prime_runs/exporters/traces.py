"""The Prime Traces sink: stamped records uploaded as content-addressed JSONL batches.

The request is ``platform/_traces``' (multipart, Idempotency-Key, line format
header; prime-traces' public error mapping), imported when a sink is built
(prime-traces loads pydantic models; offline runs never need them). We build the
batches from the bytes encoded at log time, retry the same bytes within the caller's
deadline, and split a batch rejected for one line's sake until only the bad record is
left out (contract §8).
"""

from __future__ import annotations

import hashlib
import logging
import operator
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import httpx

import prime_runs.platform.retry as retry
from prime_runs._envnumbers import inflight_window
from prime_runs._otel_private import suppress_instrumentation
from prime_runs._records.item import Deadline, Item, Outcome, as_deadline, record_keys
from prime_runs.platform._http import user_agent

if TYPE_CHECKING:
    import prime_runs.platform._traces as _traces_client
    from prime_runs._journal.batches import Notebook

logger = logging.getLogger("prime_runs")

SINK_NAME = "traces"
TARGET_BATCH_BYTES = 30 * 1024 * 1024  # keeps a request under the transport's 32 MiB cap
MAX_BATCH_LINES = 1_000_000
MAX_LINE_BYTES = 64 * 1024 * 1024
REQUEST_TIMEOUT = 120.0  # per attempt (contract §2.3); attempts and waits: platform/retry
CONNECT_TIMEOUT = 10.0
# Extra requests one export may spend halving rejected batches. One bad line in 2,000
# costs about 22; a service that refuses every line (a skewed clock) must not cost thousands.
SPLIT_BUDGET = 64
# Gzip is transport-only (the digest covers the uncompressed bytes). Level 1 costs
# a fraction of the default level's CPU for JSON and still shrinks it several-fold.
GZIP_LEVEL = 1

# 400 codes about the request as a whole (our framing, not a record): halving the
# batch cannot fix them, so the batch is rejected without splitting.
_REQUEST_LEVEL_CODES = frozenset(
    {"invalid_metadata", "unsupported_schema_version", "digest_mismatch", "invalid_idempotency_key"}
)


def _log_retry(
    error: BaseException, attempt: int, attempts: int, wait: float, left: float | None
) -> None:
    logger.debug("prime-runs: traces upload failed (%s); retrying in %.1fs", _reason(error), wait)


def _reason(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    status = getattr(exc, "status_code", None)
    head = f"HTTP {status}" if status else type(exc).__name__
    return f"{head}{f' {code}' if code else ''}: {exc}"


class TracesSink:
    """Uploads episode and trace lines to Prime Traces for one run, retrying a request
    under the one policy (``platform/retry``) within the export's deadline."""

    name = SINK_NAME

    def __init__(
        self,
        *,
        api_key: str,
        traces_url: str,
        team_id: str | None,
        context: dict[str, str],
        max_attempts: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._api_key = api_key
        self._url = traces_url
        self._team_id = team_id
        self._context = context
        self._max_attempts = max_attempts
        self._transport = transport
        # prime-traces itself loads only at an upload's first failure (``_traces``).
        import prime_runs.platform._traces as _traces_client

        self._pt = _traces_client
        self._client: _traces_client.UploadClient | None = None
        # The batch whose last attempt failed transiently: it may have been stored, so it
        # is resent as exactly the same bytes (same key, a replayed receipt), never merged
        # with records queued since.
        self._unsettled: list[Item] | None = None
        self.receipts = 0
        self._notes: Notebook | None = None

    def keep_notes(self, notes: Notebook) -> None:
        """Note each batch in the run's archive before it is sent (``_journal/batches``):
        its records and the key of its exact bytes, so whoever delivers them next resends
        that batch and no other."""
        self._notes = notes

    def __repr__(self) -> str:
        return f"TracesSink(url={self._url!r})"

    def _api(self) -> _traces_client.UploadClient:
        if self._client is None:
            self._client = self._pt.UploadClient(
                api_key=self._api_key,
                base_url=self._url,
                team_id=self._team_id,
                user_agent=f"{user_agent()} prime-traces",
                transport=self._transport,
                gzip_level=GZIP_LEVEL,
                connect_timeout=CONNECT_TIMEOUT,
            )
        return self._client

    # -- export --------------------------------------------------------------------

    def export(self, items: list[Item], deadline: float | Deadline) -> Outcome:
        """Upload ``items``; each ends up acked, rejected (its own fault) or to retry."""
        deadline = as_deadline(deadline)
        outcome = Outcome()
        sendable: list[Item] = []
        for item in items:
            # What the service would refuse anyway is refused here, costing no request.
            if item.problem is not None:
                outcome.rejected.append((item, item.problem))
            elif len(item.data) > MAX_LINE_BYTES:
                outcome.rejected.append(
                    (item, f"trace_too_large: the line is {len(item.data):,} bytes (64 MiB max)")
                )
            else:
                sendable.append(item)
        pinned, sendable = self._pinned(sendable)
        work = deque([*pinned, *_batches(sendable)])
        budget = SPLIT_BUDGET
        while work:
            if deadline.expired():
                # finish() gave up on this export: start nothing new after its deadline.
                for rest in work:
                    outcome.retry.extend(rest)
                outcome.retry_reason = outcome.retry_reason or "the deadline passed"
                break
            batch = work.popleft()
            error = self._upload(batch, deadline)
            if error is None:
                self.receipts += 1
                outcome.acked.extend(batch)
                continue
            if self._pt.is_rejection(error):
                code = getattr(error, "code", None)
                if len(batch) == 1 or code in _REQUEST_LEVEL_CODES or budget < 2:
                    outcome.rejected.extend((item, _reason(error)) for item in batch)
                else:
                    # One bad line must not cost its neighbours: halve until it stands alone.
                    budget -= 2
                    half = len(batch) // 2
                    work.appendleft(batch[half:])
                    work.appendleft(batch[:half])
                continue
            # The sink stops for this round; nothing after this batch is attempted now.
            outcome.retry.extend(batch)
            for rest in work:
                outcome.retry.extend(rest)
            if self._pt.is_transient(error):
                self._unsettled = batch
                outcome.retry_reason = _reason(error)
                outcome.retry_after = getattr(error, "retry_after", None)
            else:
                outcome.retire = _reason(error)
                outcome.quiet = self._pt.is_service_off(error) and self.receipts == 0
            break
        return outcome

    def _pinned(self, items: list[Item]) -> tuple[list[list[Item]], list[Item]]:
        """The unsettled batch, if ``items`` start with it, and the items after it."""
        batch, self._unsettled = self._unsettled, None
        head = items[: len(batch)] if batch else []
        if batch and len(head) == len(batch) and all(map(operator.is_, batch, head)):
            return [batch], items[len(batch) :]
        return [], items

    def _upload(self, batch: list[Item], deadline: Deadline) -> BaseException | None:
        """Send one batch, replaying the same bytes on transient failures; the last error
        (None on a receipt)."""
        body = _jsonl(batch)
        key = idempotency_key(body)
        fmt = self._pt.line_format(batch[0].kind)
        api = self._api()
        notes = self._notes
        window = inflight_window(REQUEST_TIMEOUT)
        note = None
        if notes is not None:
            keys = record_keys(batch)
            note = notes.open(keys, time.time() + window, key=key)
        attempts = 0

        def send(timeout: float) -> None:
            nonlocal attempts
            if attempts and notes is not None:  # a retry may be stored until its end too
                notes.extend(note, time.time() + window)
            attempts += 1
            with suppress_instrumentation():
                api.upload_batch(body, key, line_format=fmt, context=self._context, timeout=timeout)

        try:
            # Content-addressed: replaying the same bytes is always safe.
            retry.retrying(
                send,
                timeout=REQUEST_TIMEOUT,
                deadline=deadline,
                retryable=self._pt.is_transient,
                attempts=self._max_attempts,
                on_retry=_log_retry,
            )
            return None
        except Exception as exc:
            # The platform's answer as it is; a fault of our own counts as transient, so
            # the channel's failure streak bounds how often it can recur.
            return self._pt.as_failure(exc)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def after_fork(self) -> None:
        self._client = None  # the parent's pool; never closed from the child
        self._unsettled = None


def idempotency_key(body: Sequence[bytes]) -> str:
    """``sha256:<hex>`` of the batch's uncompressed lines (contract §8.4)."""
    digest = hashlib.sha256()
    for part in body:
        digest.update(part)
    return "sha256:" + digest.hexdigest()


def batch_key(batch: list[Item]) -> str:
    """The Idempotency-Key ``batch`` is sent under (its lines, in order)."""
    return idempotency_key(_jsonl(batch))


def _jsonl(batch: list[Item]) -> list[bytes]:
    """The batch's lines and their newlines, never joined: the body is hashed and
    compressed from its parts (a body is megabytes: a joined copy is one more of them)."""
    parts = [b"\n"] * (2 * len(batch))
    parts[0::2] = [item.data for item in batch]
    return parts


def _batches(items: list[Item]) -> list[list[Item]]:
    """Deterministic, homogeneous batches under the target size (§8.6). A batch also closes
    before a record id it already holds, which the service would refuse as a duplicate."""
    batches: list[list[Item]] = []
    current: list[Item] = []
    ids: set[str] = set()
    size = 0
    for item in items:
        line = len(item.data) + 1
        if current and (
            size + line > TARGET_BATCH_BYTES
            or len(current) >= MAX_BATCH_LINES
            or current[0].kind != item.kind
            or (item.record_id is not None and item.record_id in ids)
        ):
            batches.append(current)
            current, size = [], 0
            ids = set()
        current.append(item)
        if item.record_id is not None:
            ids.add(item.record_id)
        size += line
    if current:
        batches.append(current)
    return batches

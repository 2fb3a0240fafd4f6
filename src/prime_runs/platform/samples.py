"""Appending v0 rows to an evaluation's legacy sample table (contract §5).

``POST /evaluations/{id}/samples`` appends and the platform does not deduplicate, so a
batch is never replayed blindly: after an ambiguous failure the evaluation's sample ids
are read back and only the rows that did not land are sent again. Losing a batch is
recoverable (the journal keeps it for ``prime-runs sync``); duplicate rows would skew the
dashboard's averages silently.

Rows arrive already encoded (design: encode once) and are sent as their parts, never
re-encoded or joined.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import prime_runs.platform._bodies as _bodies
from prime_runs._records.skeleton import Spliced
from prime_runs.errors import (
    APIError,
    ConflictError,
    PrimeRunsError,
    RetryableAPIError,
    TransportError,
    ValidationRejectedError,
)
from prime_runs.platform._http import Deadline, is_ambiguous

if TYPE_CHECKING:
    from prime_runs.platform._http import PlatformClient

logger = logging.getLogger("prime_runs")

BODY_LIMIT = 26_214_400  # 25 MiB, envelope and commas included
APPEND_TIMEOUT = 300.0
LIST_PAGE_SIZE = 100
MAX_RESENDS = 2
_HEAD = b'{"samples":['
_TAIL = b"]}"
ENVELOPE_BYTES = len(_HEAD) + len(_TAIL)  # 14

# An encoded row: bytes, or the parts it was spliced from (sent as they are, never joined).
Row = tuple[str, bytes | Spliced]


@dataclass
class AppendResult:
    """What one :meth:`SampleWriter.append` achieved.

    ``failed`` maps each lost sample id to why. ``permanent``: a sink-wide failure
    (401/402/403/404/500, ...) stopped the write; the sink should retire. ``rejected``:
    some batch was refused as sent (400/409/413/422, or a row too large alone); only
    those rows are lost. ``transient``: some batch failed after its retries (or could
    not be confirmed after an ambiguous failure). ``error`` is the first error seen.
    """

    acked: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    permanent: bool = False
    rejected: bool = False
    transient: bool = False
    error: PrimeRunsError | None = None

    @property
    def ok(self) -> bool:
        return not self.failed

    def _fail(self, ids: Sequence[str], reason: str, error: PrimeRunsError | None) -> None:
        for sample_id in ids:
            self.failed.setdefault(sample_id, reason)
        if self.error is None and error is not None:
            self.error = error


def pack(rows: Sequence[Row], limit: int = BODY_LIMIT) -> tuple[list[list[Row]], list[Row]]:
    """Greedy, in-order batches whose bodies fit ``limit``; plus rows too large alone."""
    batches: list[list[Row]] = []
    oversized: list[Row] = []
    current: list[Row] = []
    size = ENVELOPE_BYTES
    for row in rows:
        row_size = len(row[1])
        if ENVELOPE_BYTES + row_size > limit:
            oversized.append(row)
            continue
        extra = row_size + (1 if current else 0)
        if current and size + extra > limit:
            batches.append(current)
            current, size, extra = [], ENVELOPE_BYTES, row_size
        current.append(row)
        size += extra
    if current:
        batches.append(current)
    return batches, oversized


def body_of(batch: Sequence[Row]) -> _bodies.Body:
    """``{"samples":[row,row,...]}`` from the encoded rows, without re-encoding or joining
    them: a body is megabytes, and every copy costs page faults too."""
    if not batch:
        return _bodies.Body([_HEAD + _TAIL])
    parts: list[bytes | memoryview] = [_HEAD]
    for _, data in batch:
        if isinstance(data, Spliced):
            parts += data.parts
        else:
            parts.append(data)
        parts.append(b",")
    parts[-1] = _TAIL
    return _bodies.Body(parts)


class SampleWriter:
    """Writes one evaluation's rows; remembers which sample ids the platform holds."""

    def __init__(self, client: PlatformClient, eval_id: str, *, limit: int = BODY_LIMIT) -> None:
        self._client = client
        self._eval_id = eval_id
        self._limit = limit
        self._path = f"/evaluations/{eval_id}/samples"
        self._stored: set[str] = set()  # ids known to be on the platform

    def append(self, rows: Sequence[Row], *, deadline: Deadline | None = None) -> AppendResult:
        """Send ``(sample_id, row JSON bytes)`` rows in as few bodies as fit; see
        :class:`AppendResult`. Raises nothing for platform failures."""
        result = AppendResult()
        batches, oversized = pack(rows, self._limit)
        for sample_id, data in oversized:
            result._fail(
                [sample_id],
                f"row of {len(data):,} bytes exceeds the {self._limit:,}-byte request limit",
                None,
            )
            result.rejected = True
        for index, batch in enumerate(batches):
            self._send_batch(batch, result, deadline)
            if result.permanent:
                reason = f"not sent: {result.error}"
                for rest in batches[index + 1 :]:
                    result._fail([sid for sid, _ in rest], reason, None)
                break
        return result

    def _send_batch(
        self, batch: list[Row], result: AppendResult, deadline: Deadline | None
    ) -> None:
        pending = batch
        last_error: APIError | None = None
        for _ in range(MAX_RESENDS):
            ids = [sid for sid, _ in pending]
            try:
                self._post(pending, deadline)
            except (ValidationRejectedError, ConflictError) as error:
                result._fail(ids, str(error), error)
                result.rejected = True
                return
            except APIError as error:
                if not is_ambiguous(error):
                    result._fail(ids, str(error), error)
                    if _is_transient(error):
                        result.transient = True
                    else:
                        result.permanent = True
                    return
                # The batch may or may not have landed: read back, resend only what is missing.
                try:
                    missing = self.missing(ids, deadline)
                except APIError as read_error:
                    logger.debug("samples read-back failed: %s", read_error)
                    result._fail(ids, f"{error} (could not confirm; not resent)", error)
                    result.transient = True
                    return
                landed = [sid for sid in ids if sid not in missing]
                result.acked.extend(landed)
                pending = [row for row in pending if row[0] in missing]
                if not pending:
                    return
                logger.info(
                    "samples for %s: %d of %d rows landed despite %s; resending the rest",
                    self._eval_id,
                    len(landed),
                    len(ids),
                    error,
                )
                last_error = error
                continue
            self._stored.update(ids)
            result.acked.extend(ids)
            return
        result._fail([sid for sid, _ in pending], str(last_error), last_error)
        result.transient = True

    def _post(self, batch: list[Row], deadline: Deadline | None) -> None:
        body = body_of(batch)
        try:
            self._client.request(
                "POST",
                self._path,
                content=body,
                idempotent=False,
                timeout=APPEND_TIMEOUT,
                deadline=deadline,
            )
        finally:
            _bodies.sent(len(body))

    def missing(self, ids: Sequence[str], deadline: Deadline | None) -> set[str]:
        """Which of ``ids`` the platform does not hold, reading pages only as needed."""
        missing = {sid for sid in ids if sid not in self._stored}
        if not missing:
            return missing
        for sample_id in self._remote_ids(deadline):
            self._stored.add(sample_id)
            missing.discard(sample_id)
            if not missing:
                break
        return missing

    def _remote_ids(self, deadline: Deadline | None) -> Iterator[str]:
        # Every page is read: no source promises the listing's order, so a cached page
        # position could miss rows. Iteration stops early once the batch is accounted for.
        page = 1
        while True:
            listing = self._client.request(
                "GET",
                self._path,
                params={"page": page, "limit": LIST_PAGE_SIZE},
                idempotent=True,
                deadline=deadline,
            )
            samples = listing.get("samples") or []
            for sample in samples:
                if isinstance(sample, dict):
                    value = sample.get("sample_id", sample.get("sampleId"))
                    if value is not None:
                        yield str(value)
            if not samples or not listing.get("hasMore", len(samples) >= LIST_PAGE_SIZE):
                return
            page += 1


def _is_transient(error: APIError) -> bool:
    """429/502/503/504 after retries, or a transport failure; anything else is sink-wide."""
    return isinstance(error, (RetryableAPIError, TransportError))


__all__ = ["BODY_LIMIT", "ENVELOPE_BYTES", "AppendResult", "SampleWriter", "body_of", "pack"]

"""Appending v0 rows to an evaluation's legacy sample table (contract §5).

``POST /evaluations/{id}/samples`` appends and the platform does not deduplicate, so a
batch is never replayed blindly. Before each append the writer reads the evaluation's row
count and notes the batch with it (``_journal/batches``); after an ambiguous failure it
reads back only the rows appended since (``stored_among``); what did not land is its
sink's to send again, once no attempt of it can still be stored
(``_envnumbers.inflight_window``). Losing a batch is recoverable (the journal keeps it for
``prime-runs sync``); duplicate rows would skew the dashboard's averages silently.

Rows arrive already encoded (design: encode once) and are sent as their parts, never
re-encoded or joined.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import prime_runs.platform._bodies as _bodies
from prime_runs._envnumbers import inflight_window
from prime_runs._records.item import RecordKey
from prime_runs._records.skeleton import Spliced
from prime_runs._records.v0rows import ENVELOPE_BYTES, packed
from prime_runs.errors import (
    APIError,
    ConflictError,
    PrimeRunsError,
    RetryableAPIError,
    TransportError,
    ValidationRejectedError,
)
from prime_runs.platform._http import Deadline, is_ambiguous
from prime_runs.platform.retry import left
from prime_runs.platform.sample_listing import stored_among

if TYPE_CHECKING:
    from prime_runs._journal.batches import Notebook
    from prime_runs.platform._http import PlatformClient

logger = logging.getLogger("prime_runs")

BODY_LIMIT = 26_214_400  # 25 MiB, envelope and commas included
APPEND_TIMEOUT = 300.0
WITNESSES = 8  # ids kept of the first and of the latest rows stored (see ``stored_among``)
_HEAD = b'{"samples":['
_TAIL = b"]}"  # with _HEAD, the ENVELOPE_BYTES a body costs before its first row

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
    # Appends that failed ambiguously and were not found stored: their rows may still
    # land, so they are settled (``SampleWriter.settle``) before they are sent again.
    doubt: list[Sent] = field(default_factory=list)

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
    fits = [row for row in rows if ENVELOPE_BYTES + len(row[1]) <= limit]
    oversized = [row for row in rows if ENVELOPE_BYTES + len(row[1]) > limit]
    return packed(fits, [len(row[1]) for row in fits], limit), oversized


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


@dataclass(frozen=True)
class Sent:
    """An append that may be stored without our having seen it: its rows' ids, a lower
    bound of the evaluation's row count before it (``since``), until when the platform may
    still store it (``time.time()``), a few ids stored before it (``before``), and its
    batch note (``_journal/batches``)."""

    ids: tuple[str, ...]
    since: int
    until: float
    before: tuple[str, ...] = ()
    note: int | None = None


class SampleWriter:
    """Writes one evaluation's rows. ``notes`` (the run's notebook for this sink): each
    append is noted before it is sent, its records named by ``keys``."""

    def __init__(
        self,
        client: PlatformClient,
        eval_id: str,
        *,
        limit: int = BODY_LIMIT,
        notes: Notebook | None = None,
    ) -> None:
        self._client = client
        self._eval_id = eval_id
        self._limit = limit
        self._path = f"/evaluations/{eval_id}/samples"
        self.notes = notes
        # No fewer rows than this are stored: the rows this writer saw stored, or the
        # listing's total when it last looked. A row appended now lands at or after it.
        self._floor = 0
        # Ids this writer saw stored: the first few and the latest few (see ``stored_among``).
        self._first: list[str] = []
        self._latest: deque[str] = deque(maxlen=WITNESSES)

    def append(
        self,
        rows: Sequence[Row],
        *,
        deadline: Deadline | None = None,
        keys: Sequence[RecordKey | None] | None = None,
    ) -> AppendResult:
        """Send ``(sample_id, row JSON bytes)`` rows in as few bodies as fit; see
        :class:`AppendResult`. ``keys``: the journal key of each row's record (for its
        note). Raises nothing for platform failures."""
        result = AppendResult()
        key_of = {id(r): k for r, k in zip(rows, keys or (), strict=False) if k is not None}
        batches, oversized = pack(rows, self._limit)
        for sample_id, data in oversized:
            result._fail(
                [sample_id],
                f"row of {len(data):,} bytes exceeds the {self._limit:,}-byte request limit",
                None,
            )
            result.rejected = True
        for index, batch in enumerate(batches):
            record_keys = list(dict.fromkeys(key_of[id(r)] for r in batch if id(r) in key_of))
            self._send_batch(batch, record_keys, result, deadline)
            if result.permanent:
                reason = f"not sent: {result.error}"
                for rest in batches[index + 1 :]:
                    result._fail([sid for sid, _ in rest], reason, None)
                break
        return result

    def _send_batch(
        self,
        batch: list[Row],
        keys: list[RecordKey],
        result: AppendResult,
        deadline: Deadline | None,
    ) -> None:
        ids = [sid for sid, _ in batch]
        since = self._observe(deadline)
        remaining = left(deadline)
        if remaining is not None and remaining <= 0:
            # The row-count read used the time up (finish() gave up meanwhile): no append
            # starts after its deadline, whose rows finish() has reported kept for sync.
            result._fail(ids, "not sent: out of time", None)
            result.transient = True
            return
        sent = self._note(batch, keys, since)
        try:
            self._post(batch, deadline, sent)
        except (ValidationRejectedError, ConflictError) as error:
            result._fail(ids, str(error), error)
            result.rejected = True
            return
        except APIError as error:
            if is_ambiguous(error):
                self._unconfirmed(error, sent, result, deadline)
                return
            self._forget(sent)  # it was never stored: nothing of it to settle
            result._fail(ids, str(error), error)
            if _is_transient(error):
                result.transient = True
            else:
                result.permanent = True
            return
        self._stored(ids, sent.since)
        result.acked.extend(ids)

    def _unconfirmed(
        self,
        error: APIError,
        sent: Sent,
        result: AppendResult,
        deadline: Deadline | None,
    ) -> None:
        """After an ambiguous failure: read back what landed. The rest is never sent again
        here: it waits (``result.doubt``) until no attempt of it can still be stored, and
        the sink's next delivery settles it then, the one resend there is."""
        sent = dataclasses.replace(sent, until=time.time() + self._window())
        try:
            found, _ = self.settle(sent, deadline)
        except APIError as read_error:
            logger.debug("samples read-back failed: %s", read_error)
            found, why = set(), f"{error} (could not confirm; not resent)"
        else:
            why = f"{error} (may still be stored: not resent before it cannot be)"
        result.acked.extend(sid for sid in sent.ids if sid in found)
        rest = [sid for sid in sent.ids if sid not in found]
        if rest:
            result._fail(rest, why, error)
            result.transient = True
            result.doubt.append(sent)

    def _window(self) -> float:
        return inflight_window(APPEND_TIMEOUT)

    def _note(self, batch: list[Row], keys: list[RecordKey], since: int) -> Sent:
        """Where the batch will land at the earliest (``since``), noted with it before it
        is sent."""
        ids = tuple(sid for sid, _ in batch)
        before = (*self._first, *self._latest)
        until = time.time() + self._window()
        note = None
        if self.notes is not None and keys:
            note = self.notes.open(keys, until, ids=list(ids), since=since, before=list(before))
        return Sent(ids, since, until, before, note)

    def _forget(self, sent: Sent) -> None:
        if self.notes is not None and sent.note is not None:
            self.notes.forget(sent.note)

    def _observe(self, deadline: Deadline | None) -> int:
        """The evaluation's row count now (at least ``_floor``): one listing request for a
        page past the rows this writer knows of, so it carries the total and few rows."""
        try:
            listing = self._client.request(
                "GET",
                self._path,
                params={"page": self._floor + 1, "limit": 1},
                idempotent=True,
                deadline=deadline,
            )
        except APIError as error:
            logger.debug("samples: could not read the row count: %s", error)
            return self._floor  # a lower bound all the same: only costs a longer read-back
        total = listing.get("total")
        if isinstance(total, int) and not isinstance(total, bool) and total > self._floor:
            self._floor = total
        return self._floor

    def _stored(self, ids: Sequence[str], since: int) -> None:
        self._floor = max(self._floor, since + len(ids))
        for sample_id in ids:
            if len(self._first) < WITNESSES:
                self._first.append(sample_id)
            else:
                self._latest.append(sample_id)

    def _post(self, batch: list[Row], deadline: Deadline | None, sent: Sent) -> None:
        body = body_of(batch)
        attempts = 0

        def attempt() -> None:
            nonlocal attempts
            if attempts and self.notes is not None:  # a retry may be stored until its end
                self.notes.extend(sent.note, time.time() + self._window())
            attempts += 1

        try:
            self._client.request(
                "POST",
                self._path,
                content=body,
                idempotent=False,
                timeout=APPEND_TIMEOUT,
                deadline=deadline,
                before_attempt=attempt,
            )
        finally:
            _bodies.sent(len(body))

    def settle(self, sent: Sent, deadline: Deadline | None) -> tuple[set[str], bool]:
        """Which of ``sent``'s rows the evaluation holds, and whether the others may be sent
        again (no attempt of ``sent`` can still be stored). Raises ``APIError``."""
        free = time.time() >= sent.until
        found = stored_among(
            self._client, self._eval_id, sent.ids, sent.since, sent.before, deadline
        )
        if found:
            self._stored(sorted(found), sent.since)
        return found, free


def _is_transient(error: APIError) -> bool:
    """429/502/503/504 after retries, or a transport failure; anything else is sink-wide."""
    return isinstance(error, (RetryableAPIError, TransportError))


__all__ = [
    "BODY_LIMIT",
    "ENVELOPE_BYTES",
    "AppendResult",
    "SampleWriter",
    "Sent",
    "body_of",
    "pack",
    "stored_among",
]

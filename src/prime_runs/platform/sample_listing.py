"""Reading back which rows of one append an evaluation's sample table holds, at the cost
of the rows appended since, not of the evaluation (contract Appendix B: the listing takes
``page`` and ``limit`` and gives ``total``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prime_runs.platform._http import Deadline, PlatformClient

logger = logging.getLogger("prime_runs")

LIST_PAGE_SIZE = 100


def stored_among(
    client: PlatformClient,
    eval_id: str,
    ids: Sequence[str],
    since: int,
    before: Sequence[str] = (),
    deadline: Deadline | None = None,
) -> set[str]:
    """Which of ``ids`` (rows of one append) the evaluation holds. ``since``: no more rows
    than this were stored before the append. ``before``: ids stored before it.

    Reads only the listing's rows from position ``since`` on: the rows appended since,
    the batch's own among them. That assumes the listing is in append order: Appendix B
    gives it no order, so this is an assumption about the platform (the stand-in lists
    in append order). What contradicts it reads the whole evaluation instead, the only
    safe answer: a row of ``before`` among the new ones, a total smaller than ``since`` or
    missing, or a page longer than asked. Raises ``APIError``."""
    want = set(ids)
    if not want:
        return set()
    path = f"/evaluations/{eval_id}/samples"
    found: set[str] = set()
    offset, size = since, min(LIST_PAGE_SIZE, len(want))
    witnesses = set(before) - want
    while True:
        # A page of the size that starts exactly at ``offset``: no row before it is read.
        size = _aligned(offset, size)
        listing = client.request(
            "GET",
            path,
            params={"page": offset // size + 1, "limit": size},
            idempotent=True,
            deadline=deadline,
        )
        total = listing.get("total")
        rows = listing.get("samples") or []
        if not isinstance(total, int) or isinstance(total, bool) or total < since:
            return _scan(client, path, want, deadline, "the listing gives no usable total")
        if not isinstance(rows, list) or len(rows) > size:
            # Not the page asked for: the positions cannot be trusted.
            return _scan(client, path, want, deadline, "the listing ignores its limit")
        for sample_id in _sample_ids(listing):
            if sample_id in witnesses:
                return _scan(client, path, want, deadline, "the listing is not in append order")
            if sample_id in want:
                found.add(sample_id)
        offset += len(rows)
        if found == want or not rows or offset >= total:
            return found
        size = max(1, min(LIST_PAGE_SIZE, total - offset))


def _aligned(offset: int, most: int) -> int:
    """The largest page size up to ``most`` whose pages start at ``offset``."""
    for size in range(max(1, most), 0, -1):
        if offset % size == 0:
            return size
    return 1  # pragma: no cover - 1 divides everything


def _sample_ids(listing: dict[str, Any]) -> Iterator[str]:
    samples = listing.get("samples")
    for sample in samples if isinstance(samples, list) else []:
        if isinstance(sample, dict):
            value = sample.get("sample_id", sample.get("sampleId"))
            if value is not None:
                yield str(value)


_scanned: set[str] = set()  # evaluations whose listing contradicted append order (said once)


def _scan(
    client: PlatformClient, path: str, want: set[str], deadline: Deadline | None, why: str
) -> set[str]:
    """Every page of the evaluation until ``want`` is accounted for (the fallback)."""
    if path not in _scanned:
        _scanned.add(path)
        logger.warning(
            "prime-runs: %s for %s: confirming an append reads the whole evaluation", why, path
        )
    found: set[str] = set()
    page = 1
    while True:
        listing = client.request(
            "GET",
            path,
            params={"page": page, "limit": LIST_PAGE_SIZE},
            idempotent=True,
            deadline=deadline,
        )
        rows = list(_sample_ids(listing))
        found.update(want.intersection(rows))
        if found == want or not rows:
            return found
        if not listing.get("hasMore", len(rows) >= LIST_PAGE_SIZE):
            return found
        page += 1

"""The v0 sample sink: one row per episode in the evaluation's sample table.

Rows are projected from the bytes encoded at log time (the episode is spliced
into ``info.native_wrapper``, not encoded again) and appended through the
platform's ``SampleWriter``, which never blindly replays an append.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..platform._http import PlatformClient
from ..platform.samples import SampleWriter
from ..projection import project_episode_bytes
from ._base import Item, Outcome

logger = logging.getLogger("prime_runs")

SINK_NAME = "eval_samples"


class SamplesSink:
    """Appends v0 rows for one evaluation; rollout numbers count across the whole run."""

    name = SINK_NAME

    def __init__(self, client: PlatformClient, eval_id: str) -> None:
        self._client = client
        self._writer = SampleWriter(client, eval_id)
        self._counters: dict[Any, int] = {}
        # Rows of records waiting for a retry: projecting again would renumber them.
        self._projected: dict[int, list[tuple[str, bytes]]] = {}
        self._warned_skip = False

    def __repr__(self) -> str:
        return "SamplesSink()"

    def _rows(self, item: Item) -> list[tuple[str, bytes]]:
        cached = self._projected.pop(id(item), None)
        if cached is not None:
            return cached
        rows = project_episode_bytes(item.data, self._counters)
        if len(rows) == 1 and item.record_id is not None and item.kind == "episode":
            return [(item.record_id, rows[0])]
        return [(str(json.loads(row).get("sample_id")), row) for row in rows]

    def export(self, items: list[Item], deadline: float) -> Outcome:
        outcome = Outcome()
        rows: list[tuple[str, bytes]] = []
        owner: dict[str, list[Item]] = {}
        item_rows: dict[int, list[tuple[str, bytes]]] = {}
        for item in items:
            try:
                projected = self._rows(item)
            except Exception as exc:  # a record the projection cannot read
                outcome.rejected.append((item, f"no v0 row: {type(exc).__name__}: {exc}"))
                continue
            if not projected:
                outcome.skipped.append(item)
                continue
            item_rows[id(item)] = projected
            for sample_id, data in projected:
                rows.append((sample_id, data))
                owner.setdefault(sample_id, []).append(item)
        if not rows:
            return outcome
        result = self._writer.append(rows, deadline=deadline)
        failed_items: dict[int, str] = {}
        for sample_id, reason in result.failed.items():
            for item in owner.get(sample_id, ()):
                failed_items.setdefault(id(item), reason)
        for item in items:
            if id(item) not in item_rows:
                continue
            reason = failed_items.get(id(item))
            if reason is None:
                outcome.acked.append(item)
            elif result.permanent:
                outcome.retry.append(item)
                self._projected[id(item)] = item_rows[id(item)]
            elif result.transient and not result.rejected:
                outcome.retry.append(item)
                self._projected[id(item)] = item_rows[id(item)]
            else:
                outcome.rejected.append((item, reason))
        if result.permanent:
            outcome.retire = f"{type(result.error).__name__}: {result.error}"
        elif outcome.retry:
            outcome.retry_reason = str(result.error)
        return outcome

    def close(self) -> None:
        self._client.close()

    def after_fork(self) -> None:
        # PlatformClient opens a fresh pool in a new process by itself.
        self._projected = {}

"""What a training episode did for its run, read from its record for ``prime-runs show`` and
the report: the work's type and dispatch step (``run.work``), how far its policy lagged
behind that step, and whether it has a conversation for the sample table's row.

``run.work`` is ``{"type": "train", "step": 41, "policy": {"start": 40, "end": 41}}`` for
a rollout dispatched at step 41 and generated while the live policy moved from version 40
to 41 (record-schema section 2), or ``{"type": "eval", "step": 40}`` for an inline
evaluation. A rollout whose policy started before its step is off-policy, by
``step - policy.start`` steps; one whose work names no policy has its lag unknown.
Records are untrusted: odd shapes read as "not training work", never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import prime_runs._records.access as _records

ON_POLICY = "on-policy"
OFF_POLICY = "off-policy"
NO_POLICY = "policy not recorded"
EVAL_WORK = "eval work"


@dataclass(frozen=True)
class Work:
    """``run.work`` of one record: its type (``train``, ``eval``, ...) and step."""

    type: str
    step: int | None
    lag: int | None  # step - policy.start, for training work that names its policy

    @property
    def policy(self) -> str:
        """On-policy, off-policy, policy not recorded, or eval work (any other type)."""
        if self.type != "train":
            return EVAL_WORK
        if self.lag is None:
            return NO_POLICY
        return OFF_POLICY if self.lag > 0 else ON_POLICY


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def work_of(record: Mapping[str, Any]) -> Work | None:
    """The record's ``run.work``, or None when it has none."""
    run = record.get("run")
    work = run.get("work") if isinstance(run, Mapping) else None
    if not isinstance(work, Mapping):
        return None
    kind = work.get("type")
    step = _int(work.get("step"))
    step = step if step is not None and step >= 0 else None
    policy = work.get("policy")
    start = _int(policy.get("start")) if isinstance(policy, Mapping) else None
    lag = step - start if step is not None and start is not None else None
    return Work(kind if isinstance(kind, str) else "?", step, lag)


def has_messages(record: Mapping[str, Any]) -> bool:
    """Whether the record's summary trace holds a conversation: the sample table gives an
    episode a row only then (a record too large for one row is split per trace, and then
    any trace with messages has one; such records are rare and not told apart here)."""
    try:
        if _records.is_episode(record):
            traces = [t for t in record.get("traces") or () if isinstance(t, Mapping)]
        else:
            traces = [record]
        if not traces:
            return False
        return bool(_records.branches(traces[_records.summary_trace_index(traces)], bare=False))
    except (AttributeError, TypeError, KeyError, IndexError):
        return False

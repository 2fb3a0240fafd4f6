"""A run's loss and delivery accounting: the counters, their part of ``status.json``, and the
one warning per kind of loss that ``finish()`` gives."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from .exporters._base import Outcome

logger = logging.getLogger("prime_runs")


@dataclass
class Counters:
    """Loss and delivery accounting, per sink where it matters. Guarded by the state's lock."""

    logged: int = 0
    dropped: int = 0  # queue full: reached no sink during the run (still archived)
    invalid: int = 0  # bad input, or logged after finish(): never logged at all
    failed: dict[str, int] = field(default_factory=dict)
    acked: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    traces_episodes_written: int = 0
    restamped: int = 0  # records that named another run id (their copies carry this one)
    unjournaled: int = 0  # records the journal could not hold (disk full, size limit, link)
    late: int = 0  # records refused because they were logged after finish() began
    errors: list[str] = field(default_factory=list)

    @staticmethod
    def add(counter: dict[str, int], key: str, n: int) -> None:
        counter[key] = counter.get(key, 0) + n

    def count_outcome(self, sink: str, outcome: Outcome) -> None:
        """Count one settled batch of ``sink`` (the caller holds the state's lock)."""
        if outcome.acked:
            self.add(self.acked, sink, len(outcome.acked))
            if sink == "traces":
                self.traces_episodes_written += sum(1 for i in outcome.acked if i.kind == "episode")
        if outcome.skipped:
            self.add(self.skipped, sink, len(outcome.skipped))
        if outcome.rejected or outcome.unsent:
            self.add(self.failed, sink, len(outcome.rejected) + len(outcome.unsent))

    def status_fields(self) -> dict[str, Any]:
        """The counts ``status.json`` records."""
        return {
            "logged": self.logged,
            "acked": dict(self.acked),
            "failed": dict(self.failed),
            "dropped": self.dropped,
            "invalid": self.invalid,
            "unjournaled": self.unjournaled,
        }

    def warn_losses(self, *, run_id: str, where: str, online: bool) -> None:
        """One warning per kind of loss; ``where`` names the archive (or is empty)."""
        if self.restamped:
            logger.warning(
                "prime-runs: %d records named a different run id; their uploaded copies carry "
                "this run's id %s",
                self.restamped,
                run_id,
            )
        if self.invalid:
            logger.warning(
                "prime-runs: %d records were not logged: %d invalid (not a JSON object "
                "record, or cut by an attribute length limit) and %d logged after finish() "
                "(see run.errors)",
                self.invalid,
                self.invalid - self.late,
                self.late,
            )
        if self.unjournaled:
            logger.warning(
                "prime-runs: %d records could not be written to the run's journal%s (see "
                "run.errors); %s",
                self.unjournaled,
                where,
                "they were sent to the platform but sync cannot resend them"
                if online
                else "they are lost",
            )
        if self.dropped:
            logger.warning(
                "prime-runs: %d of %d records reached no sink because the upload queue was "
                "full; they are in the archive for `prime-runs sync`%s",
                self.dropped,
                self.logged,
                where,
            )
        for sink, n in sorted(self.failed.items()):
            logger.warning(
                "prime-runs: %s stored %d of %d records; %d were not stored%s",
                sink,
                self.acked.get(sink, 0),
                self.logged,
                n,
                where,
            )

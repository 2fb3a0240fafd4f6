"""What a sink is: something that stores a batch of encoded records and says what landed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .._archive import RecordKey


@dataclass(frozen=True, slots=True)
class Item:
    """One encoded record on its way to the sinks. Shared (not copied) between sinks."""

    kind: str  # "episode" | "trace"
    data: bytes  # compact JSON, stamped with the run, no newline
    key: RecordKey | None  # where the journal holds it (None with the journal off)
    problem: str | None = None  # why Prime Traces would reject it, found before sending
    record_id: str | None = None  # for error messages


@dataclass
class Outcome:
    """What happened to one batch handed to a sink."""

    acked: list[Item] = field(default_factory=list)
    # Rejected for their own sake: resending the same bytes cannot succeed.
    rejected: list[tuple[Item, str]] = field(default_factory=list)
    # Not stored because of a transient failure: worth another try later.
    retry: list[Item] = field(default_factory=list)
    retry_reason: str | None = None
    retry_after: float | None = None
    # Sink-wide permanent failure: stop using this sink for the run.
    retire: str | None = None
    # The sink switched itself off without it being a loss (e.g. service not enabled).
    quiet: bool = False
    # Items the sink does not store at all (no projection): not a loss.
    skipped: list[Item] = field(default_factory=list)


class Sink(Protocol):
    name: str

    def export(self, items: list[Item], deadline: float) -> Outcome:
        """Store ``items`` before ``deadline`` (``time.monotonic()``). Never raises."""
        ...

    def close(self) -> None: ...

    def after_fork(self) -> None:
        """Drop inherited connections without closing them (they belong to the parent)."""
        ...

"""What ``prime-runs sync`` says about one run: the report and its one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import RunInfo, inspect, sink_count
from prime_runs._plural import quantity


@dataclass
class SyncReport:
    """What syncing one run did. ``ok``: everything landed and the run is closed."""

    run_id: str
    ok: bool
    message: str
    skipped: bool = False
    platform_id: str | None = None
    uploaded: dict[str, int] = field(default_factory=dict)
    found: dict[str, int] = field(default_factory=dict)  # already stored: acked, not sent
    late: int | None = None  # records that landed after the run was finalized


class Tally(Protocol):
    """What a sync counted for one run: records sent, found stored, refused, and notes."""

    uploaded: dict[str, int]
    found: dict[str, int]
    rejected: dict[str, list[str]]  # sink -> the reasons, one per refused record
    notes: list[str]


def assemble(
    info: RunInfo,
    tally: Tally,
    platform_id: str,
    url: object,
    failures: list[str],
    closed_how: str | None,
    *,
    late: int | None = None,
) -> SyncReport:
    """The report of one synced run (an evaluation or a training run alike): ``ok`` when
    nothing failed, and its line."""
    failures = list(failures)
    if info.status_problem:
        failures.append(f"{info.status_problem}, so how the run ended is unknown")
    notes = list(tally.notes)
    if info.links:  # never read through: what a link points at is not the run's
        notes.append(f"{quantity(len(info.links), 'symbolic link')} in the run folder not read")
    for sink, reasons in tally.rejected.items():
        failures.append(f"{sink_count(sink, len(reasons))} rejected ({reasons[0]})")
    counts = {"uploaded": tally.uploaded, "found": tally.found}
    return SyncReport(
        info.run_id,
        not failures,
        line(info.archive, platform_id, url, failures, closed_how, counts, notes),
        platform_id=platform_id,
        uploaded=dict(tally.uploaded),
        found=dict(tally.found),
        late=late,
    )


def line(
    archive: RunArchive,
    eval_id: str,
    url: object,
    failures: list[str],
    closed_how: str | None,
    counts: dict[str, dict[str, int]],
    notes: list[str],
) -> str:
    """The run's line: what was uploaded, apart from what was found already stored, how the
    run was closed, the notes, and the failures with what is still pending."""
    sent = ", ".join(sink_count(s, n) for s, n in counts["uploaded"].items() if n)
    parts = [f"uploaded {sent}" if sent else "nothing to upload"]
    held = ", ".join(sink_count(s, n) for s, n in counts["found"].items() if n)
    if held:
        parts.append(f"found {held} already stored (not sent again)")
    if closed_how:
        parts.append(closed_how)
    parts.extend(notes)
    if failures:
        still = inspect(archive).pending_text()
        tail = f"; still pending: {still}" if still != "-" else ""
        return f"{eval_id}: " + "; ".join(failures) + tail + " (" + "; ".join(parts) + ")"
    where = f" {url}" if isinstance(url, str) and url else ""
    return f"{eval_id}: " + "; ".join(parts) + where

"""What ``prime-runs sync`` says about one run: the report and its one line."""

from __future__ import annotations

from dataclasses import dataclass, field

from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import SINK_LABELS, inspect


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
    sent = ", ".join(f"{n} {SINK_LABELS[s]}" for s, n in counts["uploaded"].items() if n)
    parts = [f"uploaded {sent}" if sent else "nothing to upload"]
    held = ", ".join(f"{n} {SINK_LABELS[s]}" for s, n in counts["found"].items() if n)
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

"""Reading back a training run's metrics journals (``train_metrics-<pid>.jsonl``, written
by ``_delivery/metrics``) for ``prime-runs sync`` and ``prime-runs ls``.

A row's key is its file and its line number: the writer numbers rows from 0 per file and
acknowledges them by number in ``train_metrics-<pid>.acks``. Rows the platform refused
for good are settled in ``train_metrics-<pid>.rejected``, so no later sync sends them.
A last line without its newline was cut short by a crash: never complete, never sent.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from prime_runs._journal.nofollow import open_for_reading, open_in_run

PREFIX = "train_metrics-"
ROWS = ".jsonl"
ACKS = ".acks"
REJECTED = ".rejected"


def journals(run_dir: Path) -> list[Path]:
    """The run folder's metrics journals, one per process that logged rows."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return []
    return [
        Path(run_dir) / n
        for n in names
        if n.startswith(PREFIX) and n.endswith(ROWS) and not Path(run_dir, n).is_symlink()
    ]


def _numbers(path: Path) -> set[int]:
    try:
        with open_for_reading(path) as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return set()
    return {int(n) for n in text.split() if n.isdigit()}


def settled(journal: Path) -> set[int]:
    """Row numbers of ``journal`` acknowledged or rejected for good."""
    stem = journal.with_suffix("")
    return _numbers(stem.with_suffix(ACKS)) | _numbers(stem.with_suffix(REJECTED))


def rows(journal: Path) -> Iterator[tuple[int, bytes]]:
    """``(row number, body)`` of each complete line of ``journal``."""
    with open_for_reading(journal) as fh:
        data = fh.read()
    # The part after the last newline is torn (or empty): never a row.
    yield from enumerate(data.split(b"\n")[:-1])


def pending(run_dir: Path) -> Iterator[tuple[Path, int, bytes]]:
    """Every complete row no sink stored or refused: ``(journal, row number, body)``."""
    for journal in journals(run_dir):
        done = settled(journal)
        try:
            for number, body in rows(journal):
                if number not in done:
                    yield journal, number, body
        except OSError:
            continue  # unreadable (a link put in its place): nothing of it can be sent


def count_pending(run_dir: Path) -> int:
    return sum(1 for _ in pending(run_dir))


def settle(run_dir: Path, journal: Path, numbers: list[int], *, rejected: bool = False) -> None:
    """Acknowledge (or settle as refused) rows of ``journal``. Raises OSError."""
    if not numbers:
        return
    suffix = REJECTED if rejected else ACKS
    name = journal.with_suffix("").with_suffix(suffix).name
    fd = open_in_run(run_dir, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, "".join(f"{n}\n" for n in numbers).encode())
    finally:
        os.close(fd)

"""A training run's metrics rows: journaled, then delivered off the producer's thread.

``run.log_metrics()`` encodes the row's request body once, appends it to the run's
metrics journal (``train_metrics-<pid>.jsonl`` in the run folder, one unbuffered write)
and hands it to a delivery of its own: the process's worker of the ``train_metrics``
sink (``_delivery/workers``) sends it through a channel given ``PAUSE``. Rows
the platform stored are acknowledged in ``train_metrics-<pid>.acks``.

Why a delivery apart from the run's records: every record reaches every sink of a
delivery, and a metrics row is no trace. Why pause rather than retire: a training run
lasts days, and a sink retired by a five-minute outage would leave the dashboard's curves
empty until the end. The channel backs off (doubling, up to ``PAUSE`` = 300 s, as 0.1.4
pauses) and resumes; meanwhile rows wait in memory (bounded by the ledger) and in the
journal, and the producer never waits.
"""

from __future__ import annotations

import os
import threading

from prime_runs._journal.archive import RunArchive
from prime_runs._journal.nofollow import open_in_run

KIND = "metrics"
PAUSE = 300.0  # the longest wait between attempts while the platform keeps failing
DELIVERY_SUFFIX = "#train_metrics"  # the registry key of a run's metrics delivery


class MetricsJournal:
    """This process's metrics rows of one run, and the platform's acknowledgements."""

    def __init__(self, archive: RunArchive) -> None:
        self._dir = archive.path
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._rows: int | None = None
        self._acks: int | None = None
        self._count = 0

    def _open(self, suffix: str) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        return open_in_run(self._dir, f"train_metrics-{self._pid}.{suffix}", flags)

    def append(self, body: bytes) -> int:
        """Journal one row; its sequence number in this process's file. Raises OSError."""
        with self._lock:
            if self._rows is None:
                self._rows = self._open("jsonl")
            os.write(self._rows, body + b"\n")
            self._count += 1
            return self._count - 1

    def ack(self, seqs: list[int]) -> None:
        if not seqs:
            return
        with self._lock:
            if self._acks is None:
                self._acks = self._open("acks")
            os.write(self._acks, "".join(f"{n}\n" for n in seqs).encode())

    def close(self) -> None:
        with self._lock:
            for fd in (self._rows, self._acks):
                if fd is not None:
                    os.close(fd)
            self._rows = self._acks = None

    def after_fork(self) -> None:
        """A child writes files of its own; the parent's descriptors are the parent's."""
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._rows = self._acks = None
        self._count = 0

"""Upload progress for ``prime-runs sync``: a one-line bar redrawn with ``\\r`` on a terminal,
one plain line per run otherwise (logs and CI output stay readable)."""

from __future__ import annotations

from typing import TextIO

BAR_WIDTH = 28


class Progress:
    """Progress of one run at a time. ``interactive``: redraw a bar in place."""

    def __init__(self, stream: TextIO, *, interactive: bool) -> None:
        self._stream = stream
        self._interactive = interactive
        self._label = ""
        self._total = 0
        self._done = 0
        self._drawn = 0

    def start(self, label: str, total: int, what: str) -> None:
        self._label, self._total, self._done = label, max(0, total), 0
        if self._interactive:
            self._draw()
        elif total:
            self._write(f"{label}: uploading {what}\n")

    def advance(self, n: int) -> None:
        if n <= 0:
            return
        self._done = min(self._total, self._done + n) if self._total else self._done + n
        if self._interactive:
            self._draw()

    def finish(self) -> None:
        """Clear the bar so the run's result line starts on a clean line."""
        if self._interactive and self._drawn:
            self._write("\r" + " " * self._drawn + "\r")
            self._drawn = 0

    def _draw(self) -> None:
        total = self._total or 1
        filled = BAR_WIDTH * min(self._done, total) // total
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        text = f"{self._label} [{bar}] {self._done}/{self._total}"
        pad = max(0, self._drawn - len(text))
        self._write("\r" + text + " " * pad)
        self._drawn = len(text)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stderr must not fail the upload

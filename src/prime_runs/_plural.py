"""A count with its noun, singular or plural as the count needs: the one place every
message that counts things (the CLI, finish() and sync reports) builds ``1 trace`` and
``2 traces``."""

from __future__ import annotations


def quantity(n: int, noun: str, plural: str | None = None) -> str:
    """``1 trace``, ``0 traces``, ``2 traces``. ``plural`` when it is not ``noun + "s"``; a
    phrase with its verb agrees too: ``quantity(n, "record was", "records were")``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"

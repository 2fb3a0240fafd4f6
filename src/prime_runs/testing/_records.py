"""What the stand-in remembers about each request it received."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(repr=False)
class RecordedRequest:
    """One request the stand-in received, in arrival order.

    ``path`` excludes the query string (see ``query``). ``headers`` has lower-case keys.
    ``json`` is the parsed body of platform requests (None for uploads and bodyless
    requests). ``status`` is what the stand-in answered; it is set before the answer is
    written, and stays None when the connection was dropped without an answer.

    Upload-only fields: ``line_format`` ("trace" or "episode"), ``idempotency_key``,
    ``lines`` (the parsed JSONL records, in order), ``context`` (the metadata part's
    context map), ``replayed`` (True when a committed receipt was replayed) and
    ``error_code`` (the code of the error envelope answered, if any).
    """

    method: str
    path: str
    route: str
    headers: dict[str, str]
    query: dict[str, str] = field(default_factory=dict)
    json: Any = None
    status: int | None = None
    body_size: int = 0
    line_format: str | None = None
    idempotency_key: str | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    gzip: bool = False
    replayed: bool = False
    error_code: str | None = None

    def __repr__(self) -> str:
        # Headers are left out on purpose: they carry the Authorization credential.
        return (
            f"RecordedRequest(method={self.method!r}, path={self.path!r}, "
            f"route={self.route!r}, status={self.status!r})"
        )

"""What the stand-in remembers about each request it received."""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any

_SHOWN_BODY = 300  # characters of a JSON body that ``summary()`` shows


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

    def summary(self) -> str:
        """One line saying what arrived and what was answered (never a header: the
        Authorization credential stays out), e.g. for ``python -m prime_runs.testing -v``."""
        query = "&".join(f"{k}={v}" for k, v in self.query.items())
        status = "dropped" if self.status is None else str(self.status)
        target = f"{self.path}?{query}" if query else self.path
        parts = [f"{self.method} {target} [{self.route}] -> {status}"]
        if self.json is not None:
            body = _json.dumps(self.json, ensure_ascii=False, separators=(",", ":"))
            cut = len(body) > _SHOWN_BODY
            parts.append(f"json={body[:_SHOWN_BODY]}{'...' if cut else ''}")
        elif self.body_size:
            parts.append(f"{self.body_size} bytes")
        if self.line_format:
            fmt = f"{len(self.lines)} {self.line_format} line{'s' if len(self.lines) != 1 else ''}"
            parts.append(fmt + (" gzip" if self.gzip else ""))
        if self.idempotency_key:
            parts.append(f"key={self.idempotency_key[:19]}...")
        if self.replayed:
            parts.append("replayed")
        if self.error_code:
            parts.append(f"error={self.error_code}")
        return "  ".join(parts)

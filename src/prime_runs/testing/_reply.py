"""The request and answer objects passed between the HTTP layer and the route handlers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from prime_runs.testing._records import RecordedRequest

VARIANTS = ("N", "S", "S-ignore")
TRACES_MODES = ("enabled", "service_not_enabled", "forbidden")


@dataclass
class Settings:
    """Behaviour switches a test may change while the server runs."""

    api_key: str
    variant: str = "N"
    traces_mode: str = "enabled"
    check_time_window: bool = False
    keep_documents: bool = True
    # The sample listing's order (Appendix B names none): append order, as the SDK assumes;
    # "newest" lists the latest rows first, for clients that must not rely on the order.
    samples_order: str = "append"
    base_url: str = ""
    # Teams allowed to register training runs (None: every team); others get 403.
    train_teams: frozenset[str] | None = None


@dataclass
class Call:
    """One request as the handlers see it: body read, JSON parsed at most once."""

    method: str
    route: str
    params: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    record: RecordedRequest
    json: Any = None


@dataclass
class Reply:
    """An answer: status, JSON body (None for an empty body) and extra headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        if self.body is None:
            return b""
        return json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode()


def detail(status: int, message: Any) -> Reply:
    """A platform (FastAPI-style) error: ``{"detail": ...}``."""
    return Reply(status, {"detail": message})


def traces_error(status: int, code: str | None, message: str) -> Reply:
    """A Prime Traces error envelope: ``{"error": {"code", "message"}}``."""
    return Reply(status, {"error": {"code": code, "message": message}})

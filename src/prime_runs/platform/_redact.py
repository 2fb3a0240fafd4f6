"""Presigned URLs kept out of log lines: their query string is a write credential.

An object-store upload URL (``...?X-Amz-Credential=...&X-Amz-Signature=...``) lets anyone
who reads it write the object for as long as it is valid (an hour). ``httpx`` logs every
request's full URL at INFO, so an application that configures DEBUG (or INFO) logging
would write it to its logs. While :func:`secret_query` is active in a thread, ``httpx``'s
records emitted by that thread have every URL query replaced; the application's own
requests (other threads, or this one outside the block) are left as they are. The API key
travels in a header, which ``httpx`` never logs.
"""

from __future__ import annotations

import contextvars
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

REDACTED = "?[redacted]"
_QUERY = re.compile(r"\?[^\s\"'<>]*")
_active: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "prime_runs_secret_query", default=False
)


def redact_queries(text: str) -> str:
    """``text`` with every URL query (``?`` up to the next space or quote) replaced."""
    return _QUERY.sub(REDACTED, text)


class _SecretQueryFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _active.get():
            record.msg = redact_queries(record.getMessage())
            record.args = ()
        return True


_FILTER = _SecretQueryFilter()
_install_lock = threading.Lock()


def _install() -> None:
    # Once per process, on the logger httpx writes its request lines to (a logger's
    # filters see the records created on it, before any handler does).
    with _install_lock:
        httpx_logger = logging.getLogger("httpx")
        if _FILTER not in httpx_logger.filters:
            httpx_logger.addFilter(_FILTER)


@contextmanager
def secret_query() -> Iterator[None]:
    """Requests sent by this thread inside the block are logged without their query."""
    _install()
    token = _active.set(True)
    try:
        yield
    finally:
        _active.reset(token)

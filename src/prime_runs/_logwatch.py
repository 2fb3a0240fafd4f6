"""Telling when OpenTelemetry logs a warning the SDK acts on (an ended span written to, a
provider refused as the global one): a logging filter that sees the message and never
hides it. OpenTelemetry has no other signal for either."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_lock = threading.Lock()
_watched: set[tuple[str, str]] = set()


class _Watcher(logging.Filter):
    def __init__(self, prefix: str, seen: Callable[[], None]) -> None:
        super().__init__()
        self._prefix = prefix
        self._seen = seen

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            if record.getMessage().startswith(self._prefix):
                self._seen()
        except Exception:  # a log filter must never fail the caller
            pass
        return True


def watch(logger: str, prefix: str, seen: Callable[[], None]) -> None:
    """Call ``seen`` on the logging thread whenever ``logger`` logs a message that starts
    with ``prefix``; a second call for the same pair does nothing."""
    with _lock:
        if (logger, prefix) in _watched:
            return
        _watched.add((logger, prefix))
    logging.getLogger(logger).addFilter(_Watcher(prefix, seen))

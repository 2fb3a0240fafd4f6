"""Numbers read from the environment for every request or export: the in-flight window
and the ``OTEL_*`` delays. Read at each use, not once (tests and operators change them
while a process runs); a bad value warns and falls back, since these are read on the
delivery path, where raising would drop a record.
"""

from __future__ import annotations

import logging
import os

from prime_runs.settings import INFLIGHT_WINDOW_ENV

logger = logging.getLogger("prime_runs")


def positive_env_int(name: str, default: int) -> int:
    """An ``OTEL_*`` setting that is a positive integer (a size, or milliseconds): its value
    where set and valid, else ``default``, with one warning naming what was wrong."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value > 0:
        return value
    logger.warning("prime-runs: %s=%r is not a positive integer; using %d", name, raw, default)
    return default


_WARNED: set[str] = set()


def inflight_window(timeout: float) -> float:
    """Seconds after a request is sent during which the platform may still store it: the
    request's ``timeout``, unless ``PRIME_RUNS_INFLIGHT_WINDOW`` says otherwise (a
    non-negative number; anything else is ignored with a warning)."""
    raw = os.environ.get(INFLIGHT_WINDOW_ENV, "").strip()
    if not raw:
        return timeout
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value >= 0 and value == value and value != float("inf"):
        return value
    if raw in _WARNED:
        return timeout
    _WARNED.add(raw)  # read for every request: said once
    logger.warning(
        "prime-runs: %s=%r is not a number of seconds; using %g", INFLIGHT_WINDOW_ENV, raw, timeout
    )
    return timeout

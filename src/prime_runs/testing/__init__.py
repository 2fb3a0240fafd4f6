"""A stand-in for the Prime platform API and Prime Traces, for hermetic tests.

``StandInPlatform`` is a real HTTP server on 127.0.0.1 running in a background thread.
Point the SDK (or any producer) at it with ``platform.env()``, inject faults with
``fail()`` / ``stall()`` / ``outage()``, and inspect what arrived through ``requests``,
``evaluations``, ``samples()``, ``traces``, ``episodes`` and ``receipts``. The pytest
plugin in ``prime_runs.testing.plugin`` provides the ``prime_platform`` and ``prime_env``
fixtures. See docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prime_runs.testing._records import RecordedRequest
    from prime_runs.testing._routes import ROUTES
    from prime_runs.testing._standin import StandInPlatform

# Loaded on first use: the pytest plugin (a submodule) is imported by every pytest
# session of every user who installs prime-runs, and must not start a server module then.
_SOURCES = {"ROUTES": "._routes", "RecordedRequest": "._records", "StandInPlatform": "._standin"}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'prime_runs.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = ["ROUTES", "RecordedRequest", "StandInPlatform"]

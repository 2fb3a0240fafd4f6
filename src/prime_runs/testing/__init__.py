"""A stand-in for the Prime platform API and Prime Traces, for hermetic tests.

``StandInPlatform`` is a real HTTP server on 127.0.0.1 running in a background thread.
Point the SDK (or any producer) at it with ``platform.env()``, inject faults with
``fail()`` / ``stall()`` / ``outage()``, and inspect what arrived through ``requests``,
``evaluations``, ``samples()``, ``traces``, ``episodes`` and ``receipts``. The pytest
plugin in ``prime_runs.testing.plugin`` provides the ``prime_platform`` and ``prime_env``
fixtures. See docs/testing.md.
"""

from __future__ import annotations

from ._records import RecordedRequest
from ._routes import ROUTES
from ._standin import StandInPlatform

__all__ = ["ROUTES", "RecordedRequest", "StandInPlatform"]

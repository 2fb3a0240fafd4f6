"""Span and trace ids that ``random.seed()`` cannot repeat.

OpenTelemetry's default ``RandomIdGenerator`` draws from the ``random`` module,
so a producer that calls ``random.seed(42)`` for reproducible sampling gets the
same trace ids in every run: two runs' spans collide in any tracing backend.
These ids come from a private generator seeded from ``os.urandom``: the
application's seeding never touches it, and it costs a fraction of an
``os.urandom`` call per id. A forked child reseeds it, so parent and child
never hand out the same ids.
"""

from __future__ import annotations

import os
import random

from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import INVALID_SPAN_ID, INVALID_TRACE_ID

import prime_runs._forking as _forking


class SecureIdGenerator(IdGenerator):
    """An ``IdGenerator`` with its own generator, seeded from the OS (and again after fork)."""

    def __init__(self) -> None:
        self._random = random.Random(os.urandom(32))
        _forking.in_child(self._reseed)

    def _reseed(self) -> None:
        self._random.seed(os.urandom(32))

    def generate_span_id(self) -> int:
        while True:
            value = self._random.getrandbits(64)
            if value != INVALID_SPAN_ID:
                return value

    def generate_trace_id(self) -> int:
        while True:
            value = self._random.getrandbits(128)
            if value != INVALID_TRACE_ID:
                return value


#: The one instance the SDK hands to the providers it creates.
ID_GENERATOR = SecureIdGenerator()

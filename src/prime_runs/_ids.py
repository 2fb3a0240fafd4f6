"""Span and trace ids that ``random.seed()`` cannot repeat.

OpenTelemetry's default ``RandomIdGenerator`` draws from the ``random`` module,
so a producer that calls ``random.seed(42)`` for reproducible sampling gets the
same trace ids in every run: two runs' spans collide in any tracing backend.
These ids come from ``os.urandom`` instead. Nothing is buffered, so a forked
child can never hand out ids its parent already used.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import INVALID_SPAN_ID, INVALID_TRACE_ID


class SecureIdGenerator(IdGenerator):
    """An ``IdGenerator`` backed by the operating system's CSPRNG (``os.urandom``)."""

    def generate_span_id(self) -> int:
        while True:
            value = int.from_bytes(os.urandom(8), "big")
            if value != INVALID_SPAN_ID:
                return value

    def generate_trace_id(self) -> int:
        while True:
            value = int.from_bytes(os.urandom(16), "big")
            if value != INVALID_TRACE_ID:
                return value


#: The one instance the SDK hands to the providers it creates (it holds no state).
ID_GENERATOR = SecureIdGenerator()

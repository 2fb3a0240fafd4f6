"""Every private OpenTelemetry name prime-runs relies on, in one place.

OpenTelemetry has no public way to do these two things, so the SDK's own private names are
used, each checked by ``tests/test_otel_private.py`` (which fails if a release changes one):

- ``SUPPRESS_KEYS``: the context keys instrumentations read to stay quiet. The SDK's own
  uploads are made with them set (``suppress_instrumentation()`` below), so an httpx
  instrumentation of the user's does not trace them. The public helper
  (``opentelemetry.instrumentation.utils.suppress_instrumentation``) lives in a package that
  is not a dependency; it sets the same keys.

- ``span_processors``: the processors of the provider that made a span (the SDK span's
  ``_span_processor``, the provider's multi-processor, and its ``_span_processors`` tuple,
  which grows as processors are added). A processor added after a run span started never
  saw it start; some (MLflow's) then fail on every span under it (``_late_starts``).
  ``provider_processors``: the same tuple from the provider (its ``_active_span_processor``),
  to flush other tools' processors on our provider at exit (``_providers``).

One more is private by OpenTelemetry's own naming rather than by choice: the logs signal
(``opentelemetry._logs``, ``opentelemetry.sdk._logs``), still named as experimental in every
release. ``_genai/log_processor.py`` imports it, lazily (on the first ``init()`` or
``configure_exporter()``), bridging the releases that renamed its exporter classes; the
same test checks that the names it reads are there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context

# opentelemetry-instrumentation's is_instrumentation_enabled() reads the plain key too.
SUPPRESS_KEYS: tuple[str, ...] = tuple(
    key
    for key in (
        "suppress_instrumentation",
        getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None),
        getattr(otel_context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None),
    )
    if isinstance(key, str)
)


@contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Run the block with OpenTelemetry instrumentation switched off for this context."""
    ctx = otel_context.get_current()
    for key in SUPPRESS_KEYS:
        ctx = otel_context.set_value(key, True, ctx)
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def span_processors(span: object) -> tuple[object, tuple[Any, ...]]:
    """The multi-processor of the provider that made ``span`` and the processors it holds
    now (``(None, ())`` for a span that is not the SDK's)."""
    multi = getattr(span, "_span_processor", None)
    found = getattr(multi, "_span_processors", ())
    return multi, found if isinstance(found, tuple) else ()


def provider_processors(provider: object) -> tuple[Any, ...]:
    """The processors added to an SDK ``provider`` (its ``_active_span_processor``'s)."""
    multi = getattr(provider, "_active_span_processor", None)
    found = getattr(multi, "_span_processors", ())
    return found if isinstance(found, tuple) else ()

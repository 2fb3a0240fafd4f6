"""The deadline of the provider ``force_flush`` this thread is in, for our exporters.

``TracerProvider.force_flush(timeout)`` asks its span processors in turn, each with what
is left of the timeout. OpenTelemetry's ``BatchSpanProcessor`` (since 1.3x) ignores its
share: it exports its whole queue on the calling thread, each batch bounded only by the
exporter's own timeout (``OTEL_BSP_EXPORT_TIMEOUT``). In the pipeline the docs show (the
run processor, then a user's ``BatchSpanProcessor(PrimeRunsExporter())``), a flush whose
uploads stalled spent its whole timeout in the run processor and then as long again in
the user's processor, re-sending what the run processor had just given up on.

So the run processor's ``force_flush`` notes its deadline, and our exports keep to it:

- an export that starts, on any thread, before the deadline ends by it. A batch
  processor's worker thread may be in an export when the flush reaches that processor,
  whose ``force_flush`` then waits for it (one export at a time);
- an export on the flushing thread ends by it even after it: the batch processor's own
  export in ``force_flush``. Past the deadline such an export returns at once, its records
  still owed (the next export, ``flush()``/``finish()`` or ``prime-runs sync`` sends
  them). This holds until the thread's next span hook in the run processor (the
  application has moved on from the flush) or its next ``force_flush``.

An export already under way when the flush began keeps its own timeout: a request in
flight cannot be cut short.
"""

from __future__ import annotations

import threading


class _Flush(threading.local):
    until: float | None = None  # a time.monotonic() value


_flush = _Flush()
_lock = threading.Lock()
_any_until = 0.0  # the deadline of the flush begun last, in any thread


def begin(deadline: float) -> None:
    """This thread is in a provider ``force_flush`` that ends at ``deadline``."""
    global _any_until
    _flush.until = deadline
    with _lock:
        _any_until = deadline  # the one that matters now; an earlier one may have ended


def moved_on() -> None:
    """This thread has left the flush (a span hook of its own runs)."""
    if _flush.until is not None:
        _flush.until = None


def capped(until: float, now: float) -> float:
    """``until`` (an export starting at ``now``), or the deadline of a flush it is part
    of if that comes first."""
    mine = _flush.until
    if mine is not None and mine < until:
        until = mine
    return _any_until if now < _any_until < until else until

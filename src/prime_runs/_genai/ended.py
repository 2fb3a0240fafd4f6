"""Attributes written on an episode span after it ended: lost, and said so once per run.

Some instrumentations write a model call's attributes onto the *current* span from a
background thread once the call's response is in (LiteLLM's ``callbacks = ["otel"]``). By
then the episode span may have ended; the SDK drops the write and logs "Setting attribute on
ended span." on its own logger. The record was already built without that call, so the run
gets a report naming the episode and the fix. The writing thread still has the episode as its
current span (the instrumentation chose it as such), which is how the episode is found.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

from opentelemetry import trace

import prime_runs._logwatch as _logwatch

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

SDK_LOGGER = "opentelemetry.sdk.trace"
_ENDED = "Setting attribute on ended span"
MAX_REMEMBERED = 4096  # recently ended episodes looked up by the log filter

_lock = threading.Lock()
_recent: OrderedDict[tuple[int, int], tuple[weakref.ReferenceType[RunState], str]] = OrderedDict()
_reported: weakref.WeakSet[RunState] = weakref.WeakSet()

MESSAGE = (
    "{where}: attributes were written on it after it ended, and OpenTelemetry dropped them: "
    "the model calls they describe are not in the record (LiteLLM's otel callback writes each "
    "call onto the current span from a background thread). Instrument the calls with spans "
    "of their own, e.g. openinference-instrumentation-litellm (docs/integrations.md, LiteLLM); "
    "reported once per run"
)


def remember(trace_id: int, span_id: int, state: RunState, where: str) -> None:
    """An episode span ended and was recorded: writes on it from now on are lost."""
    with _lock:
        _recent[(trace_id, span_id)] = (weakref.ref(state), where)
        while len(_recent) > MAX_REMEMBERED:
            _recent.popitem(last=False)
    _logwatch.watch(SDK_LOGGER, _ENDED, _written_after_end)


def _written_after_end() -> None:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return
    with _lock:
        found = _recent.get((context.trace_id, context.span_id))
        if found is None:
            return
        state = found[0]()
        if state is None or state in _reported:
            return
        _reported.add(state)
    state.report(MESSAGE.format(where=found[1]))

"""Training metrics the OpenTelemetry way: ``step`` spans and ``step`` events.

Inside a training run's trace, a span named ``step`` that carries ``prime.train.step``
(an int) becomes one metrics row when it ends, exactly as ``run.log_metrics()`` would
send it: each ``prime.train.metrics.<name>`` attribute is the metric ``<name>``. An
event named ``step`` with the same attributes, on any span of the run's trace but the
``run`` span itself, becomes a row when its span ends (the ``run`` span ends after the
run has closed, too late for its rows). See docs/training.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

import prime_runs._runs.exithooks as _exit
import prime_runs._runs.training as _training

logger = logging.getLogger("prime_runs")

STEP_SPAN = "step"
STEP_EVENT = "step"
STEP = "prime.train.step"
METRIC_PREFIX = "prime.train.metrics."


def metrics_of(attributes: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The row's metrics and step from a ``step`` span's (or event's) attributes."""
    values = {
        key[len(METRIC_PREFIX) :]: value
        for key, value in attributes.items()
        if key.startswith(METRIC_PREFIX) and len(key) > len(METRIC_PREFIX)
    }
    step = attributes.get(STEP)
    return values, step if isinstance(step, int) and not isinstance(step, bool) else None


class StepProcessor(SpanProcessor):
    """Turns ``step`` spans and events of a training run into its metrics rows."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        rows = []
        if span.name == STEP_SPAN and STEP in (span.attributes or {}):
            rows.append(span.attributes or {})
        if span.name != "run":
            rows.extend(
                e.attributes or {}
                for e in span.events
                if e.name == STEP_EVENT and STEP in (e.attributes or {})
            )
        if not rows or span.context is None:
            return
        state = _state_of(span.context.trace_id)
        if state is None:
            return
        for attributes in rows:
            values, step = metrics_of(attributes)
            try:
                _training.log_metrics(state, values, step)
            except Exception as exc:  # a span processor never raises into the SDK
                logger.warning("prime-runs: a step span's metrics were not logged: %s", exc)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _state_of(trace_id: int) -> Any:
    """The training run whose ``run`` span heads ``trace_id``, or None."""
    for run in _exit.live_runs():
        if run.span.get_span_context().trace_id == trace_id:
            state = run._state
            return state if _training.side_of(state) is not None else None
    return None

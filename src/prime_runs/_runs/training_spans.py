"""Training metrics the OpenTelemetry way: ``step`` spans and ``step`` events.

Inside a training run's trace, a span named ``step`` that carries ``prime.train.step``
(an int) becomes one metrics row when it ends, exactly as ``run.log_metrics()`` would
send it: each ``prime.train.metrics.<name>`` attribute is the metric ``<name>``. An
event named ``step`` with the same attributes, on any span of the run's trace but the
``run`` span itself, becomes a row when its span ends (an ``init()`` run's ``run`` span
ends after the run has closed, too late for its rows). ``RunProcessor`` hands every span
of a run to ``log_steps`` as it ends, whether ``init()`` or a raw ``run`` span opened the
run. See docs/training.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

import prime_runs._runs.training as _training
from prime_runs import semconv
from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")


def metrics_of(attributes: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The row's metrics and step from a ``step`` span's (or event's) attributes."""
    prefix = semconv.TRAIN_METRICS
    values = {
        key[len(prefix) :]: value
        for key, value in attributes.items()
        if key.startswith(prefix) and len(key) > len(prefix)
    }
    step = attributes.get(semconv.TRAIN_STEP)
    return values, step if isinstance(step, int) and not isinstance(step, bool) else None


def _rows(span: ReadableSpan) -> list[Mapping[str, Any]]:
    rows: list[Mapping[str, Any]] = []
    attributes = span.attributes or {}
    if span.name == semconv.STEP_SPAN and semconv.TRAIN_STEP in attributes:
        rows.append(attributes)
    rows.extend(
        e.attributes or {}
        for e in span.events
        if e.name == semconv.STEP_SPAN and semconv.TRAIN_STEP in (e.attributes or {})
    )
    return rows


def log_steps(state: RunState, span: ReadableSpan) -> None:
    """The metrics rows a span of ``state``'s run carries, logged as ``log_metrics`` would
    (a span of an evaluation carries none). Never raises: a span hook must not."""
    if _training.side_of(state) is None:
        return
    for attributes in _rows(span):
        values, step = metrics_of(attributes)
        try:
            _training.log_metrics(state, values, step)
        except Exception as exc:
            logger.warning("prime-runs: a step span's metrics were not logged: %s", exc)

"""``record_score``: an evaluation result on a span, in the GenAI conventions' own form."""

from __future__ import annotations

import math

from opentelemetry import trace

import prime_runs._genai.names as names
from prime_runs.errors import RecordError


def record_score(
    name: str,
    value: float | None,
    *,
    label: str | None = None,
    explanation: str | None = None,
    span: trace.Span | None = None,
) -> None:
    """Add a ``gen_ai.evaluation.result`` event to ``span`` (default: the current span).

    Under a run, the episode the span belongs to gets ``rewards[name] = {score, weight: 1.0,
    label, explanation}``. Raises ``RecordError`` for a name that is not a non-empty string,
    a value that is not a finite number (or None), or no recording span to attach it to.
    """
    if not isinstance(name, str) or not name:
        raise RecordError(f"record_score: name must be a non-empty string, got {name!r}")
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    ):
        raise RecordError(f"record_score: value must be a finite number or None, got {value!r}")
    target = span if span is not None else trace.get_current_span()
    if not target.is_recording():
        raise RecordError(
            "record_score: no recording span to attach the score to; call it inside the "
            "episode span (or pass span=)"
        )
    attributes: dict[str, str | float] = {names.EVALUATION_NAME: name}
    if value is not None:
        attributes[names.EVALUATION_SCORE] = float(value)
    if label is not None:
        attributes[names.EVALUATION_LABEL] = str(label)
    if explanation is not None:
        attributes[names.EVALUATION_EXPLANATION] = str(explanation)
    target.add_event(names.EVALUATION_EVENT, attributes)

"""Why an episode holds no model call: what its spans carried instead, and what to enable.

An episode built from spans with no call the mapping reads is recorded empty; the report
("nothing mapped") names the attribute namespaces it did see (``langfuse.observation.*``,
``mlflow.*``) so the reader knows which tool made them and what to add beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opentelemetry.sdk.trace import ReadableSpan

# Namespaces the mapping reads or the SDK writes: never "foreign".
_READ = ("gen_ai.", "prime.", "openinference.", "llm.", "input.", "output.")
MAX_NAMESPACES = 8
DOCS = "docs/integrations.md"

_HINTS = {
    "langfuse": "Langfuse's own spans carry no GenAI attributes: instrument the model client "
    "with an OpenTelemetry GenAI or OpenInference instrumentation beside it",
    "mlflow": "MLflow's autolog spans carry mlflow.* attributes only: instrument the model "
    "client with an OpenTelemetry GenAI or OpenInference instrumentation beside it",
}
_DEFAULT = (
    "instrument the model client with an OpenTelemetry GenAI or OpenInference instrumentation"
)


def namespace(key: str) -> str:
    parts = key.split(".")
    return ".".join(parts[:2] if len(parts) > 2 else parts[:1]) + ".*"


def namespaces(spans: Iterable[ReadableSpan]) -> list[str]:
    found: set[str] = set()
    for span in spans:
        for key in span.attributes or {}:
            if not key.startswith(_READ):
                found.add(namespace(key))
    return sorted(found)


def explain(spans: Sequence[ReadableSpan]) -> str:
    """The "nothing mapped" detail for an episode whose ``spans`` hold no call."""
    if not spans:
        return (
            "nothing mapped: no span ended under it, so its model calls (if any) reached no "
            "run processor: made on another tracer provider, or not instrumented; "
            f"{_DEFAULT} on the provider the run processor is on (see {DOCS})"
        )
    seen = namespaces(spans)
    tools = {name.split(".", 1)[0] for name in seen}
    hint = next((_HINTS[t] for t in sorted(tools) if t in _HINTS), _DEFAULT)
    shown = ", ".join(seen[:MAX_NAMESPACES]) or "no attributes"
    more = f" and {len(seen) - MAX_NAMESPACES} more" if len(seen) > MAX_NAMESPACES else ""
    return (
        f"nothing mapped: its {len(spans)} spans carry {shown}{more}, and none a model call "
        f"the mapping reads; {hint} (see {DOCS})"
    )

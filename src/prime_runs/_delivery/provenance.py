"""Where a run's uploads say they came from: the Prime Traces upload context.

The context is provenance only (a map of strings, filtered by equality; platform contract
§8.9): the SDK, the run's type, its framework and model, and the attributes of the
OpenTelemetry ``Resource`` the run was traced under (``service.name``,
``OTEL_RESOURCE_ATTRIBUTES``, the provider's own), so a stored document can be traced back
to the service that produced it. What the SDK fills in by itself says nothing about that
and is left out (``telemetry.sdk.*``, the ``unknown_service`` name, the random
``service.instance.id`` of newer SDKs), so a run traced without a Resource of its own sends
exactly 0.1.4's context.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SOURCE = "prime-runs"
MAX_ATTRIBUTES = 32
MAX_VALUE_CHARS = 256
_OURS = frozenset({"source", "run_type", "framework", "model"})
_SKIPPED_PREFIX = "telemetry.sdk."
_SKIPPED = frozenset({"service.instance.id"})
_DEFAULT_SERVICE = "unknown_service"


def from_resource(resource: Any) -> dict[str, str]:
    """The attributes of an OpenTelemetry ``Resource`` (or a mapping) that an upload
    context carries, as strings; empty for anything else."""
    attributes = getattr(resource, "attributes", resource)
    if not isinstance(attributes, Mapping):
        return {}
    out: dict[str, str] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or key in _OURS or key in _SKIPPED:
            continue
        if key.startswith(_SKIPPED_PREFIX):
            continue
        if key == "service.name" and str(value).startswith(_DEFAULT_SERVICE):
            continue
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        if value is None:
            continue
        out[key] = str(value)[:MAX_VALUE_CHARS]
        if len(out) >= MAX_ATTRIBUTES:
            break
    return out


def upload_context(
    *,
    run_type: str,
    framework: object = None,
    model: object = None,
    resource: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The upload context of a run's Prime Traces uploads (the same live and in sync)."""
    context = dict(resource or {})
    context.update(source=SOURCE, run_type=run_type)
    if framework:
        context["framework"] = str(framework)
    if model:
        context["model"] = str(model)
    return context

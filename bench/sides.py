"""The measured sides: one small adapter each, with the same four calls.

``start()`` opens the run (not measured: registration is a blocking call by
design), ``log(payload)`` hands one episode over, ``flush(timeout)`` waits for
the uploads, ``finish()`` closes the run and returns what the side itself says
it stored. Each adapter imports its SDK lazily: the peer's runs under the
peer's interpreter (where ``prime_runs`` is version 0.1.4), the others under
the project's.
"""

from __future__ import annotations

import json
from typing import Any

from workload import as_record

#: Which interpreter runs each side: "ours" (the project's venv) or "peer".
INTERPRETER = {
    "ours": "ours",
    "ours-nosamples": "ours",
    "ours-offline": "ours",
    "peer": "peer",
    "json": "ours",
    "otel": "ours",
}
#: Sides that talk to a stand-in platform (the floors never touch the network).
#: ``ours-offline`` writes only its archive; ``prime-runs sync`` then uploads it.
NETWORKED = ("ours", "ours-nosamples", "ours-offline", "peer")

_RUN = {"name": "bench", "environments": ["bench"], "model": "bench/model", "framework": "bench"}


class JsonFloor:
    """Floor 1: JSON-encode each record once and keep nothing."""

    def start(self) -> dict[str, Any]:
        return {}

    def log(self, payload: Any) -> None:
        json.dumps(as_record(payload), ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def flush(self, timeout: float) -> bool:
        return True

    def finish(self) -> dict[str, Any]:
        return {}


class OtelFloor:
    """Floor 2: an OpenTelemetry span per episode, carrying the encoded record as
    an attribute, through a ``BatchSpanProcessor`` into an exporter that drops
    everything."""

    def start(self) -> dict[str, Any]:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class _NoOp(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        self._provider = TracerProvider()
        self._provider.add_span_processor(BatchSpanProcessor(_NoOp()))
        self._tracer = self._provider.get_tracer("bench")
        self._run = self._tracer.start_span("run")
        from opentelemetry import trace

        self._context = trace.set_span_in_context(self._run)
        return {}

    def log(self, payload: Any) -> None:
        record = as_record(payload)
        encoded = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        span = self._tracer.start_span(
            "episode",
            context=self._context,
            attributes={"prime.record": encoded, "prime.episode.id": str(record.get("id"))},
        )
        span.end()

    def flush(self, timeout: float) -> bool:
        return self._provider.force_flush(int(timeout * 1000))

    def finish(self) -> dict[str, Any]:
        self._run.end()
        self._provider.force_flush()
        self._provider.shutdown()
        return {}


class Peer:
    """prime-runs 0.1.4 in its default configuration (Prime Traces only)."""

    def start(self) -> dict[str, Any]:
        import prime_runs as pr

        self._run = pr.init(**_RUN)
        return {"run_id": self._run.id, "version": pr.__version__}

    def log(self, payload: Any) -> None:
        self._run.log_episodes([payload])

    def flush(self, timeout: float) -> bool:
        return bool(self._run.flush(timeout=timeout))

    def finish(self) -> dict[str, Any]:
        run = self._run
        run.finish({"bench": 1.0})
        written = (run.summary.get("prime_runs") or {}).get("traces_episodes_written")
        return {
            "acknowledged": written,
            "dropped": run.dropped_records,
            "failed": dict(run.failed_records),
            "errors": len(run.errors),
        }


class Ours:
    """This project, default configuration (dual-write) or with the sample table off;
    ``mode="offline"`` for a run that ``prime-runs sync`` uploads later."""

    def __init__(self, samples: bool = True, extra: dict[str, Any] | None = None) -> None:
        self._extra: dict[str, Any] = {"mode": None}
        if not samples:
            self._extra["samples"] = False
        self._extra.update(extra or {})

    def start(self) -> dict[str, Any]:
        import prime_runs as pr

        self._run = pr.init(**_RUN, **self._extra)
        return {"run_id": self._run.id, "version": getattr(pr, "__version__", "?")}

    def log(self, payload: Any) -> None:
        self._run.log_episodes([payload])

    def flush(self, timeout: float) -> bool:
        return bool(self._run.flush(timeout))

    def finish(self) -> dict[str, Any]:
        run = self._run
        run.finish({"bench": 1.0})
        return {
            "dropped": run.dropped_records,
            "failed": dict(run.failed_records),
            "errors": len(getattr(run, "errors", []) or []),
        }


def make(side: str, ours_init: dict[str, Any] | None = None) -> Any:
    """The adapter for ``side`` (one of ``INTERPRETER``); ``ours_init`` adds keyword
    arguments to this project's ``pr.init`` (experiments, e.g. ``{"journal": false}``)."""
    if side == "json":
        return JsonFloor()
    if side == "otel":
        return OtelFloor()
    if side == "peer":
        return Peer()
    if side == "ours":
        return Ours(samples=True, extra=ours_init)
    if side == "ours-nosamples":
        return Ours(samples=False, extra=ours_init)
    if side == "ours-offline":
        return Ours(extra={**(ours_init or {}), "mode": "offline"})
    raise ValueError(f"unknown side {side!r}")

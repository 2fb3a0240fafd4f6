"""Add prime-runs to a program that already has its own OpenTelemetry setup.

    python examples/configure_exporter.py

The application owns the ``TracerProvider`` and its exporter (an in-memory one here;
OTLP, Jaeger or the console in real life). ``pr.configure_exporter(provider, ...)``
adds the run processor to it; a span named ``run`` anywhere in the application (here
under a request handler's span) is then a run, and ``pr.log_episodes`` logs into the
run of the current context. The application's exporter still sees every span,
including the run and its episodes, without the record payloads.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from _fixture_records import fresh_episodes
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prime_runs as pr

NUM_EPISODES = 8


def main() -> None:
    # The application's existing setup.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    # One line adds prime-runs; calling it again returns the same processor.
    pr.configure_exporter(provider, mode="offline", dir=os.environ.get("PRIME_RUNS_DIR"))

    tracer = trace.get_tracer("my-app")
    with tracer.start_as_current_span("handle_request"):
        attributes = {
            "prime.run.name": "configure-exporter",
            "prime.run.environments": ["best-of-n", "user-sim"],
            "prime.run.model": "scripted/model",
            "prime.run.config": json.dumps({"num_examples": NUM_EPISODES}),
        }
        with tracer.start_as_current_span("run", attributes=attributes):
            run = pr.current_run()  # the handle of the run in the current context
            assert run is not None
            for episode in fresh_episodes(NUM_EPISODES):
                with tracer.start_as_current_span("rollout"):  # the app's own work
                    pr.log_episodes(episode)
        # Ending the `run` span closes the run, in the background.
    provider.force_flush()  # wait for that close-out (exit would wait too)

    spans = exporter.get_finished_spans()
    counts = Counter(span.name for span in spans)
    run_span = next(span for span in spans if span.name == "run")
    episode_span = next(span for span in spans if span.name == "episode")
    parent = next(span for span in spans if span.context.span_id == run_span.parent.span_id)

    print(f"run {run.id} ({run.mode}, {run.status}): {run.logged_records} episodes logged")
    print(f"archive  {run.archive_path}")
    print()
    print("The application's exporter received:", ", ".join(f"{n} {k}" for k, n in counts.items()))
    print(
        f"  run      under {parent.name!r}; {_attrs(run_span, ('prime.run.id', 'prime.run.mode'))}"
    )
    print(f"  episode  {_attrs(episode_span, ('prime.record.id', 'prime.record.bytes'))}")
    print("           (the record itself went to the archive, not onto the span)")


def _attrs(span: ReadableSpan, keys: tuple[str, ...]) -> str:
    attrs = span.attributes or {}
    return ", ".join(f"{k}={v}" for k, v in attrs.items() if k in keys)


if __name__ == "__main__":
    main()

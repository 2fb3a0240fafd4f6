"""Our exporter in your own OpenTelemetry pipeline: your provider, your BatchSpanProcessor.

    PRIME_API_KEY=... python examples/own_batch_processor.py   # uploads (online)
    python examples/own_batch_processor.py                    # no key: an offline archive

``configure_exporter(provider)`` adds the run processor (the run's lifecycle and its
journal); ``BatchSpanProcessor(PrimeRunsExporter(attach=False))`` is the exporter in your
own processor, tuned with your ``OTEL_BSP_*`` settings. The eval loop below is plain
OpenTelemetry. Each record is delivered once: by whichever of your exporter and the run's
own pipeline claims it first, and at the latest when the run span ends.
"""

from __future__ import annotations

import json

from _fixture_records import fresh_episodes
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import prime_runs as pr
from prime_runs.exporters import PrimeRunsExporter

NUM_EPISODES = 10


def main() -> None:
    provider = TracerProvider(sampler=pr.sampler())  # run and record spans always recorded
    pr.configure_exporter(provider)
    provider.add_span_processor(BatchSpanProcessor(PrimeRunsExporter(attach=False)))
    tracer = provider.get_tracer("my-harness")
    attributes = {"prime.run.name": "own-batch-processor", "prime.run.environments": ["gsm8k"]}
    with tracer.start_as_current_span("run", attributes=attributes) as run_span:
        run_id = run_span.attributes["prime.run.id"]  # type: ignore[attr-defined]
        for episode in fresh_episodes(NUM_EPISODES):
            with tracer.start_as_current_span("episode") as span:
                span.set_attribute("prime.record", json.dumps(episode))
    provider.force_flush()  # waits for the run's close-out
    provider.shutdown()
    print(f"run {run_id}: {NUM_EPISODES} episodes logged as spans and delivered")


if __name__ == "__main__":
    main()

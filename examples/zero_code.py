"""Zero-code OpenTelemetry: a run tracked with no prime-runs call in the program.

    OTEL_TRACES_EXPORTER=prime_runs OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \\
        opentelemetry-instrument python examples/zero_code.py

(``OTEL_TRACES_EXPORTER=console,prime_runs`` prints the spans too.) ``opentelemetry-distro``
defaults metrics and logs to OTLP, whose exporter a plain install lacks: ``none`` keeps
OpenTelemetry's setup from failing on them.

``opentelemetry-instrument`` (from ``opentelemetry-distro``) sets up the SDK's tracer
provider and builds the exporters ``OTEL_TRACES_EXPORTER`` names. ``prime_runs`` is
``prime_runs.exporters.PrimeRunsExporter``, which also attaches the run processor to that
provider: the ``run`` span below registers an evaluation (online with PRIME_API_KEY set,
else an offline archive under PRIME_RUNS_DIR or ./prime-runs), each ``episode`` span is
journaled and uploaded, and ending the ``run`` span finalizes it (process exit waits).
"""

from __future__ import annotations

import json

from _fixture_records import fresh_episodes, reward_of
from opentelemetry import trace

NUM_EPISODES = 10


def main() -> None:
    tracer = trace.get_tracer("my-harness")
    run_attributes = {
        "prime.run.name": "zero-code",
        "prime.run.environments": ["best-of-n"],
        "prime.run.model": "scripted/model",
        "prime.run.framework": "my-harness",
    }
    with tracer.start_as_current_span("run", attributes=run_attributes):
        for episode in fresh_episodes(NUM_EPISODES):
            attributes = {"prime.record": json.dumps(episode), "prime.record.id": episode["id"]}
            attributes["prime.record.reward"] = reward_of(episode)
            with tracer.start_as_current_span("episode", attributes=attributes):
                pass  # the rollout would run here
    print(f"logged {NUM_EPISODES} episodes as spans")


if __name__ == "__main__":
    main()

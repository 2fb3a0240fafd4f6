"""Track a run with plain OpenTelemetry spans: no prime-runs calls in the eval loop.

    python examples/raw_opentelemetry.py

Any producer, in any framework, can emit the span contract (``docs/opentelemetry.md``):
a span named ``run`` with ``prime.run.*`` attributes, and under it one span named
``episode`` per result whose ``prime.record`` attribute holds the record as JSON.
Ending the ``run`` span closes the run. The only prime-runs call is
``configure_exporter()``, once at start-up, which adds the run processor to the
global tracer provider (creating one when none is configured).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from _fixture_records import fresh_episodes, reward_of
from opentelemetry import trace

import prime_runs as pr

NUM_EPISODES = 10


def run_eval(tracer: trace.Tracer) -> str:
    """The eval loop, instrumented with nothing but OpenTelemetry. Returns the run id."""
    run_attributes = {
        "prime.run.name": "raw-opentelemetry",
        "prime.run.environments": ["best-of-n", "user-sim"],
        "prime.run.model": "scripted/model",
        "prime.run.framework": "my-harness",
        "prime.run.tags": ["example"],
        "prime.run.config": json.dumps({"num_examples": NUM_EPISODES}),
    }
    with tracer.start_as_current_span("run", attributes=run_attributes) as run_span:
        # The run processor set the run's id on the span when it started.
        run_id = str(run_span.attributes["prime.run.id"])  # type: ignore[attr-defined]
        for episode in fresh_episodes(NUM_EPISODES):
            episode_attributes = {
                "prime.record": json.dumps(episode),
                "prime.record.id": episode["id"],
                "prime.record.reward": reward_of(episode),
            }
            with tracer.start_as_current_span("episode", attributes=episode_attributes):
                pass  # the rollout would run here
    # Ending the `run` span closes the run, in the background: completed, since no
    # exception escaped (one would have made it failed). With no prime.run.summary
    # attribute, the summary is computed from the episodes.
    return run_id


def main() -> None:
    # The archive goes under PRIME_RUNS_DIR or ./prime-runs.
    processor = pr.configure_exporter(mode="offline")
    run_id = run_eval(trace.get_tracer("my-harness"))
    processor.force_flush()  # wait for the close-out (provider.force_flush() and exit do too)

    root = Path(os.environ.get("PRIME_RUNS_DIR") or "prime-runs")
    archive = root / run_id
    status = json.loads((archive / "status.json").read_text())
    summary = status["summary"]
    print(f"run {run_id}: {status['status']}, {status['logged']} episodes logged")
    print(f"archive  {archive}")
    print(f"summary  avg_reward {summary['avg_reward']:.3f}, avg_error {summary['avg_error']:.3f}")


if __name__ == "__main__":
    main()

"""The OpenTelemetry ``Resource`` a run is traced under (``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_SERVICE_NAME``, a provider's own) reaches the provenance of every stored trace
document, live, joined, from raw spans and through ``prime-runs sync`` (issue 20)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from prime_runs import semconv
from prime_runs.cli import main
from prime_runs.testing import StandInPlatform


def _contexts(platform: StandInPlatform) -> list[dict[str, Any]]:
    uploads = platform.uploads
    assert uploads, "nothing was uploaded"
    return [u["context"] for u in uploads]


def test_resource_attributes_from_the_environment_reach_every_upload(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]], tmp_path: Path
) -> None:
    data = tmp_path / "episodes.json"
    data.write_text(json.dumps(episodes))
    code = (
        "import json, prime_runs as pr\n"
        "run = pr.init(name='resource', environments=['gsm8k'], model='m', "
        "framework='verifiers')\n"
        f"run.log_episodes(json.load(open({str(data)!r})))\n"
        "run.finish(timeout=60)\n"
    )
    env = {
        **os.environ,
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,team=evals",
        "OTEL_SERVICE_NAME": "gsm8k-evals",
    }
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)

    for context in _contexts(prime_env):
        assert context["service.name"] == "gsm8k-evals"
        assert context["deployment.environment"] == "ci" and context["team"] == "evals"
        assert context["source"] == "prime-runs" and context["run_type"] == "eval"
        assert context["model"] == "m" and context["framework"] == "verifiers"
        assert not any(k.startswith("telemetry.sdk.") for k in context)


def test_a_providers_own_resource_reaches_raw_span_runs_and_joins(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes={semconv.RUN_ENVIRONMENTS: ["gsm8k"]}):
        for episode in episodes[:2]:
            with tracer.start_as_current_span(
                "episode", attributes={semconv.RECORD: json.dumps(episode)}
            ):
                pass
        worker = pr.init(join=pr.current_run().context(), tracer_provider=provider)
        worker.log_episodes(episodes[2:4])
        worker.finish()
    provider.force_flush(60_000)
    provider.shutdown()

    contexts = _contexts(prime_env)
    assert sum(len(u["episode_ids"]) for u in prime_env.uploads) == 4
    assert all(c["service.name"] == "agent-svc" for c in contexts), contexts


def test_a_run_without_a_resource_of_its_own_sends_the_plain_context(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    run = pr.init(
        name="plain",
        environments=["gsm8k"],
        model="m",
        framework="f",
        tracer_provider=TracerProvider(),  # the SDK's default Resource only
    )
    run.log_episodes(episodes)
    run.finish(timeout=60)

    expected = {"source": "prime-runs", "run_type": "eval", "framework": "f", "model": "m"}
    assert all(c == expected for c in _contexts(prime_env))


def test_an_offline_runs_resource_is_kept_and_sent_by_sync(
    prime_env: StandInPlatform, tmp_path: Path, episodes: list[dict[str, Any]]
) -> None:
    data = tmp_path / "episodes.json"
    data.write_text(json.dumps(episodes))
    code = (
        "import json, prime_runs as pr\n"
        "run = pr.init(name='later', environments=['gsm8k'], model='m', mode='offline')\n"
        f"run.log_episodes(json.load(open({str(data)!r})))\n"
        "run.finish()\n"
    )
    env = {**os.environ, "OTEL_SERVICE_NAME": "offline-evals"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)

    assert main(["sync"]) == 0  # this process's own service name is not the run's

    assert all(c["service.name"] == "offline-evals" for c in _contexts(prime_env))

"""Helpers for the OpenTelemetry settings tests: a user's provider, a raw run, a script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from prime_runs._journal.archive import RunArchive, list_runs

RUN_ATTRS = {"prime.run.name": "settings", "prime.run.environments": ["gsm8k"]}


def archived(archive: RunArchive) -> list[dict]:
    return [json.loads(data) for _, _, data in archive.iter_records()]


def only_archive(root: Path) -> RunArchive:
    (info,) = list_runs(root)
    return RunArchive(info.path)


def provider_with(
    sampler: Sampler, **kwargs: object
) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, **kwargs)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def raw_run(provider: TracerProvider, episodes: list[dict]) -> None:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        for episode in episodes:
            with tracer.start_as_current_span("tool-call"):  # the user's own span between
                with tracer.start_as_current_span(
                    "episode", attributes={"prime.record": json.dumps(episode)}
                ):
                    pass
    provider.force_flush()  # the run's close-out may continue in the background


def run_script(
    tmp_path: Path, script: str, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, **env},
    )


DROPPING = {
    "always_off": ALWAYS_OFF,
    "traceidratio_0": TraceIdRatioBased(0),
    "parentbased_traceidratio_0": ParentBased(TraceIdRatioBased(0)),
}

SAMPLER_SCRIPT = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
import prime_runs as pr

mode = sys.argv[1]
if mode == "wrapped":
    trace.set_tracer_provider(TracerProvider(sampler=pr.sampler()))  # base from the env
elif mode == "plain":
    trace.set_tracer_provider(TracerProvider())  # the env's sampler alone
pr.configure_exporter(mode="offline")  # "created": makes the provider itself
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("run", attributes={"prime.run.name": "env"}):
    for i in range(4):
        record = {"id": f"ep-{i}", "traces": [{"id": f"tr-{i}", "reward": 1.0}]}
        attributes = {"prime.record": json.dumps(record)}
        with tracer.start_as_current_span("episode", attributes=attributes):
            pass
    pr.log_episodes([{"id": "logged", "traces": [{"id": "tr-logged"}]}])
print("done")
"""

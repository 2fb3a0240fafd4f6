"""Helpers for the OpenTelemetry settings tests: a user's provider, a raw run, a script."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

import _archives
import _support

RUN_ATTRS = {"prime.run.name": "settings", "prime.run.environments": ["gsm8k"]}


def archived(archive: _archives.Archive) -> list[dict]:
    return archive.records()


def only_archive(root: Path) -> _archives.Archive:
    return _archives.only(root)


def archive_of(run_id: str, root: Path | None = None) -> _archives.Archive:
    """The archive of a run named by its folder or by its evaluation id (a raw run span's
    ``prime.run.id`` is its folder's until the evaluation is created, then the platform's)."""
    root = root or Path(os.environ["PRIME_RUNS_DIR"])
    if (root / run_id).is_dir():
        return _archives.Archive(root / run_id)
    for archive in _archives.runs(root):
        platform = archive.description().get("platform")
        if isinstance(platform, dict) and platform.get("id") == run_id:
            return archive
    raise AssertionError(f"no archive of run {run_id} under {root}")


def platform_id(local_id: str, root: Path | None = None, timeout: float = 20.0) -> str:
    """The evaluation id of a run whose archive folder is ``local_id``: a raw run span's
    run is registered in the background, and its run.json names the evaluation once it is
    (waited for, at most ``timeout`` seconds)."""
    archive = archive_of(local_id, root)
    until = time.monotonic() + timeout
    while True:
        platform = archive.description().get("platform")
        if isinstance(platform, dict) and platform.get("id"):
            return str(platform["id"])
        if time.monotonic() >= until:
            raise AssertionError(f"run {local_id} was not registered within {timeout} s")
        time.sleep(0.05)


def evaluation_of(platform: Any, local_id: str) -> dict[str, Any]:
    """What the stand-in holds for the evaluation of the run archived as ``local_id``."""
    eval_id = platform_id(local_id)  # first: ``evaluations`` is a snapshot
    return platform.evaluations[eval_id]


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
    return _support.run_script(tmp_path, script, *args, timeout=120, env=env)


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

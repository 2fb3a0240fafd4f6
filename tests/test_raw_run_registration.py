"""A raw ``run`` span's run is registered off the thread that starts the span (issue 20):
``on_start`` never waits on the network, records logged meanwhile are journaled and
delivered stamped with the evaluation's id once it exists, and a run the platform refuses
goes on offline for ``prime-runs sync``, which registers it once.

Real components: the stand-in platform over HTTP with stalled and failing routes, a real
provider and processor, the CLI as its own process.
"""

from __future__ import annotations

import json
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from _otel import archive_of, platform_id
from _support import run_cli
from prime_runs import semconv
from prime_runs.testing import StandInPlatform

RUN_ATTRS = {semconv.RUN_NAME: "registering", semconv.RUN_ENVIRONMENTS: ["gsm8k"]}


def _log(tracer: trace.Tracer, run_span: Any, episodes: list[dict[str, Any]]) -> float:
    """Record spans under ``run_span``; the longest any one took to start and end."""
    context = trace.set_span_in_context(run_span)
    slowest = 0.0
    for episode in episodes:
        started = time.monotonic()
        tracer.start_span("episode", context, {semconv.RECORD: json.dumps(episode)}).end()
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def _stored_once(platform: StandInPlatform, episodes: list[dict[str, Any]]) -> None:
    writes = platform.episode_writes
    assert len(writes) == len(episodes) and set(writes.values()) == {1}


def test_starting_a_run_span_never_waits_for_a_stalled_platform(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    provider = TracerProvider()
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("app")
    prime_env.stall("eval_create", 60.0)  # until unstall()
    try:
        started = time.monotonic()
        run_span = tracer.start_span("run", attributes=RUN_ATTRS)
        took = time.monotonic() - started
        slowest = _log(tracer, run_span, episodes)
        local_id = str(run_span.attributes[semconv.RUN_ID])
        assert prime_env.evaluations == {}  # not registered yet
    finally:
        prime_env.unstall()
    assert took < 1.0, took  # it used to wait for the create (here: 60 s)
    assert slowest < 1.0, slowest

    eval_id = platform_id(local_id)
    assert eval_id != local_id
    until = time.monotonic() + 10  # set on the span once the sinks are attached
    while run_span.attributes[semconv.RUN_ID] != eval_id and time.monotonic() < until:
        time.sleep(0.02)
    assert run_span.attributes[semconv.RUN_ID] == eval_id
    run_span.end()
    assert provider.force_flush(60_000)
    provider.shutdown()

    evaluation = prime_env.evaluations[eval_id]
    assert (evaluation["finalize_count"], len(prime_env.evaluations)) == (1, 1)
    # Every record logged before the evaluation existed went out once, under its id.
    assert {doc["run"]["id"] for doc in prime_env.traces.values()} == {eval_id}
    _stored_once(prime_env, episodes)
    assert len(prime_env.samples(eval_id)) == len(episodes)
    status = archive_of(local_id).status()
    assert (status["status"], status["closed"]) == ("completed", True)


def test_a_run_the_platform_refuses_goes_offline_and_sync_registers_it_once(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    provider = TracerProvider()
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("app")
    prime_env.fail("eval_create", 401)  # the key is refused: nothing is retried
    run_span = tracer.start_span("run", attributes=RUN_ATTRS)
    local_id = str(run_span.attributes[semconv.RUN_ID])
    _log(tracer, run_span, episodes)
    run_span.end()
    assert provider.force_flush(60_000)
    provider.shutdown()

    archive = archive_of(local_id)
    description = archive.description()
    assert description["mode"] == "offline" and "401" in description["offline_because"]
    assert prime_env.evaluations == {} and prime_env.episode_writes == {}
    assert len(list(archive.iter_records())) == len(episodes)  # journaled, for sync

    done = run_cli("sync", local_id)
    assert done.returncode == 0, done.stdout + done.stderr
    (eval_id,) = prime_env.evaluations  # registered once, by sync
    assert prime_env.evaluations[eval_id]["finalize_count"] == 1
    _stored_once(prime_env, episodes)
    assert {doc["run"]["id"] for doc in prime_env.traces.values()} == {eval_id}

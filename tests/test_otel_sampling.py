"""Head samplers never cost a run its records: ``pr.sampler(base)`` keeps them (from the
constructor, ``OTEL_TRACES_SAMPLER`` and ``opentelemetry-instrument``), and a provider whose
sampler would drop them is named loudly, with the fix."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased

import _archives
import prime_runs as pr
from _otel import (
    DROPPING,
    RUN_ATTRS,
    SAMPLER_SCRIPT,
    archived,
    only_archive,
    provider_with,
    raw_run,
    run_script,
)
from prime_runs.testing import StandInPlatform

# -- head samplers -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_pr_sampler_keeps_every_record_while_the_users_exporter_sees_only_its_sample(
    name, episodes, isolated_env
):
    provider, exporter = provider_with(pr.sampler(DROPPING[name]))
    pr.configure_exporter(provider, mode="offline")
    raw_run(provider, episodes)
    archive = only_archive(isolated_env)
    assert sorted(r["id"] for r in archived(archive)) == sorted(e["id"] for e in episodes)
    assert archive.status()["status"] == "completed"
    assert exporter.get_finished_spans() == ()  # the base sampled nothing


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_pr_sampler_keeps_an_online_raw_run_delivered(name, episodes, prime_env: StandInPlatform):
    provider, exporter = provider_with(pr.sampler(DROPPING[name]))
    pr.configure_exporter(provider)
    raw_run(provider, episodes[:3])
    assert sorted(prime_env.episode_writes) == sorted(e["id"] for e in episodes[:3])
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1
    assert exporter.get_finished_spans() == ()


def test_pr_sampler_leaves_a_sampled_run_exported_as_before(episodes, isolated_env):
    provider, exporter = provider_with(pr.sampler(ParentBased(ALWAYS_ON)))
    pr.configure_exporter(provider, mode="offline")
    raw_run(provider, episodes[:2])
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["episode", "episode", "run", "tool-call", "tool-call"]
    assert len(archived(only_archive(isolated_env))) == 2


def test_pr_sampler_defers_to_the_base_outside_runs_and_keeps_span_attributes():
    run_sampler = pr.sampler(ALWAYS_OFF)
    assert pr.sampler(run_sampler) is run_sampler
    assert "AlwaysOffSampler" in run_sampler.get_description()
    outside = run_sampler.should_sample(None, 12345, "http-request")
    assert not outside.decision.is_recording()
    kept = run_sampler.should_sample(None, 12345, "run", attributes={"prime.run.name": "n"})
    assert kept.decision.is_recording() and not kept.decision.is_sampled()
    assert dict(kept.attributes) == {"prime.run.name": "n"}
    with pytest.raises(pr.ConfigurationError, match="Sampler"):
        pr.sampler("always_off")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_a_dropping_provider_sampler_is_named_with_the_fix(name, episodes, caplog):
    provider, _ = provider_with(DROPPING[name])
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        pr.configure_exporter(provider, mode="offline")
        pr.configure_exporter(provider, mode="offline")
    warnings = [r.getMessage() for r in caplog.records if "drops `run` spans" in r.getMessage()]
    assert len(warnings) == 1  # once
    assert "TracerProvider(sampler=prime_runs.sampler(base))" in warnings[0]
    assert DROPPING[name].get_description() in warnings[0]


def test_the_default_sampler_is_not_warned_about(caplog):
    provider, _ = provider_with(ParentBased(ALWAYS_ON))
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        pr.configure_exporter(provider, mode="offline")
    assert not caplog.records


def test_logging_inside_a_dropped_run_span_warns_and_never_raises(episodes, caplog):
    # An older provider that drops run spans too, still alive: the warning names the newest.
    older, _ = provider_with(DROPPING["traceidratio_0"])
    pr.configure_exporter(older, mode="offline")
    provider, _ = provider_with(ALWAYS_OFF)  # no prime_runs.sampler(): nothing sees the run
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
            pr.log_episodes(episodes[:2])  # 0.2.0 raised RunFinishedError here
            pr.log_traces([{"id": "t"}])
    warnings = [r.getMessage() for r in caplog.records if "not recording" in r.getMessage()]
    assert len(warnings) == 1
    assert "AlwaysOffSampler" in warnings[0]
    assert "TracerProvider(sampler=prime_runs.sampler(base))" in warnings[0]


def test_logging_inside_a_dropped_span_goes_to_the_single_open_run(episodes):
    provider, _ = provider_with(ALWAYS_OFF)
    run = pr.init(name="only", mode="offline")
    with provider.get_tracer("app").start_as_current_span("run"):
        pr.log_episodes(episodes[:3])
    run.finish()
    assert run.logged_records == 3


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_init_runs_deliver_every_record_under_a_dropping_sampler(
    name, episodes, prime_env: StandInPlatform
):
    provider, exporter = provider_with(DROPPING[name])  # no prime_runs.sampler()
    run = pr.init(name="init", environments=["gsm8k"], tracer_provider=provider)
    with run:
        run.log_episodes(episodes[:2])
        pr.log_episodes(episodes[2:3])
    assert run.mode == "online"
    assert sorted(prime_env.episode_writes) == sorted(e["id"] for e in episodes[:3])
    assert prime_env.evaluations[run.id]["finalize_count"] == 1
    assert exporter.get_finished_spans() == ()  # the application's sampler was obeyed


ENV_SAMPLERS = [
    {"OTEL_TRACES_SAMPLER": "always_off"},
    {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
    {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
]


@pytest.mark.parametrize("env", ENV_SAMPLERS, ids=lambda e: e["OTEL_TRACES_SAMPLER"])
@pytest.mark.parametrize("mode", ["wrapped", "created"])
def test_env_samplers_under_pr_sampler_deliver_every_record(env, mode, tmp_path, isolated_env):
    proc = run_script(tmp_path, SAMPLER_SCRIPT, env, mode)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    archive = only_archive(isolated_env)
    ids = sorted(r["id"] for r in archived(archive))
    assert ids == ["ep-0", "ep-1", "ep-2", "ep-3", "logged"]
    assert archive.status()["status"] == "completed"


@pytest.mark.parametrize("env", ENV_SAMPLERS, ids=lambda e: e["OTEL_TRACES_SAMPLER"])
def test_env_samplers_without_pr_sampler_are_reported_loudly(env, tmp_path, isolated_env):
    proc = run_script(tmp_path, SAMPLER_SCRIPT, env, "plain")
    assert proc.returncode == 0, proc.stderr  # pr.log_episodes() did not raise
    assert proc.stdout.strip() == "done"
    assert proc.stderr.count("drops `run` spans") == 1
    assert "TracerProvider(sampler=prime_runs.sampler(base))" in proc.stderr
    assert "not recording are not tracked" in proc.stderr
    assert _archives.runs(isolated_env) == []  # nothing was seen: said so, twice over


INSTRUMENTED_SCRIPT = """
import json
from opentelemetry import trace
import prime_runs as pr

pr.configure_exporter(mode="offline")  # on the provider opentelemetry-instrument set up
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("run", attributes={"prime.run.name": "zero-code"}):
    for i in range(3):
        record = {"id": f"ep-{i}", "traces": [{"id": f"tr-{i}"}]}
        attributes = {"prime.record": json.dumps(record)}
        with tracer.start_as_current_span("episode", attributes=attributes):
            pass
"""


@pytest.mark.parametrize("base", ["always_off", "parentbased_traceidratio:0"])
def test_otel_traces_sampler_prime_runs_under_opentelemetry_instrument(
    base, tmp_path, isolated_env
):
    script = tmp_path / "app.py"
    script.write_text(INSTRUMENTED_SCRIPT)
    env = {
        **os.environ,
        "OTEL_TRACES_SAMPLER": "prime_runs",
        "OTEL_TRACES_SAMPLER_ARG": base,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    proc = subprocess.run(
        [str(instrument), sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "drops `run` spans" not in proc.stderr
    assert '"name"' not in proc.stdout  # the console exporter got nothing: the base's choice
    archive = only_archive(isolated_env)
    assert sorted(r["id"] for r in archived(archive)) == ["ep-0", "ep-1", "ep-2"]


def test_the_sampler_entry_point_reads_its_base(monkeypatch):
    from prime_runs import sampling

    assert "AlwaysOff" in sampling.entry_point_sampler("always_off").get_description()
    ratio = sampling.entry_point_sampler("traceidratio:0.25").get_description()
    assert "TraceIdRatioBased{0.25}" in ratio
    assert "AlwaysOn" in sampling.entry_point_sampler(None).get_description()
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "prime_runs")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "parentbased_always_off")
    assert pr.sampler().get_description() == (
        "prime_runs.sampler{" + ParentBased(ALWAYS_OFF).get_description() + "}"
    )

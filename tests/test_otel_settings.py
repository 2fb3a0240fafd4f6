"""OpenTelemetry's own settings never lose a run's records silently: head samplers,
``OTEL_SDK_DISABLED``, attribute length limits, span events, threads without context and
several open runs. Each case ends with the records delivered or a loud report."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

import prime_runs as pr
from prime_runs._archive import RunArchive, list_runs
from prime_runs.testing import StandInPlatform

RUN_ATTRS = {"prime.run.name": "settings", "prime.run.environments": ["gsm8k"]}


def _records(archive: RunArchive) -> list[dict]:
    return [json.loads(data) for _, _, data in archive.iter_records()]


def _only_archive(root: Path) -> RunArchive:
    (info,) = list_runs(root)
    return RunArchive(info.path)


def _provider(sampler: Sampler, **kwargs: object) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, **kwargs)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _raw_run(provider: TracerProvider, episodes: list[dict]) -> None:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        for episode in episodes:
            with tracer.start_as_current_span("tool-call"):  # the user's own span between
                with tracer.start_as_current_span(
                    "episode", attributes={"prime.record": json.dumps(episode)}
                ):
                    pass
    provider.force_flush()  # the run's close-out may continue in the background


# -- head samplers -----------------------------------------------------------------------

DROPPING = {
    "always_off": ALWAYS_OFF,
    "traceidratio_0": TraceIdRatioBased(0),
    "parentbased_traceidratio_0": ParentBased(TraceIdRatioBased(0)),
}


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_pr_sampler_keeps_every_record_while_the_users_exporter_sees_only_its_sample(
    name, episodes, isolated_env
):
    provider, exporter = _provider(pr.sampler(DROPPING[name]))
    pr.configure_exporter(provider, mode="offline")
    _raw_run(provider, episodes)
    archive = _only_archive(isolated_env)
    assert sorted(r["id"] for r in _records(archive)) == sorted(e["id"] for e in episodes)
    assert archive.status()["status"] == "completed"
    assert exporter.get_finished_spans() == ()  # the base sampled nothing


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_pr_sampler_keeps_an_online_raw_run_delivered(name, episodes, prime_env: StandInPlatform):
    provider, exporter = _provider(pr.sampler(DROPPING[name]))
    pr.configure_exporter(provider)
    _raw_run(provider, episodes[:3])
    assert sorted(prime_env.episode_writes) == sorted(e["id"] for e in episodes[:3])
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1
    assert exporter.get_finished_spans() == ()


def test_pr_sampler_leaves_a_sampled_run_exported_as_before(episodes, isolated_env):
    provider, exporter = _provider(pr.sampler(ParentBased(ALWAYS_ON)))
    pr.configure_exporter(provider, mode="offline")
    _raw_run(provider, episodes[:2])
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["episode", "episode", "run", "tool-call", "tool-call"]
    assert len(_records(_only_archive(isolated_env))) == 2


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
    provider, _ = _provider(DROPPING[name])
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        pr.configure_exporter(provider, mode="offline")
        pr.configure_exporter(provider, mode="offline")
    warnings = [r.getMessage() for r in caplog.records if "drops `run` spans" in r.getMessage()]
    assert len(warnings) == 1  # once
    assert "TracerProvider(sampler=prime_runs.sampler(base))" in warnings[0]
    assert DROPPING[name].get_description() in warnings[0]


def test_the_default_sampler_is_not_warned_about(caplog):
    provider, _ = _provider(ParentBased(ALWAYS_ON))
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        pr.configure_exporter(provider, mode="offline")
    assert not caplog.records


def test_logging_inside_a_dropped_run_span_warns_and_never_raises(episodes, caplog):
    provider, _ = _provider(ALWAYS_OFF)  # no prime_runs.sampler(): nothing sees the run
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
    provider, _ = _provider(ALWAYS_OFF)
    run = pr.init(name="only", mode="offline")
    with provider.get_tracer("app").start_as_current_span("run"):
        pr.log_episodes(episodes[:3])
    run.finish()
    assert run.logged_records == 3


@pytest.mark.parametrize("name", sorted(DROPPING))
def test_init_runs_deliver_every_record_under_a_dropping_sampler(
    name, episodes, prime_env: StandInPlatform
):
    provider, exporter = _provider(DROPPING[name])  # no prime_runs.sampler()
    run = pr.init(name="init", environments=["gsm8k"], tracer_provider=provider)
    with run:
        run.log_episodes(episodes[:2])
        pr.log_episodes(episodes[2:3])
    assert run.mode == "online"
    assert sorted(prime_env.episode_writes) == sorted(e["id"] for e in episodes[:3])
    assert prime_env.evaluations[run.id]["finalize_count"] == 1
    assert exporter.get_finished_spans() == ()  # the application's sampler was obeyed


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

ENV_SAMPLERS = [
    {"OTEL_TRACES_SAMPLER": "always_off"},
    {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
    {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
]


def _run_script(
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


@pytest.mark.parametrize("env", ENV_SAMPLERS, ids=lambda e: e["OTEL_TRACES_SAMPLER"])
@pytest.mark.parametrize("mode", ["wrapped", "created"])
def test_env_samplers_under_pr_sampler_deliver_every_record(env, mode, tmp_path, isolated_env):
    proc = _run_script(tmp_path, SAMPLER_SCRIPT, env, mode)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    archive = _only_archive(isolated_env)
    ids = sorted(r["id"] for r in _records(archive))
    assert ids == ["ep-0", "ep-1", "ep-2", "ep-3", "logged"]
    assert archive.status()["status"] == "completed"


@pytest.mark.parametrize("env", ENV_SAMPLERS, ids=lambda e: e["OTEL_TRACES_SAMPLER"])
def test_env_samplers_without_pr_sampler_are_reported_loudly(env, tmp_path, isolated_env):
    proc = _run_script(tmp_path, SAMPLER_SCRIPT, env, "plain")
    assert proc.returncode == 0, proc.stderr  # pr.log_episodes() did not raise
    assert proc.stdout.strip() == "done"
    assert proc.stderr.count("drops `run` spans") == 1
    assert "TracerProvider(sampler=prime_runs.sampler(base))" in proc.stderr
    assert "not recording are not tracked" in proc.stderr
    assert list_runs(isolated_env) == []  # nothing was seen: said so, twice over


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
    archive = _only_archive(isolated_env)
    assert sorted(r["id"] for r in _records(archive)) == ["ep-0", "ep-1", "ep-2"]


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


# -- OTEL_SDK_DISABLED ---------------------------------------------------------------------

DISABLED_INIT_SCRIPT = """
import json, sys, time
import prime_runs as pr


def episode(tag):
    return {"id": tag, "env": {"id": "gsm8k"}, "ok": True, "errors": [],
            "traces": [{"id": f"tr-{tag}", "ok": True, "errors": [],
                        "timing": {"start": time.time()}}]}


run = pr.init(name="disabled-sdk", environments=["gsm8k"])
with run:
    run.log_episodes([episode("a")])
    pr.log_episodes([episode("b")])  # found without a span
    context = run.context()
print(json.dumps({"id": run.id, "mode": run.mode, "context": sorted(context)}))
"""


def test_sdk_disabled_init_runs_still_archive_offline(tmp_path, isolated_env):
    proc = _run_script(tmp_path, DISABLED_INIT_SCRIPT, {"OTEL_SDK_DISABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["mode"] == "offline"
    assert said["context"] == ["baggage", "traceparent"]  # still joinable
    archive = RunArchive(isolated_env / said["id"])
    assert sorted(r["id"] for r in _records(archive)) == ["a", "b"]
    assert archive.status()["status"] == "completed"


def test_sdk_disabled_init_runs_still_upload(prime_env: StandInPlatform, tmp_path):
    proc = _run_script(tmp_path, DISABLED_INIT_SCRIPT, {"OTEL_SDK_DISABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["mode"] == "online"
    assert sorted(prime_env.episode_writes) == ["a", "b"]
    assert prime_env.evaluations[said["id"]]["finalize_count"] == 1


def test_sdk_disabled_raw_span_runs_warn_once(tmp_path, isolated_env):
    env = {"OTEL_SDK_DISABLED": "true"}
    proc = _run_script(tmp_path, SAMPLER_SCRIPT, env, "plain")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("OTEL_SDK_DISABLED=true: the OpenTelemetry SDK creates no") == 1
    assert "not recording are not tracked" in proc.stderr  # the pr.log_episodes() call
    assert list_runs(isolated_env) == []


# -- attribute length limits ---------------------------------------------------------------

LIMIT_SCRIPT = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
import prime_runs as pr

trace.set_tracer_provider(TracerProvider())
pr.configure_exporter(mode="offline")
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("run", attributes={"prime.run.name": "cut"}):
    for i in range(5):
        record = {"id": f"ep-{i}", "traces": [{"id": f"tr-{i}", "completion": "x" * 200}]}
        attributes = {"prime.record": json.dumps(record)}
        with tracer.start_as_current_span("episode", attributes=attributes):
            pass
run = pr.init(name="sdk-logged", mode="offline")
run.log_episodes([{"id": "whole", "traces": [{"id": "tw", "completion": "y" * 500}]}])
run.finish()
"""


@pytest.mark.parametrize(
    "variable", ["OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"]
)
def test_a_record_cut_by_the_length_limit_is_reported_naming_it(variable, tmp_path, isolated_env):
    proc = _run_script(tmp_path, LIMIT_SCRIPT, {variable: "64"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(f"was cut by {variable}=64") == 1  # once, then counted
    assert "5 records were not logged: 5 invalid" in proc.stderr
    assert "ended with no records: all 5 records logged into it were refused" in proc.stderr
    by_name = {
        json.loads((a.path / "run.json").read_text())["name"]: a for a in list_runs(isolated_env)
    }
    cut = RunArchive(by_name["cut"].path).status()
    assert (cut["logged"], cut["invalid"]) == (0, 5)
    # Records logged through the SDK never travel as an attribute: the limit cannot cut them.
    (whole,) = _records(RunArchive(by_name["sdk-logged"].path))
    assert whole["traces"][0]["completion"] == "y" * 500


def test_a_record_cut_by_span_limits_on_the_provider_is_reported(episodes, isolated_env, caplog):
    provider, _ = _provider(
        ParentBased(ALWAYS_ON), span_limits=SpanLimits(max_span_attribute_length=100)
    )
    pr.configure_exporter(provider, mode="offline")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        _raw_run(provider, episodes[:2])
    (cut,) = [r.getMessage() for r in caplog.records if "was cut by" in r.getMessage()]
    assert "100 characters" in cut and "max_attribute_length=100" in cut
    assert _only_archive(isolated_env).status()["invalid"] == 2


# -- span events ---------------------------------------------------------------------------


def test_records_sent_as_span_events_are_journaled(episodes, traces_records, isolated_env):
    provider, _ = _provider(pr.sampler())
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS) as run_span:
        run_span.add_event("episode", {"prime.record": json.dumps(episodes[0])})
        with tracer.start_as_current_span("rollout") as rollout:
            rollout.add_event("episode", {"prime.record": json.dumps(episodes[1])})
            rollout.add_event("trace", {"prime.record": json.dumps(traces_records[0])})
            rollout.add_event("progress", {"step": 3})  # not a record
        run_span.add_event("episode", {"prime.record": '{"id": "half", "traces": [{'})
        run_span.add_event("episode", {"prime.record": "not json"})
    provider.force_flush()
    archive = _only_archive(isolated_env)
    ids = sorted(r["id"] for r in _records(archive))
    assert ids == sorted([episodes[0]["id"], episodes[1]["id"], traces_records[0]["id"]])
    status = archive.status()
    assert (status["logged"], status["invalid"], status["status"]) == (3, 2, "completed")


def test_record_events_over_the_event_count_limit_are_reported(episodes, isolated_env, caplog):
    provider, _ = _provider(pr.sampler(), span_limits=SpanLimits(max_events=2))
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        with tracer.start_as_current_span("run", attributes=RUN_ATTRS) as run_span:
            for episode in episodes[:5]:
                run_span.add_event("episode", {"prime.record": json.dumps(episode)})
        provider.force_flush()
    assert len(_records(_only_archive(isolated_env))) == 2
    assert any("dropped 3 events" in r.getMessage() for r in caplog.records)


# -- threads and several runs ----------------------------------------------------------------


def test_a_thread_without_context_logs_into_the_single_open_raw_run(episodes, isolated_env):
    provider, _ = _provider(pr.sampler())
    pr.configure_exporter(provider, mode="offline")
    with provider.get_tracer("app").start_as_current_span("run", attributes=RUN_ATTRS):
        worker = threading.Thread(target=pr.log_episodes, args=(episodes[:3],))
        worker.start()
        worker.join()
    provider.force_flush()
    assert len(_records(_only_archive(isolated_env))) == 3


def test_a_thread_without_context_logs_into_the_single_open_init_run(episodes):
    run = pr.init(name="threaded", mode="offline")
    worker = threading.Thread(target=pr.log_episodes, args=(episodes[:2],))
    worker.start()
    worker.join()
    run.finish()
    assert run.logged_records == 2


def test_several_open_runs_and_none_in_context_is_said(episodes, caplog):
    first = pr.init(name="first", mode="offline")
    second = pr.init(name="second", mode="offline")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        pr.log_episodes(episodes[:1])
        pr.log_episodes(episodes[1:2])
        with first:
            pr.log_episodes(episodes[2:3])  # in context: no doubt, no warning
    (warning,) = [r.getMessage() for r in caplog.records if "runs are open" in r.getMessage()]
    assert f"go to run {second.id}" in warning
    assert (first.logged_records, second.logged_records) == (1, 2)
    second.finish()


def test_several_open_runs_raise_under_on_error_raise(episodes):
    first = pr.init(name="first", mode="offline")
    second = pr.init(name="second", mode="offline", on_error="raise")
    with pytest.raises(pr.AmbiguousRunError, match="2 runs are open"):
        pr.log_episodes(episodes[:1])
    assert second.logged_records == 0
    second.finish()
    first.finish()


# -- the finish report -----------------------------------------------------------------------


def test_a_run_that_ends_with_no_records_says_so(episodes, caplog):
    empty = pr.init(name="empty", mode="offline")
    full = pr.init(name="full", mode="offline")
    full.log_episodes(episodes[:1])
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        empty.finish()
        full.finish()
    (warning,) = [r.getMessage() for r in caplog.records if "no records" in r.getMessage()]
    assert f"run {empty.id} ended with no records: nothing was logged" in warning
    assert RunArchive(Path(empty.archive_path)).status()["logged"] == 0


def test_a_raw_run_whose_records_were_all_refused_says_so(isolated_env, caplog):
    provider, _ = _provider(pr.sampler())
    pr.configure_exporter(provider, mode="offline")
    tracer = provider.get_tracer("app")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
            for payload in ("[1, 2]", "not json"):
                with tracer.start_as_current_span("episode", attributes={"prime.record": payload}):
                    pass
        provider.force_flush()
    messages = [r.getMessage() for r in caplog.records]
    assert any("ended with no records: all 2 records" in m for m in messages)
    status = _only_archive(isolated_env).status()
    assert (status["logged"], status["invalid"]) == (0, 2)

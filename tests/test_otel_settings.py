"""OpenTelemetry's own settings never lose a run's records silently: ``OTEL_SDK_DISABLED``,
attribute length limits, span events, threads without context, several open runs, and a
run that ends with nothing. Each case ends with the records delivered or a loud report."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

import _archives
import prime_runs as pr
from _otel import (
    RUN_ATTRS,
    SAMPLER_SCRIPT,
    archived,
    only_archive,
    provider_with,
    raw_run,
    run_script,
)
from prime_runs.testing import StandInPlatform

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
    proc = run_script(tmp_path, DISABLED_INIT_SCRIPT, {"OTEL_SDK_DISABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["mode"] == "offline"
    assert said["context"] == ["baggage", "traceparent"]  # still joinable
    archive = _archives.Archive(isolated_env / said["id"])
    assert sorted(r["id"] for r in archived(archive)) == ["a", "b"]
    assert archive.status()["status"] == "completed"


def test_sdk_disabled_init_runs_still_upload(prime_env: StandInPlatform, tmp_path):
    proc = run_script(tmp_path, DISABLED_INIT_SCRIPT, {"OTEL_SDK_DISABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["mode"] == "online"
    assert sorted(prime_env.episode_writes) == ["a", "b"]
    assert prime_env.evaluations[said["id"]]["finalize_count"] == 1


def test_sdk_disabled_raw_span_runs_warn_once(tmp_path, isolated_env):
    env = {"OTEL_SDK_DISABLED": "true"}
    proc = run_script(tmp_path, SAMPLER_SCRIPT, env, "plain")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("OTEL_SDK_DISABLED=true: the OpenTelemetry SDK creates no") == 1
    assert "not recording are not tracked" in proc.stderr  # the pr.log_episodes() call
    assert _archives.runs(isolated_env) == []


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
    proc = run_script(tmp_path, LIMIT_SCRIPT, {variable: "64"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(f"was cut by {variable}=64") == 1  # once, then counted
    assert "5 records were not logged: 5 refused as bad input" in proc.stderr
    assert "ended with no records: all 5 records logged into it were refused" in proc.stderr
    by_name = {a.description()["name"]: a for a in _archives.runs(isolated_env)}
    cut = by_name["cut"].status()
    assert (cut["logged"], cut["invalid"]) == (0, 5)
    # Records logged through the SDK never travel as an attribute: the limit cannot cut them.
    (whole,) = archived(by_name["sdk-logged"])
    assert whole["traces"][0]["completion"] == "y" * 500


def test_a_record_cut_by_span_limits_on_the_provider_is_reported(episodes, isolated_env, caplog):
    provider, _ = provider_with(
        ParentBased(ALWAYS_ON), span_limits=SpanLimits(max_span_attribute_length=100)
    )
    pr.configure_exporter(provider, mode="offline")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        raw_run(provider, episodes[:2])
    (cut,) = [r.getMessage() for r in caplog.records if "was cut by" in r.getMessage()]
    assert "100 characters" in cut and "max_attribute_length=100" in cut
    assert only_archive(isolated_env).status()["invalid"] == 2


# -- span events ---------------------------------------------------------------------------


def test_records_sent_as_span_events_are_journaled(episodes, traces_records, isolated_env):
    provider, _ = provider_with(pr.sampler())
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
    archive = only_archive(isolated_env)
    ids = sorted(r["id"] for r in archived(archive))
    assert ids == sorted([episodes[0]["id"], episodes[1]["id"], traces_records[0]["id"]])
    status = archive.status()
    assert (status["logged"], status["invalid"], status["status"]) == (3, 2, "completed")


# -- threads and several runs ----------------------------------------------------------------


def test_a_thread_without_context_logs_into_the_single_open_raw_run(episodes, isolated_env):
    provider, _ = provider_with(pr.sampler())
    pr.configure_exporter(provider, mode="offline")
    with provider.get_tracer("app").start_as_current_span("run", attributes=RUN_ATTRS):
        worker = threading.Thread(target=pr.log_episodes, args=(episodes[:3],))
        worker.start()
        worker.join()
    provider.force_flush()
    assert len(archived(only_archive(isolated_env))) == 3


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
    assert _archives.Archive(Path(empty.archive_path)).status()["logged"] == 0


def test_a_raw_run_whose_records_were_all_refused_says_so(isolated_env, caplog):
    provider, _ = provider_with(pr.sampler())
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
    status = only_archive(isolated_env).status()
    assert (status["logged"], status["invalid"]) == (0, 2)

"""The logs signal: evaluation and content log records reach the episode of their span.

Real components: the SDK's tracer and logger providers, ``pr.configure_exporter`` (which
attaches the log record processor), the offline archive.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from _genai_support import RUN_ATTRS, archive, episodes
from prime_runs import genai_logs
from prime_runs._genai import collector

_PARAMETERS = inspect.signature(LogRecord.__init__).parameters


def _event(name: str, *, context: Any = None, **fields: Any) -> LogRecord:
    """An event log record as an instrumentation of the installed SDK would emit it: newer
    SDKs take ``event_name`` and a ``context``; older ones (1.27) the ``event.name``
    attribute and the span's ids, which the emitter fills in from its current span."""
    if "event_name" in _PARAMETERS:
        fields["event_name"] = name
    else:
        fields["attributes"] = {**(fields.get("attributes") or {}), "event.name": name}
    if "context" in _PARAMETERS:
        if context is not None:
            fields["context"] = context
    else:
        span = otel_trace.get_current_span(context).get_span_context()
        if span.is_valid:
            fields.update(trace_id=span.trace_id, span_id=span.span_id)
            fields["trace_flags"] = span.trace_flags
    return LogRecord(**fields)


def test_log_records_of_a_span_reach_its_episode_even_after_the_span_ended(
    isolated_env: Path,
) -> None:
    tracer_provider = TracerProvider()
    pr.configure_exporter(tracer_provider, mode="offline")
    logger_provider = LoggerProvider()
    assert genai_logs.attach(logger_provider) and genai_logs.attach(logger_provider)  # once
    log = logger_provider.get_logger("grader")
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
            with tracer.start_as_current_span("chat m", attributes=chat) as span:
                log.emit(_event("gen_ai.user.message", body={"content": "hi"}))
            choice = {"finish_reason": "stop", "message": {"content": "yo"}}
            ended = otel_trace.set_span_in_context(span)  # emitted after its span ended
            log.emit(_event("gen_ai.choice", body=choice, context=ended))
            with tracer.start_as_current_span("grade"):
                pass
            grade = {"gen_ai.evaluation.name": "correct", "gen_ai.evaluation.score.value": 0.5}
            log.emit(_event("gen_ai.evaluation.result", attributes=grade))
    log.emit(_event("gen_ai.user.message", body={"content": "not ours"}))
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert [node["message"] for node in trace["nodes"]] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
    ]
    assert trace["calls"][0]["finish_reason"] == "stop"
    assert trace["rewards"] == {"correct": {"score": 0.5, "weight": 1.0}}
    assert archive(isolated_env).status()["summary"]["avg_reward"] == 0.5


def test_log_records_over_the_limit_are_left_out_and_reported(
    isolated_env: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "MAX_LOGS", 2)
    tracer_provider = TracerProvider()
    pr.configure_exporter(tracer_provider, mode="offline")
    logger_provider = LoggerProvider()
    genai_logs.attach(logger_provider)
    log = logger_provider.get_logger("agent")
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
            with tracer.start_as_current_span("chat m", attributes=chat):
                for word in ("one", "two", "three"):
                    log.emit(_event("gen_ai.user.message", body={"content": word}))
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    contents = [node["message"]["content"] for node in record["traces"][0]["nodes"]]
    assert contents == ["one", "two"]
    assert "over the log limit: 1 log records over 2 were left out" in caplog.text

"""Malformed GenAI input never loses an episode silently: the bad value is left out, the
episode is recorded, and each kind of problem is reported once per run and counted.

Real components: a real tracer provider with the run processor, the offline archive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from _genai_support import RUN_ATTRS, archive, chat_attrs, episodes, provider, text
from prime_runs._genai import collector

DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON no parser recursion survives
NESTED = json.dumps(json.loads("[" * 200 + "]" * 200))  # parses, but deeper than any message


def _chat(inputs: object, outputs: list | None = None) -> dict[str, object]:
    attrs = chat_attrs("m-1", [], outputs or [text("assistant", "fine")], (3, 2))
    attrs["gen_ai.input.messages"] = inputs if isinstance(inputs, str) else json.dumps(inputs)
    return attrs


@pytest.mark.parametrize(
    ("inputs", "reported"),
    [
        ([{"role": "user", "parts": 5}], "parts are a int, not a list"),
        ([{"role": "user", "parts": True}], "parts are a bool, not a list"),
        ([{"role": "user", "parts": "hello"}], "parts are a str, not a list"),
        ([{"role": "user", "parts": [5]}], "message part is not an object"),
        ([7, text("user", "kept")], "has an entry that is not a {role, parts}"),
        (DEEP, "nests too deeply to parse"),
        (NESTED, "nests over 64 levels"),
    ],
)
def test_a_malformed_message_value_is_left_out_and_the_episode_recorded(
    isolated_env: Path, caplog: pytest.LogCaptureFixture, inputs: object, reported: str
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode", attributes={"prime.task.key": "t:1"}):
            with tracer.start_as_current_span("chat m-1", attributes=_chat(inputs)):
                pass
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert record["task"]["key"] == "t:1"
    assert trace["calls"][0]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2}
    contents = [node["message"]["content"] for node in trace["nodes"]]
    assert contents[-1] == "fine"  # the valid output is kept
    if isinstance(inputs, list) and inputs[-1] == text("user", "kept"):
        assert contents == ["kept", "fine"]
    assert reported in caplog.text
    assert "could not process a span" not in caplog.text
    status = archive(isolated_env).status()
    assert (status["logged"], status["invalid"], status["dropped"]) == (1, 0, 0)


def test_deep_task_data_and_event_content_are_left_out(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    task = {"prime.task.key": "t:2", "prime.task.data": DEEP, "prime.task.answer": "4"}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode", attributes=task):
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "old"}
            with tracer.start_as_current_span("chat old", attributes=chat) as span:
                span.add_event("gen_ai.user.message", {"gen_ai.event.content": NESTED})
                span.add_event("gen_ai.user.message", {"content": "hi"})
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert record["task"] == {"key": "t:2", "data": {"answer": "4"}}
    assert [n["message"] for n in record["traces"][0]["nodes"]] == [
        {"role": "user", "content": "hi"}
    ]
    assert "too deeply nested prime.task.data: nests too deeply to parse" in caplog.text
    assert "nested gen_ai.user.message event content: nests over 64 levels" in caplog.text
    assert archive(isolated_env).status()["logged"] == 1


def test_each_kind_of_problem_is_reported_once_per_run_and_counted(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    bad = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": -1}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        for _ in range(3):
            with tracer.start_as_current_span("episode"):
                with tracer.start_as_current_span("chat", attributes=bad):
                    pass
    tracer_provider.force_flush()
    assert len(episodes(isolated_env)) == 3
    assert caplog.text.count("is not a token count") == 1
    assert "3 cases of 'malformed token count' in this run" in caplog.text


def test_episodes_over_the_open_limit_are_counted_and_reported(
    isolated_env: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "MAX_OPEN", 3)
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        opened = [tracer.start_span("episode") for _ in range(5)]  # all open at once
        for span in opened:
            span.end()
    tracer_provider.force_flush()
    assert len(episodes(isolated_env)) == 3
    status = archive(isolated_env).status()
    assert (status["logged"], status["invalid"]) == (3, 2)
    assert "3 episodes were already open" in caplog.text
    assert "2 GenAI episode spans over 3 open were not recorded" in caplog.text


def test_a_span_of_another_trace_is_never_adopted(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS) as run:
        with tracer.start_as_current_span("episode") as episode:
            pass
        own = run.get_span_context()
        for parent_id in (own.span_id, episode.get_span_context().span_id):
            # Same span id, another trace: a remote parent that only collides with ours.
            other = SpanContext(own.trace_id ^ 1, parent_id, True, TraceFlags(1))
            ctx = otel_trace.set_span_in_context(NonRecordingSpan(other))
            attrs = chat_attrs("intruder", [text("user", "x")], [text("assistant", "y")], (1, 1))
            tracer.start_span("episode", ctx).end()
            tracer.start_span("chat intruder", ctx, attributes=attrs).end()
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert record["id"].startswith(f"ep_{own.trace_id:032x}")
    assert record["traces"][0]["calls"] == []


def test_spans_over_the_per_episode_limit_are_left_out_and_reported(
    isolated_env: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "MAX_SPANS", 2)
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            for n in range(3):
                attrs = chat_attrs("m", [text("user", f"q{n}")], [text("assistant", "a")], (1, 1))
                with tracer.start_as_current_span("chat", attributes=attrs):
                    pass
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert len(record["traces"][0]["calls"]) == 2
    assert "over the span limit: 1 spans over 2 were left out" in caplog.text

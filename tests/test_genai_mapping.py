"""GenAI semantic-convention spans under a run become episode records (hand-built spans).

Real components: a real tracer provider with the run processor, the offline archive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Status, StatusCode

import prime_runs as pr
from _genai_support import (
    RUN_ATTRS,
    archive,
    chat_attrs,
    episodes,
    path,
    provider,
    text,
    tool_call,
    tool_result,
)


def test_episode_span_with_chat_and_tool_spans_becomes_one_episode(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    first_in = [text("user", "What is 2+2?")]
    first_out = [tool_call("call_1", "add", {"a": 2, "b": 2})]
    second_in = [*first_in, first_out[0], tool_result("call_1", "4")]
    second_out = [{**text("assistant", "It is 4."), "finish_reason": "stop"}]
    task = {"prime.task.key": "math:1", "prime.task.answer": "4", "prime.env.id": "math-env"}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode", attributes=task):
            with tracer.start_as_current_span(
                "chat m", attributes=chat_attrs("m-1", first_in, first_out, (10, 5))
            ):
                pass
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "add",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.result": "4",
            }
            with tracer.start_as_current_span("execute_tool add", attributes=tool):
                pass
            with tracer.start_as_current_span(
                "chat m", attributes=chat_attrs("m-1", second_in, second_out, (20, 3))
            ):
                pass
            pr.record_score("correct", 1.0, label="pass", explanation="matches the answer")
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert record["env"] == {"id": "math-env"}
    assert record["task"]["key"] == "math:1" and record["task"]["data"]["answer"] == "4"
    assert record["ok"] is True
    (trace,) = record["traces"]
    assert trace["rewards"]["correct"] == {
        "score": 1.0,
        "weight": 1.0,
        "label": "pass",
        "explanation": "matches the answer",
    }
    assert [call["usage"] for call in trace["calls"]] == [
        {"prompt_tokens": 10, "completion_tokens": 5},
        {"prompt_tokens": 20, "completion_tokens": 3},
    ]
    assert [call["finish_reason"] for call in trace["calls"]] == ["tool_calls", "stop"]
    roles = [node["message"]["role"] for node in trace["nodes"]]
    assert roles == ["user", "assistant", "tool", "assistant"]  # the resent history is shared
    assert [node["parent"] for node in trace["nodes"]] == [None, 0, 1, 2]
    assistant = trace["nodes"][1]["message"]
    assert assistant["tool_calls"] == [
        {"id": "call_1", "type": "function", "name": "add", "arguments": '{"a": 2, "b": 2}'}
    ]
    assert trace["nodes"][2]["message"]["content"] == "4"
    assert [call["node"] for call in trace["calls"]] == [1, 3]
    assert trace["info"]["genai"]["content_captured"] is True
    assert pr.metrics.from_episodes([record])["avg_reward"] == 1.0
    status = archive(isolated_env).status()
    assert status["summary"]["avg_reward"] == 1.0


def test_content_off_keeps_calls_and_usage_and_says_so(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m-2",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.usage.cache_read.input_tokens": 3,
        "gen_ai.usage.cache_write.input_tokens": 2,
    }
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("chat m-2", attributes=attrs):  # a root-level chat
            pass
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert trace["nodes"] == []
    assert trace["calls"][0]["model"] == "m-2"
    assert trace["calls"][0]["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "cached_input_tokens": 3,
    }
    assert trace["info"]["genai"] == {
        "semconv": "1.44.0",
        "content_captured": False,
        "cache_write_input_tokens": 2,
    }


def test_older_event_form_and_agents_make_one_trace_per_agent(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            for agent in ("planner", "coder"):
                invoke = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
                with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=invoke):
                    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "old"}
                    with tracer.start_as_current_span("chat old", attributes=chat) as span:
                        span.add_event("gen_ai.user.message", {"content": f"hi {agent}"})
                        body = {"index": 0, "finish_reason": "stop", "message": {"content": "ok"}}
                        span.add_event("gen_ai.choice", {"gen_ai.event.content": json.dumps(body)})
                    pr.record_score("done", 0.5)
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    by_agent = {trace["agent"]["name"]: trace for trace in record["traces"]}
    assert set(by_agent) == {"planner", "coder"}
    for agent, trace in by_agent.items():
        messages = [node["message"] for node in trace["nodes"]]
        assert messages == [
            {"role": "user", "content": f"hi {agent}"},
            {"role": "assistant", "content": "ok"},
        ]
        assert trace["calls"][0]["finish_reason"] == "stop"
        assert trace["rewards"]["done"]["score"] == 0.5
    assert len({trace["id"] for trace in record["traces"]}) == 2


def test_malformed_values_still_produce_the_episode_and_report(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    bad = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m-3",
        "gen_ai.usage.input_tokens": "lots",
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.input.messages": '[{"role": "user", "parts": [',  # truncated
        "gen_ai.output.messages": json.dumps([text("assistant", "fine")]),
    }
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode") as episode:
            with tracer.start_as_current_span("chat m-3", attributes=bad) as chat:
                chat.set_status(Status(StatusCode.ERROR, "boom"))
                chat.set_attribute("error.type", "RateLimitError")
            episode.add_event("gen_ai.evaluation.result", {"gen_ai.evaluation.score.value": 1.0})
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert trace["calls"][0]["usage"] == {"prompt_tokens": 0, "completion_tokens": 4}
    assert trace["calls"][0]["error"] == {"type": "RateLimitError", "message": "boom"}
    assert [node["message"]["content"] for node in trace["nodes"]] == ["fine"]
    assert trace["ok"] is False and record["ok"] is False
    reported = caplog.text  # run.errors entries are logged as they are reported
    assert "gen_ai.usage.input_tokens='lots' is not a token count" in reported
    assert "input is not valid JSON" in reported
    assert "has no gen_ai.evaluation.name" in reported


def test_an_episode_span_with_its_own_record_is_not_mapped(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    own = {"id": "ep-own", "env": {"id": "x"}, "traces": []}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode", attributes={"prime.record": json.dumps(own)}):
            chat = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1}
            with tracer.start_as_current_span("chat", attributes=chat):
                pass
    tracer_provider.force_flush()
    assert [record["id"] for record in episodes(isolated_env)] == ["ep-own"]


def test_an_episode_still_open_when_its_run_ends_is_recorded_as_it_was(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    run = tracer.start_span("run", attributes=RUN_ATTRS)
    episode = tracer.start_span("episode", otel_trace.set_span_in_context(run))
    attrs = chat_attrs("m-4", [text("user", "hi")], [text("assistant", "yo")], (5, 1))
    tracer.start_span("chat m-4", otel_trace.set_span_in_context(episode), attributes=attrs).end()
    run.end()
    episode.end()  # after its run: not a second record, not a crash
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert record["traces"][0]["calls"][0]["usage"] == {"prompt_tokens": 5, "completion_tokens": 1}
    assert "had not ended when its run ended" in caplog.text
    assert archive(isolated_env).status()["logged"] == 1


def test_a_score_outside_every_agent_goes_to_the_first_trace(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            invoke = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "solver"}
            with tracer.start_as_current_span("invoke_agent solver", attributes=invoke):
                pass
            with tracer.start_as_current_span("grade"):  # the grader's own span
                pr.record_score("judged", 0.25, explanation="partly right")
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert trace["agent"] == {"name": "solver"}
    assert trace["rewards"] == {
        "judged": {"score": 0.25, "weight": 1.0, "explanation": "partly right"}
    }
    assert pr.metrics.from_episodes([record])["avg_reward"] == 0.25


def test_record_score_rejects_bad_input_with_a_typed_error() -> None:
    with pytest.raises(pr.RecordError, match="non-empty string"):
        pr.record_score("", 1.0)
    with pytest.raises(pr.RecordError, match="finite number"):
        pr.record_score("x", float("nan"))
    with pytest.raises(pr.RecordError, match="no recording span"):
        pr.record_score("x", 1.0)  # no span is current here


def test_a_workflow_directly_under_the_run_is_one_episode(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    workflow = {"gen_ai.operation.name": "invoke_workflow"}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("invoke_workflow plan", attributes=workflow):
            for agent in ("planner", "coder"):
                invoke = {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": agent,
                    "gen_ai.agent.id": f"id-{agent}",
                }
                with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=invoke):
                    said = [text("assistant", "ok")]
                    attrs = chat_attrs("m", [text("user", agent)], said, (1, 1))
                    attrs["gen_ai.provider.name"] = "openai"
                    with tracer.start_as_current_span("chat m", attributes=attrs):
                        pass
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    by_agent = {trace["agent"]["name"]: trace for trace in record["traces"]}
    assert set(by_agent) == {"planner", "coder"}  # no trace for the workflow itself
    for agent, trace in by_agent.items():
        assert trace["info"]["genai"]["agent_ids"] == [f"id-{agent}"]
        assert trace["info"]["genai"]["providers"] == ["openai"]
        assert trace["agent"]["config"] == {"model": "m"}


def test_openinference_spans_directly_under_the_run_and_unmapped_kinds(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "oi-model",
        "llm.token_count.prompt": 9,
        "llm.token_count.completion": 2,
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "hi",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "u",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "hello",
    }
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("ChatCompletion", attributes=llm):
            pass
        with tracer.start_as_current_span("episode"):  # only kinds with no model call
            retriever = {"openinference.span.kind": "RETRIEVER"}
            with tracer.start_as_current_span("retrieve", attributes=retriever):
                pass
    tracer_provider.force_flush()
    found = {len(record["traces"][0]["calls"]): record for record in episodes(isolated_env)}
    (trace,) = found[1]["traces"]
    assert [node["message"] for node in trace["nodes"]] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert trace["calls"][0]["model"] == "oi-model"
    assert trace["calls"][0]["usage"] == {"prompt_tokens": 9, "completion_tokens": 2}
    assert found[0]["traces"][0]["nodes"] == []  # recorded, and said why it is empty
    assert "nothing mapped: spans of openinference.span.kind=RETRIEVER" in caplog.text
    assert "a uri part is left out" in caplog.text


def test_parts_the_conventions_define_are_carried_or_reported(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agent")
    calls = {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "two tools"},
            {"type": "text", "content": ""},  # beside tool calls: the same as no text
            {"type": "tool_call", "id": "a", "name": "add", "arguments": {"a": 1}},
            {"type": "tool_call", "id": "b", "name": "mul", "arguments": {"b": 2}},
        ],
    }
    results = {
        "role": "user",  # pydantic-ai sends tool returns, and a retry prompt, as the user
        "parts": [
            {"type": "tool_call_response", "id": "a", "name": "add", "result": {"x": 1}},
            {"type": "tool_call_response", "id": "b", "tool_response": "2"},
            {"type": "text", "content": "Please"},
            {"type": "text", "content": "go on."},
            {"type": "blob", "modality": "image", "content": "aGk="},
        ],
    }
    question = text("user", "Do both.")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            with tracer.start_as_current_span(
                "chat", attributes=chat_attrs("m", [question], [calls], (1, 1))
            ):
                pass
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.id": "a",
                "gen_ai.tool.name": "add",
                "tool_response": '{"x":1}',  # pydantic-ai's format version 2
            }
            with tracer.start_as_current_span("running tool", attributes=tool):
                pass
            answer = [text("assistant", "Done.")]
            history = [question, calls, results]
            with tracer.start_as_current_span(
                "chat", attributes=chat_attrs("m", history, answer, (1, 1))
            ):
                pass
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert len(trace["nodes"]) == 6  # the execute_tool result and the resent one are one node
    conversation = path(trace, trace["calls"][-1]["node"])
    assert conversation[1] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "two tools",
        "tool_calls": [
            {"id": "a", "type": "function", "name": "add", "arguments": '{"a": 1}'},
            {"id": "b", "type": "function", "name": "mul", "arguments": '{"b": 2}'},
        ],
    }
    assert conversation[2] == {
        "role": "tool", "content": '{"x":1}', "tool_call_id": "a", "name": "add"
    }  # fmt: skip
    assert conversation[3] == {"role": "tool", "content": "2", "tool_call_id": "b"}
    assert conversation[4] == {"role": "user", "content": "Please\ngo on."}
    assert conversation[5] == {"role": "assistant", "content": "Done."}
    assert "a blob part is left out" in caplog.text

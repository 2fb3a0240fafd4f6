"""A real OpenAI client instrumented by the official opentelemetry-instrumentation-openai-v2,
calling a scripted OpenAI-compatible server on 127.0.0.1 inside ``run``/``episode`` spans,
against the stand-in platform: the stored documents match the calls made.

Every content mode yields the same stored conversation, whether the instrumentation puts
content on spans or in OpenTelemetry log records. The instrumentation patches the
``openai`` module globally, so each case runs in a subprocess of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
from _genai_model import ANSWER, ANSWER_USAGE, MODEL, TOOL_USAGE
from _genai_producers import run_script
from prime_runs.testing import StandInPlatform

TESTS = Path(__file__).parent

SCRIPT = """
import json, os, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
import openai
import prime_runs as pr
from _genai_model import ScriptedModel

from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider

if os.environ.get("OTEL_LOGS_EXPORTER"):  # zero-code: the SDK configures from the environment
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator

    _OTelSDKConfigurator().configure()
    provider = trace.get_tracer_provider()
else:  # the program's own set-up: a tracer and a logger provider, then prime-runs
    provider = TracerProvider()
    _logs.set_logger_provider(LoggerProvider())
pr.configure_exporter(provider)
OpenAIInstrumentor().instrument(
    tracer_provider=provider, logger_provider=_logs.get_logger_provider()
)
tracer = provider.get_tracer("agent")
run_attrs = {"prime.run.name": "genai-openai", "prime.run.environments": ["genai-env"]}
with ScriptedModel() as model:
    client = openai.OpenAI(base_url=model.base_url, api_key="sk-scripted")
    with tracer.start_as_current_span("run", attributes=run_attrs) as run:
        task = {"prime.task.key": "math:1", "prime.task.answer": "4", "prime.env.id": "genai-env"}
        with tracer.start_as_current_span("episode", attributes=task):
            messages = [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 2+2?"},
            ]
            tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
            first = client.chat.completions.create(model=MODEL_REQ, messages=messages, tools=tools)
            call = first.choices[0].message.tool_calls[0]
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
                    "gen_ai.tool.call.id": call.id}
            if os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
                tool["gen_ai.tool.call.result"] = "4"  # content, captured only when allowed
            with tracer.start_as_current_span("execute_tool add", attributes=tool):
                result = "4"
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            stream = client.chat.completions.create(
                model=MODEL_REQ, messages=messages, stream=True,
                stream_options={"include_usage": True},
            )
            answer = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            pr.record_score("correct", 1.0 if answer == "It is 4." else 0.0, label="pass")
        run_id = run.attributes["prime.run.id"]
provider.force_flush()
print(json.dumps({"run_id": run_id}))
""".replace("MODEL_REQ", repr("requested-model"))

LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Every content mode of the instrumentation: on spans, in log records, or both.
CONTENT_MODES = {
    "span-only": {**LATEST, CONTENT: "SPAN_ONLY"},
    "event-only": {**LATEST, CONTENT: "EVENT_ONLY"},  # one details log record per call
    "span-and-event": {**LATEST, CONTENT: "SPAN_AND_EVENT"},
    "default-true": {CONTENT: "true"},  # one log record per message
    "default-true-zero-code": {
        CONTENT: "true",
        "OTEL_LOGS_EXPORTER": "prime_runs",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
    },
}


def _run(prime_env: StandInPlatform, tmp_path: Path, extra: dict[str, str]) -> str:
    return run_script(prime_env, tmp_path, SCRIPT, extra)


def _episode(prime_env: StandInPlatform, run_id: str) -> dict[str, Any]:
    docs = [doc for doc in prime_env.traces.values() if doc["run"]["id"] == run_id]
    assert len(docs) == 1  # the episode's one trace document
    return docs[0]


def _calls_match_the_server(trace: dict[str, Any], reasons: list[str | None]) -> None:
    calls = trace["calls"]
    assert [call["model"] for call in calls] == [MODEL, MODEL]
    assert [call["usage"] for call in calls] == [
        {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]}
        for usage in (TOOL_USAGE, ANSWER_USAGE)
    ]
    assert [call.get("finish_reason") for call in calls] == reasons
    assert all(call["time"]["start"] <= call["time"]["end"] for call in calls)


def _evaluation_is_complete(prime_env: StandInPlatform, run_id: str) -> None:
    evaluation = prime_env.evaluations[run_id]
    assert evaluation["finalize_count"] == 1
    assert evaluation["metrics"]["avg_reward"] == 1.0
    assert len(prime_env.samples(run_id)) == 1  # one v0 row per episode


@pytest.mark.parametrize("mode", list(CONTENT_MODES))
def test_instrumented_client_with_content_on(
    prime_env: StandInPlatform, tmp_path: Path, mode: str
) -> None:
    run_id = _run(prime_env, tmp_path, CONTENT_MODES[mode])
    trace = _episode(prime_env, run_id)
    _calls_match_the_server(trace, ["tool_calls", "stop"])
    assert trace["rewards"]["correct"] == {"score": 1.0, "weight": 1.0, "label": "pass"}
    assert trace["task"]["key"] == "math:1"
    messages = [node["message"] for node in trace["nodes"]]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[1]["content"] == "What is 2+2?"
    (tool_call,) = messages[2]["tool_calls"]
    assert (tool_call["id"], tool_call["name"]) == ("call_1", "add")
    assert json.loads(tool_call["arguments"]) == {"a": 2, "b": 2}
    assert (messages[3]["tool_call_id"], messages[3]["content"]) == ("call_1", "4")
    assert messages[4]["content"] == ANSWER
    assert [node["sampled"] for node in trace["nodes"]] == [False, False, True, False, True]
    assert [call["node"] for call in trace["calls"]] == [2, 4]
    assert trace["info"]["genai"]["content_captured"] is True
    assert trace["info"]["genai"]["response_ids"] == ["cmpl-1", "cmpl-2"]
    assert trace["info"]["genai"]["providers"] == ["openai"]
    assert trace["agent"]["config"] == {"model": MODEL}
    _evaluation_is_complete(prime_env, run_id)
    (row,) = prime_env.samples(run_id)
    assert row["reward"] == 1.0
    assert pr.metrics.from_episodes([{"traces": [trace]}])["avg_reward"] == 1.0


def test_instrumented_client_with_content_off(prime_env: StandInPlatform, tmp_path: Path) -> None:
    run_id = _run(prime_env, tmp_path, {})  # the instrumentation's default: no content
    trace = _episode(prime_env, run_id)
    # A streamed call's span carries no finish reason; its choice log record does.
    _calls_match_the_server(trace, ["tool_calls", "stop"])
    assert trace["nodes"] == []
    assert trace["info"]["genai"]["content_captured"] is False
    assert trace["rewards"]["correct"]["score"] == 1.0
    _evaluation_is_complete(prime_env, run_id)

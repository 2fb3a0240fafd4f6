"""pydantic-ai agents, instrumented by pydantic-ai itself (format versions 2 to 6), under a
run against the stand-in platform: each agent run is one episode whose stored conversation
is the one the model saw, tool results with their real content included.

Real components: pydantic-ai-slim with its own ``FunctionModel``, a real tracer provider
with the run processor, the stand-in platform over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

import prime_runs as pr
from _genai_support import RUN_ATTRS, path
from _otel import platform_id
from prime_runs.testing import StandInPlatform

QUESTIONS = {"math:1": (2, 2), "math:2": (40, 2)}


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:  # the user's question: call the tool with its numbers
        a, b = (int(n) for n in str(messages[0].parts[-1].content).split("+"))
        return ModelResponse(parts=[ToolCallPart("add", {"a": a, "b": b}, tool_call_id="c1")])
    result = messages[-1].parts[0].content  # the tool's return value
    return ModelResponse(parts=[TextPart(f"It is {result}.")])


def _agent(provider: TracerProvider, version: int) -> Agent[None, str]:
    agent = Agent(FunctionModel(_model, model_name="fn-model"), system_prompt="Be brief.")
    agent.instrument = InstrumentationSettings(tracer_provider=provider, version=version)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


def _usage(result: Any) -> list[dict[str, int]]:
    """What the agent saw from its model, per call, in the record's terms."""
    return [
        {"prompt_tokens": m.usage.input_tokens, "completion_tokens": m.usage.output_tokens}
        for m in result.all_messages()
        if isinstance(m, ModelResponse)
    ]


@pytest.mark.filterwarnings("ignore:Instrumentation format versions")  # 2-4: deprecated
@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("episode_spans", [True, False], ids=["episode-spans", "agent-runs"])
def test_pydantic_ai_runs_replay_the_conversation_with_tool_results(
    prime_env: StandInPlatform, version: int, episode_spans: bool
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(pr.RunProcessor())
    agent = _agent(provider, version)
    tracer = provider.get_tracer("eval")
    seen = {}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS) as run:
        for key, (a, b) in QUESTIONS.items():
            if episode_spans:
                with tracer.start_as_current_span("episode", attributes={"prime.task.key": key}):
                    result = agent.run_sync(f"{a}+{b}")
                    pr.record_score("correct", float(result.output == f"It is {a + b}."))
            else:
                result = agent.run_sync(f"{a}+{b}")
            seen[f"{a}+{b}"] = result
        run_id = platform_id(run.attributes["prime.run.id"])
    provider.force_flush()
    docs = [doc for doc in prime_env.traces.values() if doc["run"]["id"] == run_id]
    assert len(docs) == len(QUESTIONS)  # one episode per episode span or agent run
    for doc in docs:
        question = doc["nodes"][1]["message"]["content"]
        result = seen[question]
        a, b = (int(n) for n in question.split("+"))
        assert len(doc["nodes"]) == 5  # no branch: resent history matched what was stored
        conversation = path(doc, doc["calls"][-1]["node"])
        assert [m["role"] for m in conversation] == [
            "system", "user", "assistant", "tool", "assistant",
        ]  # fmt: skip
        (call,) = conversation[2]["tool_calls"]
        assert (call["id"], call["name"]) == ("c1", "add")
        assert json.loads(call["arguments"]) == {"a": a, "b": b}
        assert (conversation[3]["tool_call_id"], conversation[3]["content"]) == ("c1", str(a + b))
        assert conversation[4]["content"] == result.output == f"It is {a + b}."
        assert [c["model"] for c in doc["calls"]] == ["fn-model", "fn-model"]
        assert [c["usage"] for c in doc["calls"]] == _usage(result)
        assert doc["agent"]["name"] == "agent"
        if episode_spans:
            assert doc["rewards"]["correct"]["score"] == 1.0
    evaluation = prime_env.evaluations[run_id]
    assert evaluation["finalize_count"] == 1
    assert len(prime_env.samples(run_id)) == len(QUESTIONS)

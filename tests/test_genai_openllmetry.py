"""OpenLLMetry's (traceloop) OpenAI instrumentation, streamed tool-call turn included,
against a scripted model server and the stand-in: the sampled tool call is on the path to
the final answer (its empty text part does not branch the conversation).
"""

from __future__ import annotations

import json
from pathlib import Path

from _genai_model import ANSWER, ANSWER_USAGE, MODEL, TOOL_USAGE
from _genai_producers import run_producer
from _genai_support import path
from prime_runs.testing import StandInPlatform


def test_openllmetry_streamed_tool_call_stays_on_the_answer_path(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    extra = {"TRACELOOP_TRACE_CONTENT": "true"}
    (doc,) = run_producer(prime_env, tmp_path, "opentelemetry.instrumentation.openai", extra)
    assert len(doc["nodes"]) == 5  # system, user, tool call, tool result, answer: no branch
    conversation = path(doc, doc["calls"][-1]["node"])
    assert [m["role"] for m in conversation] == ["system", "user", "assistant", "tool", "assistant"]
    assert conversation[1]["content"] == "What is 2+2?"
    assert conversation[2]["content"] is None  # the empty text part beside the tool call
    (call,) = conversation[2]["tool_calls"]
    assert (call["id"], call["name"]) == ("call_1", "add")
    assert json.loads(call["arguments"]) == {"a": 2, "b": 2}
    assert (conversation[3]["tool_call_id"], conversation[3]["content"]) == ("call_1", "4")
    assert conversation[4]["content"] == ANSWER
    assert doc["calls"][0]["node"] == 2 and doc["nodes"][2]["sampled"] is True
    assert [c["model"] for c in doc["calls"]] == [MODEL, MODEL]
    assert [c["usage"] for c in doc["calls"]] == [
        {"prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"]}
        for u in (TOOL_USAGE, ANSWER_USAGE)
    ]
    # OpenLLMetry says "tool_call" (the conventions' word); records say "tool_calls".
    assert [c["finish_reason"] for c in doc["calls"]] == ["tool_calls", "stop"]
    assert doc["rewards"]["correct"]["score"] == 1.0

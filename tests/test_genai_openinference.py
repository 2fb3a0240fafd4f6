"""OpenInference's OpenAI instrumentation (Arize's conventions: ``openinference.span.kind``,
``llm.*``) inside ``episode`` spans, against a scripted model server and the stand-in: the
episode holds the conversation, tool call and result, models and token counts.
"""

from __future__ import annotations

import json
from pathlib import Path

from _genai_model import ANSWER, ANSWER_USAGE, MODEL, TOOL_USAGE
from _genai_producers import run_producer
from _genai_support import path
from prime_runs.testing import StandInPlatform


def test_openinference_llm_spans_become_the_episode(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    (doc,) = run_producer(prime_env, tmp_path, "openinference.instrumentation.openai", {})
    assert len(doc["nodes"]) == 5
    conversation = path(doc, doc["calls"][-1]["node"])
    assert [m["role"] for m in conversation] == ["system", "user", "assistant", "tool", "assistant"]
    assert conversation[0]["content"] == "Be brief."
    (call,) = conversation[2]["tool_calls"]
    assert (call["id"], call["name"]) == ("call_1", "add")
    assert json.loads(call["arguments"]) == {"a": 2, "b": 2}
    assert (conversation[3]["tool_call_id"], conversation[3]["content"]) == ("call_1", "4")
    assert conversation[4]["content"] == ANSWER
    assert [c["model"] for c in doc["calls"]] == [MODEL, MODEL]
    assert [c["usage"] for c in doc["calls"]] == [
        {"prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"]}
        for u in (TOOL_USAGE, ANSWER_USAGE)
    ]
    assert [c.get("finish_reason") for c in doc["calls"]] == ["tool_calls", "stop"]
    assert doc["rewards"]["correct"]["score"] == 1.0
    assert doc["info"]["genai"]["content_captured"] is True

"""Helpers for the GenAI mapping tests: a provider with the run processor, message JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

import _archives
import prime_runs as pr

RUN_ATTRS = {"prime.run.name": "genai", "prime.run.environments": ["genai-env"]}


def provider() -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(pr.RunProcessor(mode="offline"))
    return tracer_provider


def archive(root: Path) -> _archives.Archive:
    return _archives.only(root)


def episodes(root: Path) -> list[dict[str, Any]]:
    return [record for record in archive(root).records() if "traces" in record]


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    part = {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}
    return {"role": "assistant", "parts": [part], "finish_reason": "tool_calls"}


def tool_result(call_id: str, response: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": response}],
    }


def chat_attrs(model: str, inputs: list, outputs: list, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.usage.input_tokens": usage[0],
        "gen_ai.usage.output_tokens": usage[1],
        "gen_ai.response.finish_reasons": [outputs[0].get("finish_reason", "stop")]
        if outputs
        else ["stop"],
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs),
    }


def path(trace: dict[str, Any], node: int) -> list[dict[str, Any]]:
    """The messages from the first one to ``node``, following parents."""
    found = []
    current: int | None = node
    while current is not None and len(found) <= len(trace["nodes"]):
        found.append(trace["nodes"][current]["message"])
        current = trace["nodes"][current]["parent"]
    return found[::-1]

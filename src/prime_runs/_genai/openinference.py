"""OpenInference spans (``openinference.span.kind``, ``llm.*``) read as GenAI spans.

Arize's conventions, used by the OpenInference instrumentations (OpenAI, LlamaIndex, DSPy,
smolagents, CrewAI, ...), flatten messages into indexed attributes
(``llm.input_messages.0.message.role``). An ``LLM`` span becomes a ``chat`` call with
``gen_ai.*`` attributes the mapping already reads; an ``AGENT`` span an ``invoke_agent``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import prime_runs._genai.names as names

SPAN_KIND = "openinference.span.kind"
LLM, AGENT, CHAIN = "LLM", "AGENT", "CHAIN"
ROOT_KINDS = frozenset({LLM, AGENT, CHAIN})  # directly under a run: one episode each
AGENT_NAME = "agent.name"
MAX_INDEX = 1024  # messages and tool calls read per span

_TOKENS = (
    ("llm.token_count.prompt", names.INPUT_TOKENS),
    ("llm.token_count.completion", names.OUTPUT_TOKENS),
    ("llm.token_count.prompt_details.cache_read", names.CACHED_TOKENS),
    ("llm.token_count.completion_details.reasoning", names.REASONING_TOKENS),
)


def kind(attrs: Mapping[str, Any]) -> str | None:
    value = attrs.get(SPAN_KIND)
    return value.upper() if isinstance(value, str) else None


def agent_name(attrs: Mapping[str, Any]) -> object:
    """``gen_ai.agent.name``, else an ``AGENT`` span's ``agent.name``."""
    name = attrs.get(names.AGENT_NAME)
    if name is None and kind(attrs) == AGENT:
        return attrs.get(AGENT_NAME)
    return name


def _tool_calls(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    parts = []
    for j in range(MAX_INDEX):
        call = f"{prefix}.tool_calls.{j}.tool_call"
        name = attrs.get(f"{call}.function.name")
        if name is None and f"{call}.id" not in attrs:
            break
        arguments = attrs.get(f"{call}.function.arguments", "")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass  # kept as the text it was
        parts.append(
            {"type": "tool_call", "id": attrs.get(f"{call}.id"), "name": name,
             "arguments": arguments}
        )  # fmt: skip
    return parts


def _contents(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """A message's ``contents`` list (text and images) as GenAI parts."""
    parts: list[dict[str, Any]] = []
    for j in range(MAX_INDEX):
        item = f"{prefix}.contents.{j}.message_content"
        kind_ = attrs.get(f"{item}.type")
        if kind_ is None:
            break
        if kind_ == "text":
            parts.append({"type": "text", "content": attrs.get(f"{item}.text")})
        else:  # an image (by URL) or another medium: the mapping reports it, not carried
            url = attrs.get(f"{item}.image.image.url")
            parts.append({"type": "uri", "modality": str(kind_), "uri": url})
    return parts


def _messages(attrs: Mapping[str, Any], which: str) -> list[dict[str, Any]]:
    found = []
    for i in range(MAX_INDEX):
        prefix = f"llm.{which}.{i}.message"
        role = attrs.get(f"{prefix}.role")
        if not isinstance(role, str):
            break
        parts: list[dict[str, Any]] = []
        content = attrs.get(f"{prefix}.content")
        if role == "tool":
            parts.append(
                {"type": "tool_call_response", "id": attrs.get(f"{prefix}.tool_call_id"),
                 "response": content}
            )  # fmt: skip
        elif content is not None:
            parts.append({"type": "text", "content": content})
        else:
            parts += _contents(attrs, prefix)
        parts += _tool_calls(attrs, prefix)
        found.append({"role": role, "parts": parts})
    return found


def as_genai(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``gen_ai.*`` reading of an OpenInference span (``attrs`` itself when it is not
    one, or already carries GenAI attributes)."""
    found = kind(attrs)
    if found is None or names.OPERATION in attrs:
        return attrs
    mapped: dict[str, Any] = dict(attrs)
    if found == AGENT:
        mapped[names.OPERATION] = "invoke_agent"
        if isinstance(attrs.get(AGENT_NAME), str):
            mapped[names.AGENT_NAME] = attrs[AGENT_NAME]
        return mapped
    if found != LLM:
        return attrs
    mapped[names.OPERATION] = "chat"
    if isinstance(attrs.get("llm.model_name"), str):
        mapped[names.RESPONSE_MODEL] = attrs["llm.model_name"]
    for source, target in _TOKENS:
        if source in attrs:
            mapped[target] = attrs[source]
    inputs, outputs = _messages(attrs, "input_messages"), _messages(attrs, "output_messages")
    if inputs:
        mapped[names.INPUT_MESSAGES] = json.dumps(inputs)
    if outputs:
        if isinstance(attrs.get("llm.finish_reason"), str):
            outputs[0]["finish_reason"] = attrs["llm.finish_reason"]
        mapped[names.OUTPUT_MESSAGES] = json.dumps(outputs)
    return mapped

"""GenAI messages (both conventions) as verifiers-style messages.

Current conventions put JSON lists of ``{role, parts}`` in span attributes; older
instrumentations send one span event per message (``gen_ai.user.message``,
``gen_ai.choice``, ...). Both become ``{role, content, tool_calls, tool_call_id}``.
Malformed values are reported through ``problems`` and left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from . import names

Message = dict[str, Any]


def _json(value: object, what: str, problems: list[str]) -> Any:
    if not isinstance(value, str):
        problems.append(f"{what} is a {type(value).__name__}, expected a JSON string")
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        problems.append(f"{what} is not valid JSON ({exc})")
        return None


def text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _arguments(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def from_parts(item: object) -> Message | None:
    """One current-convention message ``{role, parts: [...]}``."""
    if not isinstance(item, Mapping) or not isinstance(item.get("role"), str):
        return None
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    message: Message = {"role": item["role"]}
    for part in item.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and part.get("content") is not None:
            texts.append(text(part["content"]))
        elif kind == "tool_call":
            call = {"id": part.get("id"), "type": "function", "name": part.get("name")}
            call["arguments"] = _arguments(part.get("arguments", ""))
            calls.append(call)
        elif kind == "tool_call_response":
            message["role"] = "tool"
            message["tool_call_id"] = part.get("id")
            texts.append(text(part.get("response")))
    message["content"] = "".join(texts) if texts else None
    if calls:
        message["tool_calls"] = calls
    if isinstance(item.get("finish_reason"), str):  # taken off by the call (not a message key)
        message["finish_reason"] = item["finish_reason"]
    return message


def from_attribute(value: object, what: str, problems: list[str]) -> list[Message]:
    """A ``gen_ai.input.messages``/``output.messages`` attribute."""
    data = _json(value, what, problems)
    if data is None:
        return []
    if not isinstance(data, list):
        problems.append(f"{what} is not a JSON list of messages")
        return []
    found = [from_parts(item) for item in data]
    if any(message is None for message in found):
        problems.append(f"{what} has entries that are not {{role, parts}} messages")
    return [message for message in found if message is not None]


def system_instructions(value: object, problems: list[str]) -> list[Message]:
    """``gen_ai.system_instructions``: a JSON list of parts, one system message."""
    data = _json(value, names.SYSTEM_INSTRUCTIONS, problems)
    if not isinstance(data, list):
        return []
    texts = [text(p.get("content")) for p in data if isinstance(p, Mapping) and p.get("content")]
    return [{"role": "system", "content": "".join(texts)}] if texts else []


def _old_tool_calls(value: object) -> list[dict[str, Any]]:
    calls = []
    for call in value if isinstance(value, Sequence) and not isinstance(value, str) else ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        name = call.get("name", function.get("name"))
        arguments = call.get("arguments", function.get("arguments", ""))
        calls.append({"id": call.get("id"), "type": "function", "name": name})
        calls[-1]["arguments"] = _arguments(arguments)
    return calls


def from_body(role: str, body: Mapping[str, Any]) -> Message:
    """An older-convention event body (``{content, tool_calls, id}``) as a message."""
    content = body.get("content")
    message: Message = {"role": role, "content": None if content is None else text(content)}
    calls = _old_tool_calls(body.get("tool_calls"))
    if calls:
        message["tool_calls"] = calls
    if role == "tool":
        message["tool_call_id"] = body.get("id")
    return message


def from_events(events: Sequence[Any], problems: list[str]) -> tuple[list[Message], list[Message]]:
    """Input and output messages sent as span events (older conventions)."""
    inputs: list[Message] = []
    outputs: list[Message] = []
    for event in events:
        attrs = event.attributes or {}
        role = names.MESSAGE_EVENTS.get(event.name)
        if role is None and event.name != names.CHOICE_EVENT:
            continue
        body: Any = dict(attrs)
        if names.EVENT_CONTENT in attrs:
            body = _json(attrs[names.EVENT_CONTENT], f"{event.name} event content", problems)
        if not isinstance(body, Mapping):
            continue
        if role is not None:
            inputs.append(from_body(str(body.get("role") or role), body))
            continue
        inner = body.get("message")
        if isinstance(inner, str):
            inner = _json(inner, "gen_ai.choice message", problems)
        inner = inner if isinstance(inner, Mapping) else {}
        choice = from_body(str(inner.get("role") or "assistant"), inner)
        if body.get("finish_reason") is not None:
            choice["finish_reason"] = body.get("finish_reason")
        outputs.append(choice)
    return inputs, outputs


def key(message: Message) -> str:
    """What makes two messages the same node when a later call resends the history."""
    calls = [call.get("id") for call in message.get("tool_calls") or ()]
    parts = [message.get("role"), message.get("content"), message.get("tool_call_id"), calls]
    return json.dumps(parts, default=str)

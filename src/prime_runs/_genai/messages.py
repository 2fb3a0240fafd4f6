"""GenAI messages (both conventions) as verifiers-style messages.

Current conventions put JSON lists of ``{role, parts}`` in span attributes (``logs.merged``
turns log-record attributes into the same JSON); older instrumentations send one event per
message (``gen_ai.user.message``, ``gen_ai.choice``, ...). All become ``{role, content,
tool_calls, tool_call_id, name, reasoning_content}``. What instrumentations differ on is
normalised here so a resent history matches the node already stored: a tool result under
``response``, ``result`` or ``tool_response``; ``""`` beside tool calls versus ``null``.
Malformed values are reported through ``problems`` (``"<kind>: <detail>"``) and left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

import prime_runs._genai.names as names

Message = dict[str, Any]

MAX_DEPTH = 64  # nesting kept from a parsed value; deeper is left out (the record encoder's
# limit is far above this, and no real message needs more)
TOOL_RESULT_KEYS = ("response", "result", "tool_response")  # semconv, pydantic-ai, its v2
MEDIA_PARTS = frozenset({"blob", "uri", "file"})
TEXT_SEPARATOR = "\n"  # between text parts of one message


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value nests deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):  # JSON and log-record values: concrete types only
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
    return False


def parse(value: object, what: str, problems: list[str]) -> Any:
    """A JSON string, checked for depth. None, with a problem reported, when it cannot be
    used."""
    if not isinstance(value, str):
        problems.append(f"malformed {what}: a {type(value).__name__}, expected JSON")
        return None
    try:
        data = json.loads(value)
    except RecursionError:
        problems.append(f"too deeply nested {what}: nests too deeply to parse; left out")
        return None
    except ValueError as exc:
        problems.append(f"invalid JSON in {what}: {what} is not valid JSON ({exc})")
        return None
    # No walk when the text has too few brackets to nest that deep (the common case).
    if value.count("[") + value.count("{") > MAX_DEPTH and too_deep(data):
        problems.append(f"too deeply nested {what}: nests over {MAX_DEPTH} levels; left out")
        return None
    return data


def text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _arguments(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _is_list(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    return isinstance(value, (list, tuple))


def _tool_result(part: Mapping[str, Any]) -> Message:
    found = next((part[k] for k in TOOL_RESULT_KEYS if k in part), None)
    message: Message = {"role": "tool", "content": None if found is None else text(found)}
    message["tool_call_id"] = part.get("id")
    if isinstance(part.get("name"), str):
        message["name"] = part["name"]
    return message


class _Parts:
    """The parts of one ``{role, parts}`` message, split where tool results sit among them."""

    def __init__(self, role: str, problems: list[str]) -> None:
        self.role = role
        self.problems = problems
        self.texts: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.tools: list[Message] = []
        self.main_first = False  # a text/call part came before the first tool result

    def add(self, part: object) -> None:
        if not isinstance(part, Mapping):
            self.problems.append(f"malformed part: a {self.role} message part is not an object")
            return
        kind = part.get("type")
        if kind in ("text", "reasoning"):
            content = part.get("content")
            if content is not None and content != "":
                (self.texts if kind == "text" else self.reasoning).append(text(content))
        elif kind == "tool_call":
            call = {"id": part.get("id"), "type": "function", "name": part.get("name")}
            call["arguments"] = _arguments(part.get("arguments", ""))
            self.calls.append(call)
        elif kind == "tool_call_response":
            self.tools.append(_tool_result(part))
            return
        elif kind in MEDIA_PARTS:
            self.problems.append(f"part not carried: a {kind} part is left out")
            return
        else:
            self.problems.append(f"part not carried: a part of type {kind!r} is left out")
            return
        self.main_first = self.main_first or not self.tools

    def messages(self) -> list[Message]:
        main: Message = {"role": self.role}
        main["content"] = TEXT_SEPARATOR.join(self.texts) if self.texts else None
        if self.calls:
            main["tool_calls"] = self.calls
        if self.reasoning:
            main["reasoning_content"] = TEXT_SEPARATOR.join(self.reasoning)
        if not self.tools:
            return [main]
        if not (self.texts or self.calls or self.reasoning):
            return self.tools
        # Text beside tool results (a retry prompt, say) keeps its own role.
        return [main, *self.tools] if self.main_first else [*self.tools, main]


def from_parts(item: object, what: str, problems: list[str]) -> list[Message]:
    """One current-convention message ``{role, parts: [...]}`` (more than one message when
    it holds several tool results)."""
    if not isinstance(item, Mapping) or not isinstance(item.get("role"), str):
        problems.append(f"malformed message: {what} has an entry that is not a {{role, parts}}")
        return []
    parts = item.get("parts")
    found = _Parts(item["role"], problems)
    if parts is not None and not _is_list(parts):
        problems.append(
            f"malformed message: {what} has a {item['role']} message whose parts are a "
            f"{type(parts).__name__}, not a list; its content is left out"
        )
        parts = None
    for part in parts or ():
        found.add(part)
    result = found.messages()
    if isinstance(item.get("finish_reason"), str):  # taken off by the call (not a message key)
        result[-1]["finish_reason"] = item["finish_reason"]
    return result


def from_attribute(value: object, what: str, problems: list[str]) -> list[Message]:
    """A ``gen_ai.input.messages``/``output.messages`` value."""
    data = parse(value, what, problems)
    if data is None:
        return []
    if not _is_list(data):
        problems.append(f"malformed message: {what} is not a list of messages")
        return []
    return [message for item in data for message in from_parts(item, what, problems)]


def system_instructions(value: object, problems: list[str]) -> list[Message]:
    """``gen_ai.system_instructions``: a list of parts, one system message."""
    data = parse(value, names.SYSTEM_INSTRUCTIONS, problems)
    if data is None:
        return []
    if not _is_list(data):
        problems.append(f"malformed message: {names.SYSTEM_INSTRUCTIONS} is not a list of parts")
        return []
    texts = [text(p.get("content")) for p in data if isinstance(p, Mapping) and p.get("content")]
    return [{"role": "system", "content": TEXT_SEPARATOR.join(texts)}] if texts else []


def _old_tool_calls(value: object) -> list[dict[str, Any]]:
    calls = []
    for call in value if isinstance(value, Sequence) and not isinstance(value, str) else ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
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


def _event_body(event: Any, problems: list[str]) -> Any:
    attrs = event.attributes or {}
    if names.EVENT_CONTENT in attrs:
        return parse(attrs[names.EVENT_CONTENT], f"{event.name} event content", problems)
    body = dict(attrs)
    return None if too_deep(body) else body


def _has_content(body: Mapping[str, Any]) -> bool:
    """Whether an event body was captured with content: with capture off, instrumentations
    send the role, and tool calls without their arguments."""
    calls = body.get("tool_calls")
    if "content" in body:
        return True
    return _is_list(calls) and any(
        isinstance(c, Mapping) and ("arguments" in c or "arguments" in (c.get("function") or {}))
        for c in calls
    )


def from_events(
    events: Sequence[Any], problems: list[str]
) -> tuple[list[Message], list[Message], str | None]:
    """Input and output messages sent as span events or log records (older conventions),
    and the first choice's finish reason. Events sent with content capture off carry no
    message (only a role, or a finish reason): they add no node."""
    inputs: list[Message] = []
    outputs: list[Message] = []
    reason = None
    for event in events:
        role = names.MESSAGE_EVENTS.get(event.name)
        if role is None and event.name != names.CHOICE_EVENT:
            continue
        body = _event_body(event, problems)
        if not isinstance(body, Mapping):
            continue
        if role is not None:
            if _has_content(body):
                inputs.append(from_body(str(body.get("role") or role), body))
            continue
        if reason is None and isinstance(body.get("finish_reason"), str):
            reason = body["finish_reason"]
        inner = body.get("message")
        if isinstance(inner, str):
            inner = parse(inner, "gen_ai.choice message", problems)
        inner = inner if isinstance(inner, Mapping) else {}
        if _has_content(inner):
            outputs.append(from_body(str(inner.get("role") or "assistant"), inner))
    return inputs, outputs, reason


def _canonical(content: object) -> object:
    """Content as compared: ``""`` is ``null``, and JSON text compares by value (one
    instrumentation writes ``{"a": 1}``, another ``{"a":1}``)."""
    if content == "":
        return None
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(content), sort_keys=True, separators=(",", ":"))
        except (ValueError, RecursionError):
            return content
    return content


def key(message: Message) -> tuple[Any, ...]:
    """What makes two messages the same node when a later call resends the history
    (compared for equality only)."""
    calls = tuple(call.get("id") for call in message.get("tool_calls") or ())
    content = _canonical(message.get("content"))
    return (message.get("role"), content, message.get("tool_call_id"), calls)

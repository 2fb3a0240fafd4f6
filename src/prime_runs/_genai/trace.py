"""One agent's GenAI spans as a verifiers-style trace: ``calls`` and the ``nodes`` graph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import prime_runs._genai.messages as messages
import prime_runs._genai.names as names
from prime_runs._genai.messages import Message

NS = 1e-9  # span times are nanoseconds; records use seconds


def seconds(value: int | None) -> float | None:
    return None if value is None else value * NS


def _int(attrs: Mapping[str, Any], name: str, problems: list[str]) -> int | None:
    value = attrs.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"malformed token count: {name}={value!r} is not a token count; left out")
        return None
    return value


def usage(attrs: Mapping[str, Any], problems: list[str]) -> dict[str, int] | None:
    """verifiers usage: ``prompt_tokens`` excludes cache reads (input = prompt + cached)."""
    given = _int(attrs, names.INPUT_TOKENS, problems)
    if given is None:
        given = _int(attrs, names.OLD_INPUT_TOKENS, problems)
    output = _int(attrs, names.OUTPUT_TOKENS, problems)
    if output is None:
        output = _int(attrs, names.OLD_OUTPUT_TOKENS, problems)
    cached = _int(attrs, names.CACHED_TOKENS, problems)
    reasoning = _int(attrs, names.REASONING_TOKENS, problems)
    if given is None and output is None:
        return None
    result = {"prompt_tokens": max(0, (given or 0) - (cached or 0))}
    result["completion_tokens"] = output or 0
    if cached is not None:
        result["cached_input_tokens"] = cached
    if reasoning is not None:
        result["reasoning_tokens"] = reasoning
    return result


def error_of(span: ReadableSpan) -> dict[str, Any] | None:
    attrs = span.attributes or {}
    if span.status.status_code is not StatusCode.ERROR and names.ERROR_TYPE not in attrs:
        return None
    kind = attrs.get(names.ERROR_TYPE)
    return {"type": str(kind or "error"), "message": span.status.description or ""}


class TraceBuilder:
    """Accumulates one agent's calls and message graph, span by span, in start order."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.path: list[int] = []  # node indexes of the conversation so far
        self._keys: list[tuple[Any, ...]] = []  # messages.key of each node, computed once
        self.captured = False
        self.problems: list[str] = []
        self.seen: dict[str, list[str]] = {}  # providers, response ids, agent ids (trace info)
        self.cache_writes = 0  # input tokens written to a prompt cache, over all calls

    def _extend(self, wanted: Sequence[Message], when: float | None) -> None:
        """Make ``path`` equal ``wanted``: reuse the common prefix, branch after it."""
        keys = [messages.key(m) for m in wanted]
        same = 0
        while same < min(len(keys), len(self.path)) and self._keys[self.path[same]] == keys[same]:
            same += 1
        del self.path[same:]
        for message in wanted[same:]:
            self._add(message, sampled=False, when=when)

    def _add(self, message: Message, sampled: bool, when: float | None) -> int:
        node: dict[str, Any] = {"message": message, "sampled": sampled}
        node["parent"] = self.path[-1] if self.path else None
        if when is not None:
            node["timestamp"] = when
        self.nodes.append(node)
        self._keys.append(messages.key(message))
        self.path.append(len(self.nodes) - 1)
        return len(self.nodes) - 1

    def _messages(
        self, attrs: Mapping[str, Any], events: Sequence[Any]
    ) -> tuple[list[Message], list[Message], bool, str | None]:
        problems = self.problems
        inputs: list[Message] = []
        if names.SYSTEM_INSTRUCTIONS in attrs:
            inputs += messages.system_instructions(attrs[names.SYSTEM_INSTRUCTIONS], problems)
        seen = names.INPUT_MESSAGES in attrs or names.OUTPUT_MESSAGES in attrs
        if names.INPUT_MESSAGES in attrs:
            inputs += messages.from_attribute(attrs[names.INPUT_MESSAGES], "input", problems)
        outputs: list[Message] = []
        if names.OUTPUT_MESSAGES in attrs:
            outputs = messages.from_attribute(attrs[names.OUTPUT_MESSAGES], "output", problems)
        old_in, old_out, reason = messages.from_events(events, problems)
        seen = seen or bool(old_in or old_out)
        return inputs + old_in, outputs + old_out, seen, reason

    def add_call(self, span: ReadableSpan, attrs: Mapping[str, Any], events: Sequence[Any]) -> None:
        """A model call span; ``attrs``/``events`` are its own with its log records merged."""
        inputs, outputs, seen, event_reason = self._messages(attrs, events)
        self.captured = self.captured or seen
        start, end = seconds(span.start_time), seconds(span.end_time)
        if inputs:
            self._extend(inputs, start)
        call: dict[str, Any] = {"time": {"start": start, "end": end}}
        model = attrs.get(names.RESPONSE_MODEL, attrs.get(names.REQUEST_MODEL))
        if isinstance(model, str):
            call["model"] = model
        self.note(attrs)
        reasons = attrs.get(names.FINISH_REASONS)
        if isinstance(reasons, Sequence) and not isinstance(reasons, str) and reasons:
            call["finish_reason"] = str(reasons[0])
        call_usage = usage(attrs, self.problems)
        if call_usage is not None:
            call["usage"] = call_usage
        for name in names.CACHE_WRITE_TOKENS:
            written = _int(attrs, name, self.problems)
            if written is not None:
                self.cache_writes += written
                break
        sampling = {
            k: attrs[names.SAMPLING_PREFIX + k]
            for k in names.SAMPLING_KEYS
            if names.SAMPLING_PREFIX + k in attrs
        }
        if sampling:
            call["sampling"] = {
                k: list(v) if isinstance(v, tuple) else v for k, v in sampling.items()
            }
        error = error_of(span)
        if error is not None:
            call["error"] = error
        reasons = [m.pop("finish_reason", None) for m in inputs + outputs]
        if "finish_reason" not in call and outputs and isinstance(reasons[len(inputs)], str):
            call["finish_reason"] = reasons[len(inputs)]  # streams often only carry it here
        elif "finish_reason" not in call and event_reason is not None:
            call["finish_reason"] = event_reason
        if call.get("finish_reason") in names.FINISH_REASON_ALIASES:
            call["finish_reason"] = names.FINISH_REASON_ALIASES[call["finish_reason"]]
        if outputs:  # the first choice continues the conversation
            call["node"] = self._add(outputs[0], sampled=True, when=end)
        self.calls.append(call)

    def note(self, attrs: Mapping[str, Any]) -> None:
        """Identifiers the record has no field for, kept in ``info.genai``."""
        for key, names_ in (
            ("providers", (names.PROVIDER, names.SYSTEM)),
            ("response_ids", (names.RESPONSE_ID,)),
            ("agent_ids", (names.AGENT_ID,)),
        ):
            value = next((attrs[n] for n in names_ if isinstance(attrs.get(n), str)), None)
            found = self.seen.setdefault(key, [])
            if value is not None and (key == "response_ids" or value not in found):
                found.append(value)

    def add_tool(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        """An ``execute_tool`` span: its result becomes a tool message when it was captured."""
        key = next((k for k in names.TOOL_RESULTS if k in attrs), None)
        if key is None:
            return
        message: Message = {"role": "tool", "content": messages.text(attrs[key])}
        message["tool_call_id"] = attrs.get(names.TOOL_CALL_ID)
        if isinstance(attrs.get(names.TOOL_NAME), str):
            message["name"] = attrs[names.TOOL_NAME]
        self.captured = True
        self._extend(
            [self.nodes[i]["message"] for i in self.path] + [message], seconds(span.end_time)
        )

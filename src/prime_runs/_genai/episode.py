"""An episode span (or a top-level GenAI span) and the spans under it, as an episode record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import prime_runs._genai.messages as messages
import prime_runs._genai.names as names
import prime_runs._genai.openinference as openinference
import prime_runs._genai.unmapped as unmapped
from prime_runs._genai.logs import LogEvent, merged
from prime_runs._genai.trace import TraceBuilder, error_of, seconds
from prime_runs.semconv import EPISODE_SPAN

DEFAULT_AGENT = "agent"
WRITTEN_ON_EPISODE = (
    "calls written on the episode span: an instrumentation wrote its model call onto the "
    "episode span itself (LiteLLM's otel callback does, to the current span), so only the "
    "last write of each attribute is kept; give each call a span of its own "
    "(docs/integrations.md, LiteLLM)"
)


def _is_call(span: ReadableSpan) -> bool:
    attrs = openinference.as_genai(span.attributes or {})
    return attrs.get(names.OPERATION) in names.CALL_OPERATIONS


def _agent_of(span: ReadableSpan, by_id: Mapping[int, ReadableSpan]) -> str | None:
    """The nearest agent name (``gen_ai.agent.name``, or an OpenInference ``AGENT`` span's
    ``agent.name``) on the span or its ancestors."""
    seen = 0
    current: ReadableSpan | None = span
    while current is not None and seen < 256:  # bounded: a parent cycle cannot loop
        name = openinference.agent_name(current.attributes or {})
        if isinstance(name, str) and name:
            return name
        parent = current.parent
        current = by_id.get(parent.span_id) if parent is not None else None
        seen += 1
    return None


def _score(event: Any, problems: list[str]) -> tuple[str, dict[str, Any]] | None:
    attrs = event.attributes or {}
    name = attrs.get(names.EVALUATION_NAME)
    if not isinstance(name, str) or not name:
        problems.append(
            f"malformed evaluation: a {names.EVALUATION_EVENT} event has no {names.EVALUATION_NAME}"
        )
        return None
    value = attrs.get(names.EVALUATION_SCORE)
    entry: dict[str, Any] = {"score": None, "weight": 1.0}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        entry["score"] = float(value)
    elif value is not None:
        problems.append(
            f"malformed evaluation: evaluation {name!r} has a score {value!r} that is not a number"
        )
    for key, attr in (
        ("label", names.EVALUATION_LABEL),
        ("explanation", names.EVALUATION_EXPLANATION),
    ):
        if isinstance(attrs.get(attr), str):
            entry[key] = attrs[attr]
    return name, entry


def rewards_of(events: Sequence[Any], problems: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.name == names.EVALUATION_EVENT:
            scored = _score(event, problems)
            if scored is not None:
                found[scored[0]] = scored[1]
    return found


def task_of(span: ReadableSpan, problems: list[str]) -> dict[str, Any] | None:
    """``prime.task.*`` attributes on the episode span as ``task`` (absent when none)."""
    attrs = span.attributes or {}
    data: dict[str, Any] = {}
    raw = attrs.get(names.TASK_DATA)
    if raw is not None:
        parsed = messages.parse(raw, names.TASK_DATA, problems)
        if isinstance(parsed, dict):
            data.update(parsed)
        elif parsed is not None:
            problems.append(f"malformed task data: {names.TASK_DATA} is not a JSON object")
    for key in names.TASK_KEYS:
        value = attrs.get(names.TASK_PREFIX + key)
        if value is not None and key != "key":
            data[key] = list(value) if isinstance(value, tuple) else value
    if not data and names.TASK_PREFIX + "key" not in attrs:
        return None
    task: dict[str, Any] = {"data": data}
    if isinstance(attrs.get(names.TASK_PREFIX + "key"), str):
        task["key"] = attrs[names.TASK_PREFIX + "key"]
    return task


def _trace(agent: str, builder: TraceBuilder, spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    starts = [s.start_time for s in spans if s.start_time is not None]
    ends = [s.end_time for s in spans if s.end_time is not None]
    errors = [e for e in (error_of(s) for s in spans) if e is not None]
    trace: dict[str, Any] = {
        "agent": {"name": agent},
        "timing": {"start": seconds(min(starts)), "end": seconds(max(ends)) if ends else None},
        "nodes": builder.nodes,
        "calls": builder.calls,
        "rewards": {},
        "ok": not errors,
        "errors": errors,
        "info": {"genai": {"semconv": names.SEMCONV_VERSION, "content_captured": builder.captured}},
    }
    trace["info"]["genai"].update({k: v for k, v in builder.seen.items() if v})
    if builder.cache_writes:
        trace["info"]["genai"]["cache_write_input_tokens"] = builder.cache_writes
    models = [call["model"] for call in builder.calls if "model" in call]
    if models:  # what the sample table shows as the model
        trace["agent"]["config"] = {"model": models[0]}
    return trace


@dataclass
class _Walk:
    """What the spans of one episode hold, per agent (``""``: the episode span itself)."""

    builders: dict[str, TraceBuilder] = field(default_factory=dict)
    members: dict[str, list[ReadableSpan]] = field(default_factory=dict)
    rewards: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    unmapped: set[str] = field(default_factory=set)  # conventions seen but not read


def _walk(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    logs: Mapping[int, Sequence[LogEvent]],
    root_agent: str,
    problems: list[str],
) -> _Walk:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    walk = _Walk()
    for span in sorted([*spans, root], key=lambda s: s.start_time or 0):
        attrs, events = merged(span, logs.get(span.context.span_id, ()), problems)
        attrs = openinference.as_genai(attrs)
        operation = attrs.get(names.OPERATION)
        agent = _agent_of(span, by_id) or root_agent
        if operation in names.ROOT_OPERATIONS or operation == names.TOOL_OPERATION:
            builder = walk.builders.setdefault(agent, TraceBuilder())
            walk.members.setdefault(agent, []).append(span)
            if operation in names.CALL_OPERATIONS:
                builder.add_call(span, attrs, events)
            elif operation == names.TOOL_OPERATION:
                builder.add_tool(span, attrs)
            else:
                builder.note(attrs)  # an agent span: its id
        elif isinstance(operation, str) and operation != names.WORKFLOW_OPERATION:
            walk.unmapped.add(f"{names.OPERATION}={operation}")
        elif openinference.kind(attrs) is not None and operation is None:
            walk.unmapped.add(f"{openinference.SPAN_KIND}={openinference.kind(attrs)}")
        found = rewards_of(events, problems)
        if found:
            walk.rewards.setdefault("" if span is root else agent, {}).update(found)
    return walk


def _drop_empty_agents(
    builders: dict[str, TraceBuilder], members: dict[str, list[ReadableSpan]]
) -> None:
    """An agent span with no call or message of its own (the Agents SDK's workflow span,
    unnamed, around the named agent) makes no trace when another agent's trace has some."""
    empty = [agent for agent, b in builders.items() if not b.calls and not b.nodes]
    if len(empty) < len(builders):
        for agent in empty:
            del builders[agent], members[agent]


def build(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    logs: Mapping[int, Sequence[LogEvent]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The episode record for ``root`` and the spans that ended under it (any order), with
    the log records emitted in those spans (by span id)."""
    problems: list[str] = []
    root_agent = _agent_of(root, {}) or DEFAULT_AGENT
    walk = _walk(root, spans, logs or {}, root_agent, problems)
    builders, members, rewards = walk.builders, walk.members, walk.rewards
    if not any(builder.calls for builder in builders.values()):
        if walk.unmapped:
            problems.append(
                "nothing mapped: spans of " + ", ".join(sorted(walk.unmapped)) + " were under "
                "it, and none a model call the mapping reads"
            )
        else:
            problems.append(unmapped.explain(spans))
    elif root.name == EPISODE_SPAN and _is_call(root):
        problems.append(WRITTEN_ON_EPISODE)
    _drop_empty_agents(builders, members)
    if not builders:  # an episode span with no GenAI work under it: one empty trace
        builders[root_agent] = TraceBuilder()
        members[root_agent] = [root]
    # The episode's own scores, and those outside any agent's trace, go to the trace that
    # represents the episode (the first).
    first = root_agent if root_agent in builders else next(iter(builders))
    for owner in [name for name in rewards if name not in builders]:
        rewards.setdefault(first, {}).update(rewards.pop(owner))
    for builder in builders.values():
        problems += builder.problems
    context = root.context
    episode_id = f"ep_{context.trace_id:032x}{context.span_id:016x}"
    traces: list[dict[str, Any]] = []
    for agent, builder in builders.items():
        trace = _trace(agent, builder, members[agent])
        trace["id"] = f"tr_{context.span_id:016x}_{len(traces)}"
        trace["rewards"] = rewards.get(agent, {})
        traces.append(trace)
    root_error = error_of(root)
    errors = [root_error] if root_error is not None else []
    env_id = (root.attributes or {}).get(names.ENV_ID)
    record: dict[str, Any] = {
        "id": episode_id,
        "env": {"id": env_id if isinstance(env_id, str) else ""},
        "ok": root_error is None and all(t["ok"] for t in traces),
        "errors": errors,
        "traces": traces,
    }
    task = task_of(root, problems)
    if task is not None:
        record["task"] = task
        for trace in traces:
            trace["task"] = task
    if root.status.status_code is StatusCode.ERROR and not errors:
        record["ok"] = False
    return record, problems

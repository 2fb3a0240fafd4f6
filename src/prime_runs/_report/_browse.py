"""The episode browser's content: each chosen episode as conversations the page can show.

Per trace: agent, reward and its parts, metrics, stop condition, errors, usage, and the
messages of every branch (a root-to-leaf path of the message graph, as ``_records``
computes it). Only what is displayed is kept; one long string is cut at ``TEXT_LIMIT``
characters with a note of how much was left out.

Large runs: full content is embedded only for as many episodes as fit in a byte budget.
Which ones: every example's episodes take turns (so each example shows at least one when
possible), and within an example the failed ones come first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import prime_runs._records.access as _records
from prime_runs._report._episode import EpisodeSummary, number

TEXT_LIMIT = 20_000
TRACEBACK_LIMIT = 8_000


def clip(value: Any, limit: int = TEXT_LIMIT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters not embedded in the report]"


def _mapping(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` when it is a mapping, else an empty one (a missing or malformed field)."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _content(content: Any) -> str:
    """A message's content as text: parts are joined, an image becomes a placeholder."""
    if content is None:
        return ""
    if isinstance(content, str):
        return clip(content)
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            part = part if isinstance(part, Mapping) else {"text": part}
            if part.get("type") == "image_url":
                parts.append("[image]")
            else:
                text = part.get("text")
                parts.append(text if isinstance(text, str) else str(part))
        return clip("\n".join(parts))
    return clip(content)


def message(raw: Any) -> dict[str, Any]:
    raw = raw if isinstance(raw, Mapping) else {}
    out: dict[str, Any] = {
        "role": str(raw.get("role") or "?"),
        "content": _content(raw.get("content")),
    }
    if raw.get("reasoning_content"):
        out["reasoning"] = clip(raw["reasoning_content"])
    calls = raw.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            {
                "id": str(c.get("id") or ""),
                "name": str(c.get("name") or c.get("function", {}).get("name") or "?"),
                "arguments": clip(
                    c.get("arguments") or c.get("function", {}).get("arguments") or ""
                ),
            }
            for c in calls
            if isinstance(c, Mapping)
        ]
    for key in ("tool_call_id", "name"):
        if isinstance(raw.get(key), str):
            out[key] = raw[key]
    return out


def error(raw: Any) -> dict[str, Any]:
    raw = raw if isinstance(raw, Mapping) else {"message": raw}
    out = {"type": str(raw.get("type") or "Error"), "message": clip(raw.get("message") or "")}
    if raw.get("traceback"):
        out["traceback"] = clip(raw["traceback"], TRACEBACK_LIMIT)
    return out


def _branches(trace: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    try:
        views = _records.branches(trace, bare=False)
    except (AttributeError, TypeError, KeyError, IndexError):
        return []
    return [[message(m) for m in view.messages] for view in views]


def trace_doc(trace: Mapping[str, Any], summary: bool) -> dict[str, Any]:
    agent = _mapping(trace, "agent")
    config = _mapping(agent, "config")
    rewards = _mapping(trace, "rewards")
    metrics = _mapping(trace, "metrics")
    calls = [c for c in trace.get("calls") or () if isinstance(c, Mapping)]
    try:
        reward = number(_records.reward(trace))
        usage = _records.usage(trace)
    except (AttributeError, TypeError):
        reward, usage = None, None
    return {
        "id": str(trace.get("id") or ""),
        "agent": str(agent.get("name") or "agent"),
        "trainable": _records.is_trainable(trace),
        "summary": summary,
        "model": str(config.get("model") or ""),
        "reward": reward,
        "rewards": {
            str(k): [number(v.get("score")), number(v.get("weight"))]
            for k, v in rewards.items()
            if isinstance(v, Mapping)
        },
        "metrics": {str(k): number(v) for k, v in metrics.items()},
        "stop": trace.get("stop_condition")
        if isinstance(trace.get("stop_condition"), str)
        else None,
        "ok": bool(trace.get("ok", False)),
        "errors": [error(e) for e in trace.get("errors") or () if e],
        "call_errors": [error(c["error"]) for c in calls if c.get("error")],
        "usage": {k: number(v) for k, v in (usage or {}).items()},
        "branches": _branches(trace),
    }


def episode_doc(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the browser shows of one record (an episode, or a bare trace as one)."""
    if _records.is_episode(record):
        traces = [t for t in record.get("traces") or () if isinstance(t, Mapping)]
    else:
        traces = [record]
    chosen = _records.summary_trace_index(traces) if traces else -1
    task = _mapping(record, "task")
    data = _mapping(task, "data")
    return {
        "id": str(record.get("id") or ""),
        "answer": clip(data["answer"], 2_000) if "answer" in data else None,
        "errors": [error(e) for e in record.get("errors") or () if e]
        if _records.is_episode(record)
        else [],
        "traces": [trace_doc(t, i == chosen) for i, t in enumerate(traces)],
    }


IO_LIMIT = 200  # characters of an example's input, target or output in its table row


def _said(messages: Sequence[Any], role: str, last: bool) -> str | None:
    said = [m for m in messages if isinstance(m, Mapping) and m.get("role") == role]
    if not said:
        return None
    text = _content(said[-1 if last else 0].get("content"))
    return clip(text, IO_LIMIT) if text else None


def input_target_output(record: Mapping[str, Any]) -> list[str | None]:
    """What an example's table row shows of one of its episodes: the first user message,
    the expected answer (``task.data.answer``) and the final assistant message of the
    summary trace (None where the record has none)."""
    if _records.is_episode(record):
        traces = [t for t in record.get("traces") or () if isinstance(t, Mapping)]
    else:
        traces = [record]
    task = _mapping(record, "task")
    data = _mapping(task, "data")
    answer = data.get("answer")
    target = clip(answer, IO_LIMIT) if answer is not None else None
    if not traces:
        return [None, target, None]
    try:
        views = _records.branches(traces[_records.summary_trace_index(traces)], bare=False)
    except (AttributeError, TypeError, KeyError, IndexError):
        views = []
    messages = views[0].messages if views else []
    return [_said(messages, "user", False), target, _said(messages, "assistant", True)]


def browse_order(episodes: Sequence[EpisodeSummary]) -> list[int]:
    """Positions in the order their content is embedded: examples take turns, failed first."""
    per_example: dict[str, list[int]] = {}
    for position, episode in enumerate(episodes):
        per_example.setdefault(episode.example.key, []).append(position)
    queues = [sorted(q, key=lambda p: (episodes[p].ok, p)) for q in per_example.values()]
    order: list[int] = []
    depth = 0
    while len(order) < len(episodes):
        for queue in queues:
            if depth < len(queue):
                order.append(queue[depth])
        depth += 1
    return order

"""An episode record's traces read from its bytes for its v0 summary row, with the values
the row only copies (messages, tools, task data, timing, metrics, info, errors) left as the
raw JSON they already are (``msgspec.Raw``).

The row builder (``_records.v0rows``) reads these traces as it reads decoded ones: each is
a plain mapping whose values the row reads (ids, the agent, calls, rewards, the stop
condition, ``task.data.idx``) are decoded, and whose copied values are raw. The row's
encoder writes raw values back verbatim, so a record is neither decoded whole nor encoded
again inside its row, and its long strings never become ``str`` objects. Only bytes orjson
wrote come here (valid UTF-8, finite numbers, no integer past 64 bits), so a raw copy
decodes to what a decode and an encode would give; anything the types below do not
describe is left to the whole decode, which reports it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

import prime_runs._records.access as _records
from prime_runs._records.skeleton import Spliced, slot, splice

__all__ = ["episode_source", "summary_row"]

_NULL = msgspec.Raw(b"null")


# Each default is what ``_records.field`` gives for a missing key (see ``v0rows.trace_row``).
class _Agent(msgspec.Struct):
    name: Any = "agent"
    trainable: Any = True


class _Task(msgspec.Struct):
    data: dict[str, msgspec.Raw] | None = None


class _Node(msgspec.Struct):
    parent: Any = None
    message: msgspec.Raw = _NULL


class _Call(msgspec.Struct):
    node: Any = None
    error: Any = None
    finish_reason: Any = None
    usage: dict[str, Any] | None = None


class _Trace(msgspec.Struct):
    id: Any = None
    task: _Task | None = None
    agent: _Agent | None = None
    tools: list[msgspec.Raw] | None = None
    nodes: list[_Node] | None = None
    calls: list[_Call] | None = None
    rewards: Any = None
    metrics: dict[str, msgspec.Raw] | None = None
    info: dict[str, msgspec.Raw] | None = None
    is_completed: Any = False
    stop_condition: Any = None
    errors: list[Any] | None = None  # decoded: the row's error is the last, if truthy
    timing: msgspec.Raw = _NULL


class _Episode(msgspec.Struct):
    id: Any = None
    traces: list[_Trace] | None = None
    # A finished v0 row passes through as it is: only its presence matters.
    sample_id: msgspec.Raw = msgspec.Raw(b"")


_EPISODE = msgspec.json.Decoder(_Episode)
_ANY = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()


class Source(NamedTuple):
    """An episode as its summary row reads it: its id, and its summary trace."""

    episode_id: Any
    trace: _Trace
    trace_index: int


def episode_source(data: bytes) -> Source | None:
    """The episode in ``data`` (bytes orjson wrote) as its summary row reads it, or None
    when the whole decode must decide: not an episode with traces, a v0 row, or a value of
    another type than a record's (the whole decode reports what is wrong). Only the
    summary trace is read whole; of the others, their agent (which one is the summary)."""
    try:
        episode = _EPISODE.decode(data)
        if not episode.traces or len(episode.sample_id):
            return None
        agents = [{"agent": _agent(trace.agent)} for trace in episode.traces]
        index = _records.summary_trace_index(agents)
        return Source(episode.id, episode.traces[index], index)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def example_idx(source: Source) -> Any:
    """``task.data.idx``, decoded: the rollout counters' key."""
    data = source.trace.task.data if source.trace.task is not None else None
    return _ANY.decode(data["idx"]) if data is not None and "idx" in data else None


def _agent(agent: _Agent | None) -> dict[str, Any] | None:
    return None if agent is None else {"name": agent.name, "trainable": agent.trainable}


def summary_row(source: Source, number: int, data: bytes) -> Spliced | None:
    """The summary row of :func:`episode_source`'s episode, as parts with ``data`` (the
    record) among them as its native wrapper and the last branch's messages as its
    completion (written once more in its trajectory, as ``v0bytes`` writes them); None if
    the row cannot be told from the record's (the caller projects the record whole). The
    same row as ``v0rows.episode_row`` gives for the decoded record, from the same helpers."""
    try:
        row = _row(source, number, slot(0))
        pieces: list[Any] = [data]
        if row["completion"]:
            pieces.append(b"[" + b",".join(row["completion"]) + b"]")
            row["completion"] = slot(1)
        encoded = _ENCODER.encode(row)
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError):
        return None  # an odd value inside: the whole decode reports it
    seen: list[int] = []

    def piece_of(number: int) -> Any:
        seen.append(number)
        return pieces[number] if number < len(pieces) else None

    parts = splice(encoded, piece_of)
    if parts is None or sorted(seen) != list(range(len(pieces))):
        return None  # the record quotes a slot: no telling which is which
    return Spliced(parts)


def _row(source: Source, number: int, native: str) -> dict[str, Any]:
    trace = source.trace
    data = trace.task.data if trace.task is not None else None
    agent = trace.agent
    # What the shared helpers read, as the mapping they read it from.
    semantic: dict[str, Any] = {
        "stop_condition": trace.stop_condition,
        "rewards": trace.rewards,
        "calls": [_call(call) for call in trace.calls] if trace.calls else trace.calls,
        "nodes": [_node(node) for node in trace.nodes] if trace.nodes else trace.nodes,
    }
    branches = _records.branches(semantic, bare=False)
    errors = trace.errors
    row: dict[str, Any] = {
        "sample_id": source.episode_id,
        "example_id": example_idx(source),
        "rollout_number": number,
        "episode_id": source.episode_id,
        "agent": "agent" if agent is None else agent.name,
        "trainable": True if agent is None else agent.trainable,
        "task": data,
        "prompt": [],
        "completion": branches[-1].messages if branches else [],
        "answer": data.get("answer") if data is not None else None,
        "tool_defs": trace.tools or None,
        "reward": _records.reward(semantic),
        "timing": trace.timing,
        "is_completed": trace.is_completed,
        "is_truncated": _records.is_truncated(semantic),
        "metrics": trace.metrics or {},
        "error": (errors[-1] or None) if errors else None,
        "stop_condition": trace.stop_condition,
        "trajectory": [
            {
                "messages": branch.messages,
                "num_input_tokens": branch.num_input_tokens,
                "num_output_tokens": branch.num_output_tokens,
            }
            for branch in branches
        ],
        "token_usage": _records.usage(semantic),
        "info": {
            **(trace.info or {}),
            "native_wrapper": native,
            "native_trace_index": source.trace_index,
        },
    }
    for name, score in _records.reward_scores(semantic):
        row.setdefault(name, score)
    return row


def _call(call: _Call) -> dict[str, Any]:
    return {
        "node": call.node,
        "error": call.error,
        "finish_reason": call.finish_reason,
        "usage": call.usage,
    }


def _node(node: _Node) -> dict[str, Any]:
    return {"parent": node.parent, "message": node.message}

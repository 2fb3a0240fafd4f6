"""One archived record reduced to the few figures the report's tables and charts need.

A record is an episode, or a bare trace (read as a one-trace episode, as ``metrics`` does).
The episode's reward, stop condition, turns and scores come from its summary trace (the
first trainable trace, else the first: the one ``prime-runs show`` and the sample table use),
so a judge or a simulated user never stands for the episode. Records are untrusted JSON:
every field is read defensively and a malformed value becomes ``None``, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import prime_runs._records.access as _records
from prime_runs._records.trainwork import Work, has_messages, work_of

ERROR_TEXT_LIMIT = 160
NAME_LIMIT = 200  # an example's display name; the key is kept whole


@dataclass(frozen=True)
class Example:
    """What an episode was an attempt at: ``task.key`` (else env + ``task.data.idx``)."""

    key: str
    name: str
    idx: Any
    env: str


@dataclass
class EpisodeSummary:
    id: str
    example: Example
    reward: float | None
    ok: bool
    stop: str | None
    truncated: bool
    errors: list[tuple[str, str]]  # (type, first line of the message), in record order
    tokens_in: int | None
    tokens_out: int | None
    tokens_total: int | None
    duration: float | None  # seconds from the first trace's start to the last phase's end
    call_latencies: list[float]
    traces: int
    turns: int
    scores: dict[str, float]  # raw reward scores of the summary trace
    weights: dict[str, float]
    metrics: dict[str, float]
    started: float | None
    agents: list[str] = field(default_factory=list)
    work: Work | None = None  # ``run.work`` of a training run's episode (``trainwork``)
    messages: bool = True  # its summary trace holds a conversation (a sample-table row)

    @property
    def error(self) -> str | None:
        """The last error as ``Type: message``, for one-line displays."""
        if not self.errors:
            return None
        kind, message = self.errors[-1]
        return f"{kind}: {message}" if message else kind


def number(value: Any) -> float | None:
    """A finite int/float as float; anything else (bool, NaN, text) as ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _members(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if not _records.is_episode(record):
        return [record]
    traces = record.get("traces")
    if not isinstance(traces, list):
        return []
    return [t for t in traces if isinstance(t, Mapping)]


def example_of(record: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> Example:
    task = _mapping(record.get("task"))
    if not task and members:
        task = _mapping(members[0].get("task"))
    data = _mapping(task.get("data"))
    env = _text(_mapping(record.get("env")).get("id"))
    idx = data.get("idx")
    key = _text(task.get("key"))
    if not key:
        key = f"{env}#{idx}" if idx is not None else f"episode:{_text(record.get('id'))}"
    name = (_text(data.get("name")) or _text(data.get("id")) or key)[:NAME_LIMIT]
    return Example(key=key, name=name, idx=idx if isinstance(idx, (int, str)) else None, env=env)


def error_pair(error: Any) -> tuple[str, str] | None:
    if not isinstance(error, Mapping):
        return None
    kind = _text(error.get("type")) or "Error"
    message = _text(error.get("message")).strip().splitlines()
    first = message[0] if message else ""
    if len(first) > ERROR_TEXT_LIMIT:
        first = first[: ERROR_TEXT_LIMIT - 1] + "…"
    return kind, first


def _errors(
    record: Mapping[str, Any], members: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    sources = [record, *members] if _records.is_episode(record) else [record]
    for source in sources:
        errors = source.get("errors")
        for error in errors if isinstance(errors, list) else ():
            pair = error_pair(error)
            if pair is not None and pair not in seen:
                seen.append(pair)
    return seen


def _tokens(
    record: Mapping[str, Any], members: Sequence[Mapping[str, Any]], name: str
) -> int | None:
    own = number(record.get(name))
    if own is not None:
        return int(own)
    values = [number(t.get(name)) for t in members]
    found = [v for v in values if v is not None]
    return int(sum(found)) if found else None


def _timing(members: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """(first start, duration): from the earliest trace start to the latest phase end."""
    starts: list[float] = []
    ends: list[float] = []
    for trace in members:
        timing = _mapping(trace.get("timing"))
        start = number(timing.get("start"))
        if start is not None:
            starts.append(start)
        for phase in timing.values():
            end = number(_mapping(phase).get("end"))
            if end:  # 0.0 marks a phase that never ran
                ends.append(end)
    if not starts:
        return None, None
    first = min(starts)
    return first, (max(ends) - first if ends and max(ends) >= first else None)


def _latencies(members: Sequence[Mapping[str, Any]]) -> list[float]:
    values = []
    for trace in members:
        calls = trace.get("calls")
        for call in calls if isinstance(calls, list) else ():
            time = _mapping(_mapping(call).get("time"))
            start, end = number(time.get("start")), number(time.get("end"))
            if start is not None and end is not None and end >= start:
                values.append(end - start)
    return values


def _scores(trace: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    scores: dict[str, float] = {}
    weights: dict[str, float] = {}
    for name, entry in _mapping(trace.get("rewards")).items():
        entry = _mapping(entry)
        score = number(entry.get("score"))
        if score is not None:
            scores[str(name)] = score
            weight = number(entry.get("weight"))
            weights[str(name)] = 1.0 if weight is None else weight
    return scores, weights


def _reward(trace: Mapping[str, Any] | None) -> float | None:
    if trace is None:
        return None
    try:
        return number(_records.reward(trace))
    except (TypeError, AttributeError):
        return None


def summarize(record: Mapping[str, Any]) -> EpisodeSummary:
    """The figures of one decoded record (never raises on odd shapes)."""
    members = _members(record)
    summary = members[_records.summary_trace_index(members)] if members else None
    scores, weights = _scores(summary) if summary is not None else ({}, {})
    metrics = {
        str(k): v
        for k, raw in _mapping(summary.get("metrics") if summary else None).items()
        if (v := number(raw)) is not None
    }
    nodes = summary.get("nodes") if summary is not None else None
    started, duration = _timing(members)
    stop = summary.get("stop_condition") if summary is not None else None
    return EpisodeSummary(
        id=_text(record.get("id")) or "(no id)",
        example=example_of(record, members),
        reward=_reward(summary),
        ok=_records.is_ok(record),
        stop=stop if isinstance(stop, str) else None,
        truncated=bool(summary is not None and _safe_truncated(summary)),
        errors=_errors(record, members),
        tokens_in=_tokens(record, members, "num_input_tokens"),
        tokens_out=_tokens(record, members, "num_output_tokens"),
        tokens_total=_tokens(record, members, "num_total_tokens"),
        duration=duration,
        call_latencies=_latencies(members),
        traces=len(members),
        turns=sum(1 for n in nodes if _mapping(n).get("sampled")) if isinstance(nodes, list) else 0,
        scores=scores,
        weights=weights,
        metrics=metrics,
        started=started,
        agents=[_text(_mapping(t.get("agent")).get("name")) or "agent" for t in members],
        work=(work := work_of(record)),
        messages=has_messages(record) if work is not None else True,
    )


def _safe_truncated(trace: Mapping[str, Any]) -> bool:
    try:
        return _records.is_truncated(trace)
    except (AttributeError, TypeError):
        return False

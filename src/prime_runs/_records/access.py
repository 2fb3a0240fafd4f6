"""Uniform, read-only access to producer traces and episodes, whether they arrive as
verifiers objects or as their JSON records (``Trace.to_record()`` / ``Episode.to_record()``).

Objects are duck-typed: the properties verifiers computes (``reward``, ``is_truncated``,
``branches``, ``usage``, ``last_error``) are read as properties and pydantic values are
dumped with ``model_dump(mode="json", exclude_none=True)``. For mappings the same values are
recomputed from the JSON exactly as verifiers computes them (see the record schema, "Values
that are not in the record"), so both inputs project to the same rows.

Two mapping forms exist: a bare trace record keeps null fields, while the traces nested in an
episode record have them dropped already. Functions that hand out dumped sub-objects take
``bare``: when true, null fields are dropped from mappings the way a model dump would (free-form
payloads such as tool ``parameters`` are kept verbatim); when false the mapping's own objects are
returned without copying. Callers must treat everything returned here as read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from prime_runs._records.jsonio import map_changed

# stop_condition values that mean a framework cap cut the rollout short.
_TRUNCATING_STOPS = frozenset(
    {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "compaction_failed"}
)
# Free-form payloads (JSON schemas, provider items) that a pydantic dump keeps verbatim.
_OPAQUE_KEYS = frozenset({"parameters", "provider_state"})


class BranchView(NamedTuple):
    """One root-to-leaf path of a trace's message graph, already dumped."""

    messages: list[Any]
    num_input_tokens: int
    num_output_tokens: int


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` otherwise; ``default`` when absent."""
    if type(obj) is dict or isinstance(obj, Mapping):  # dict first: the ABC check is slower
        return obj.get(name, default)
    return getattr(obj, name, default)


def is_episode(record: Any) -> bool:
    """An episode has ``traces`` (a key for a mapping, an attribute for an object)."""
    if isinstance(record, Mapping):
        return "traces" in record
    return hasattr(record, "traces")


def traces_of(episode: Any) -> Sequence[Any]:
    return field(episode, "traces") or ()


def is_ok(record: Any) -> bool:
    """The record's own verdict; verifiers defaults ``ok`` to false when it is missing."""
    return bool(field(record, "ok", False))


def is_trainable(trace: Any) -> bool:
    """``agent.trainable``; verifiers' default (true) when the record has no agent block."""
    agent = field(trace, "agent")
    return True if agent is None else bool(field(agent, "trainable", True))


def summary_trace_index(traces: Sequence[Any]) -> int:
    """The first trainable trace, else the first: the one that represents the episode, so a
    judge or a simulated user never does."""
    return next((index for index, trace in enumerate(traces) if is_trainable(trace)), 0)


def task_data(trace: Any) -> Any:
    return field(field(trace, "task"), "data")


def example_idx(trace: Any) -> Any:
    """``task.data.idx``: the example key for rollout numbering."""
    return field(task_data(trace), "idx")


def reward(trace: Any) -> Any:
    """Sum of ``score * weight`` over the non-null rewards (0 when there are none)."""
    if not isinstance(trace, Mapping):
        return trace.reward
    total: Any = 0  # int 0 like verifiers' sum(), so an unscored trace reports 0
    for entry in (trace.get("rewards") or {}).values():
        if entry is not None and entry.get("score") is not None:
            total += entry["score"] * entry.get("weight", 1.0)
    return total


def reward_scores(trace: Any) -> Iterable[tuple[str, Any]]:
    """``(name, raw score)`` of every non-null reward, in record order."""
    rewards = field(trace, "rewards") or {}
    if isinstance(trace, Mapping):
        return (
            (name, entry["score"])
            for name, entry in rewards.items()
            if entry is not None and entry.get("score") is not None
        )
    return ((name, entry.score) for name, entry in rewards.items() if entry is not None)


def metrics(trace: Any) -> Any:
    """The trace's environment metrics mapping, as given (null values included)."""
    return field(trace, "metrics") or {}


def is_truncated(trace: Any) -> bool:
    """A framework cap stopped the rollout, or the last call that did not fail finished
    with ``length``."""
    if not isinstance(trace, Mapping):
        return trace.is_truncated
    if trace.get("stop_condition") in _TRUNCATING_STOPS:
        return True
    for call in reversed(trace.get("calls") or ()):
        if call.get("error") is None:
            return call.get("finish_reason") == "length"
    return False


def last_error(trace: Any, *, bare: bool) -> Any:
    """The dumped last element of ``errors``, or ``None``."""
    if not isinstance(trace, Mapping):
        error = trace.last_error
    else:
        errors = trace.get("errors")
        error = errors[-1] if errors else None
    return dump(error, bare=bare) if error else None


def usage(trace: Any) -> dict[str, Any] | None:
    """Field-wise sum of every call's usage, or ``None`` when no call reported any. The
    optional fields are summed over the calls that report them and left out when none does."""
    if not isinstance(trace, Mapping):
        total = trace.usage
        return dump(total, bare=True) if total else None
    return _aggregate_usage(
        call["usage"] for call in trace.get("calls") or () if call.get("usage") is not None
    )


def _aggregate_usage(usages: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    values = list(usages)
    if not values:
        return None
    prompt = completion = 0  # one loop: two generators cost more than the sums (a row's 5 µs)
    for u in values:
        prompt += u.get("prompt_tokens") or 0
        completion += u.get("completion_tokens") or 0
    total: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    for name in ("cached_input_tokens", "reasoning_tokens", "cost"):
        reported = [u[name] for u in values if u.get(name) is not None]
        if reported:
            total[name] = sum(reported)
    return total


def branches(trace: Any, *, bare: bool) -> list[BranchView]:
    """One view per leaf of the message graph, in leaf order, with dumped messages and the
    branch's context-once input and summed output token counts."""
    if not isinstance(trace, Mapping):
        return [
            BranchView(
                [dump(message, bare=True) for message in branch.messages],
                branch.num_input_tokens,
                branch.num_output_tokens,
            )
            for branch in trace.branches
        ]
    nodes = trace.get("nodes") or ()
    count = len(nodes)
    parents = [node.get("parent") for node in nodes]
    has_child = {parent for parent in parents if parent is not None}
    # Like verifiers, the last call that names a node is that node's call.
    call_of = {
        call["node"]: call for call in trace.get("calls") or () if call.get("node") is not None
    }
    views: list[BranchView] = []
    for leaf in range(count):
        if leaf in has_child:
            continue
        path: list[int] = []
        node_id: Any = leaf
        # Bounded walk: a malformed parent cycle must not hang the projection.
        while node_id is not None and 0 <= node_id < count and len(path) < count:
            path.append(node_id)
            node_id = parents[node_id]
        path.reverse()
        messages = [nodes[index].get("message") for index in path]
        if bare:
            messages = [drop_nulls(message) for message in messages]
        input_tokens = output_tokens = previous_total = 0
        for index in path:
            call = call_of.get(index)
            call_usage = call.get("usage") if call is not None else None
            if call_usage is None:
                continue
            prompt = (call_usage.get("prompt_tokens") or 0) + (
                call_usage.get("cached_input_tokens") or 0
            )
            completion = call_usage.get("completion_tokens") or 0
            # Context-once: only the prompt beyond what the previous call already covered.
            input_tokens += max(0, prompt - previous_total)
            previous_total = prompt + completion
            output_tokens += completion
        views.append(BranchView(messages, input_tokens, output_tokens))
    return views


def dump(value: Any, *, bare: bool) -> Any:
    """A pydantic value as ``model_dump(mode="json", exclude_none=True)``; a mapping as is,
    or with its null fields dropped when it comes from a ``bare`` record."""
    if type(value) is dict:  # a record's own mapping: no model_dump lookup (it would fail)
        return drop_nulls(value) if bare else value
    model_dump = getattr(value, "model_dump", None)
    if model_dump is not None:
        return model_dump(mode="json", exclude_none=True)
    return drop_nulls(value) if bare else value


def drop_nulls(value: Any) -> Any:
    """``value`` without null-valued mapping entries, at every depth except inside free-form
    payloads; containers are copied only where something is dropped."""
    if isinstance(value, Mapping):
        copied: dict[str, Any] | None = None
        for key, item in value.items():
            clean = item if key in _OPAQUE_KEYS else drop_nulls(item)
            if clean is not item or item is None:
                if copied is None:
                    copied = {k: v for k, v in value.items()}
                if item is None:
                    del copied[key]
                else:
                    copied[key] = clean
        return value if copied is None else copied
    if isinstance(value, list):
        return map_changed(value, drop_nulls)
    return value

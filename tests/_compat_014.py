"""Stand-ins for the objects prime-runs 0.1.4's callers hand to ``prime_runs.projection`` and
``prime_runs.metrics``: duck-typed like verifiers' ``Trace``/``Episode`` (attributes and
``model_dump``), in the style downstream test suites use. Their ``to_record()`` says less
than their properties on purpose, as such stand-ins often do: 0.1.4 read the properties
and took ``to_record()`` only for the native wrapper, so the tests can tell which was read.

Also the 0.1.4 public surface, written down from its published source: every public name of
the two modules with its parameters ``(name, kind, default)``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

P = inspect.Parameter.POSITIONAL_OR_KEYWORD
K = inspect.Parameter.KEYWORD_ONLY
REQUIRED = inspect.Parameter.empty

#: prime_runs.projection 0.1.4: callables with their parameters, then constants.
PROJECTION_014 = {
    "json_bytes": [("value", P, REQUIRED)],
    "summary_trace_index": [("episode", P, REQUIRED)],
    "trace_to_sample": [
        ("trace", P, REQUIRED),
        ("rollout_number", P, 1),
        ("episode_id", P, None),
    ],
    "episode_to_samples": [("episode", P, REQUIRED), ("rollout_number", P, REQUIRED)],
    "build_samples": [("episodes", P, REQUIRED), ("rollout_numbers", P, None)],
    "batch_samples": [("samples", P, REQUIRED)],
    "parquet_available": [],
    "train_sample_schema": [],
    "episodes_to_parquet_bytes": [
        ("episodes", P, REQUIRED),
        ("run_id", P, REQUIRED),
        ("step", P, REQUIRED),
        ("sample_id_offset", K, 0),
    ],
}
PROJECTION_CONSTANTS_014 = {"MAX_SAMPLES_PAYLOAD_BYTES": 25 * 1024 * 1024, "ENVELOPE_BYTES": 14}
#: prime_runs.metrics 0.1.4.
METRICS_014 = {"from_episodes": [("episodes", P, REQUIRED), ("traces", P, None)]}


class Dumpable:
    """A pydantic-like value: ``model_dump(exclude_none=True)`` drops null fields."""

    def __init__(self, **values: Any) -> None:
        self._values = values

    def model_dump(self, mode: str = "python", exclude_none: bool = False) -> dict[str, Any]:
        assert mode == "json"  # what the projection must ask for
        return {k: v for k, v in self._values.items() if not (exclude_none and v is None)}


@dataclass
class Reward:
    score: float


@dataclass
class Agent:
    name: str = "solver"
    trainable: bool = True


@dataclass
class Branch:
    messages: list[Dumpable]
    num_input_tokens: int = 10
    num_output_tokens: int = 5


class TaskData(Dumpable):
    def __init__(self, idx: Any = 0, answer: str | None = "42") -> None:
        super().__init__(idx=idx, answer=answer)
        self.idx = idx


@dataclass
class Task:
    data: TaskData = field(default_factory=TaskData)


@dataclass
class Trace:
    id: str = "trace-1"
    task: Task = field(default_factory=Task)
    agent: Agent = field(default_factory=Agent)
    branches: list[Branch] = field(default_factory=list)
    tools: list[Dumpable] | None = None
    reward: float = 1.0
    timing: Dumpable = field(default_factory=lambda: Dumpable(total_ms=120, end=None))
    is_completed: bool = True
    is_truncated: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    last_error: Dumpable | None = None
    stop_condition: str | None = "stop"
    usage: Dumpable | None = None
    info: dict[str, Any] = field(default_factory=dict)
    rewards: dict[str, Reward | None] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "reward": self.reward}


@dataclass
class Env:
    id: str = "gsm8k"


@dataclass
class Episode:
    id: str = "episode-1"
    traces: list[Trace] = field(default_factory=list)
    ok: bool = True
    env: Env = field(default_factory=Env)

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "traces": [trace.to_record() for trace in self.traces]}


def message(text: str, role: str = "assistant") -> Dumpable:
    return Dumpable(role=role, content=text, reasoning=None)


def trace(
    trace_id: str = "trace-1",
    *,
    idx: Any = 0,
    trainable: bool = True,
    agent: str = "solver",
    reward: float = 1.0,
    rewards: dict[str, Reward | None] | None = None,
    metrics: dict[str, Any] | None = None,
    branches: int = 1,
    info: dict[str, Any] | None = None,
) -> Trace:
    return Trace(
        id=trace_id,
        task=Task(TaskData(idx=idx)),
        agent=Agent(agent, trainable),
        branches=[Branch([message(f"branch {n}")]) for n in range(branches)],
        reward=reward,
        rewards=rewards or {},
        metrics=metrics or {},
        info=info or {},
    )


def episode(episode_id: str = "episode-1", *traces: Trace, ok: bool = True) -> Episode:
    return Episode(episode_id, list(traces), ok)

"""pr-e2e: the end-to-end tier's own verifiers taskset (id `pr-e2e`).

Each row asks the model to repeat a phrase. Rewards: `exact` (the whole phrase is in the
reply, weight 1.0) and `overlap` (share of the phrase's words in the reply, weight 0.5);
metric `reply_chars`. A row with `abort = true` makes its `exact` reward raise
`EvalAborted`, a `BaseException`, which verifiers' episode boundaries (they catch
`Exception`) let through: the eval itself breaks midway, the way a grader that kills the
process would, and verifiers closes its run as failed.

verifiers imports a taskset by id (`pr-e2e` -> module `pr_e2e`), so this directory must be
on `PYTHONPATH` of the eval process.
"""

from __future__ import annotations

import verifiers.v1 as vf
from pydantic import BaseModel, Field

ABORT_MESSAGE = "grader crashed on purpose (pr-e2e abort row)"


class EvalAborted(BaseException):
    """Raised by an `abort` row's reward; not an `Exception`, so no episode boundary
    records it and the whole eval stops."""


class Row(BaseModel):
    """One task: `prompt` should make the model say `answer`."""

    id: str
    name: str
    prompt: str
    answer: str
    abort: bool = False


class E2EData(vf.TaskData):
    answer: str
    """The phrase the reply must contain."""
    abort: bool = False
    """Whether scoring this task breaks the eval."""


def _words(text: str) -> list[str]:
    return [w for w in ("".join(c for c in t.casefold() if c.isalnum()) for t in text.split()) if w]


class E2ETask(vf.Task[E2EData, vf.State, vf.TaskConfig]):
    @property
    def key(self) -> str:
        return f"pr-e2e:{self.data.id}"

    def _reply(self, trace: vf.Trace) -> str:
        messages = trace.assistant_messages
        return (messages[-1].content or "") if messages else ""

    @vf.reward(weight=1.0)
    async def exact(self, trace: vf.Trace) -> float:
        if self.data.abort:
            raise EvalAborted(ABORT_MESSAGE)
        return float("".join(_words(self.data.answer)) in "".join(_words(self._reply(trace))))

    @vf.reward(weight=0.5)
    async def overlap(self, trace: vf.Trace) -> float:
        want = _words(self.data.answer)
        got = set(_words(self._reply(trace)))
        return sum(w in got for w in want) / len(want) if want else 0.0

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(self._reply(trace)))


class E2EConfig(vf.TasksetConfig):
    rows: list[Row] = Field(default_factory=list)
    """The tasks, in order."""


class E2ETaskset(vf.Taskset[E2ETask, E2EConfig]):
    def load(self) -> list[E2ETask]:
        return [
            E2ETask(
                E2EData(
                    id=row.id,
                    name=row.name,
                    prompt=row.prompt,
                    answer=row.answer,
                    abort=row.abort,
                    system_prompt="Reply briefly.",
                ),
                self.config.task,
            )
            for row in self.config.rows
        ]


__all__ = ["E2ETaskset"]

"""A small training loop for the tests of `prime-runs show` and the report: episodes at
every step, on- and off-policy, some without a conversation, and a few metrics."""

from __future__ import annotations

import copy
import math

import prime_runs as pr

STEPS = 30


def training_episodes(episodes: list[dict], steps: int = STEPS) -> list[dict]:
    """Two episodes per step: one on-policy, one a step behind its policy (off-policy),
    the latter without a conversation at each step on the table's cadence (it failed before
    any model call)."""
    out = []
    for step in range(steps):
        for i in range(2):
            record = copy.deepcopy(episodes[(2 * step + i) % len(episodes)])
            record["id"] = f"s{step}-{i}"
            for member in record["traces"]:
                member["id"] = f"s{step}-{i}-{member['id']}"
                if i == 1 and step % 10 == 0:
                    member["nodes"], member["calls"] = [], []
            policy = {"start": step, "end": step} if i == 0 else {"start": step - 1, "end": step}
            record["run"] = {"work": {"type": "train", "step": step, "policy": policy}}
            out.append(record)
    return out


def train_offline(
    episodes: list[dict],
    name: str = "grpo-offline",
    *,
    steps: int = STEPS,
    speed: float = 1.0,
    dir: object = None,
) -> pr.Run:
    """An offline training run of ``steps`` steps: its episodes (``training_episodes``) and
    per step ``loss`` (falling ``speed`` times as fast) and ``reward/mean`` (rising)."""
    run = pr.init(
        kind="train",
        name=name,
        model="Qwen/Qwen3-4B",
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=steps, batch_size=8, rollouts_per_example=2),
        config={"lr": 1e-5},
        mode="offline",
        dir=dir,
    )
    by_step: dict[int, list[dict]] = {}
    for record in training_episodes(episodes, steps):
        by_step.setdefault(record["run"]["work"]["step"], []).append(record)
    for step in range(steps):
        run.log_episodes(by_step[step])
        loss = 2.0 * math.exp(-step * speed / 8)
        run.log_metrics({"loss": loss, "reward": {"mean": step / steps}}, step=step)
    run.finish()
    return run

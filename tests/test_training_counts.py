"""A training run's finish report counts its metrics rows in rows, and its parts add up:
stored + kept for sync + refused = the rows logged; acknowledged_records is what the
platform acknowledged."""

from __future__ import annotations

import logging
import re

import prime_runs as pr

SPEC = pr.TrainingSpec(max_steps=100, batch_size=8, rollouts_per_example=4)
REPORT = re.compile(r"train_metrics stored (\d+) of (\d+) metrics rows: (.*?) \(archive")


def train() -> pr.Run:
    return pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=SPEC,
    )


def parts(text: str) -> dict[str, int]:
    """``{"kept": n, "refused": n}`` from the report's list of what was not stored."""
    found = {}
    for part in text.split(", "):
        count, what = part.split(" ", 1)
        found[what.split(" ", 1)[0]] = int(count)
    return found


def report(caplog) -> tuple[int, int, dict[str, int]]:
    lines = [m for r in caplog.records if (m := REPORT.search(r.getMessage()))]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    stored, total, rest = lines[0].groups()
    return int(stored), int(total), parts(rest)


def test_rows_unsent_by_the_deadline_are_counted_in_rows_and_add_up(prime_env, episodes, caplog):
    caplog.set_level(logging.WARNING, "prime_runs")
    run = train()
    prime_env.stall("rft_metrics", 4)
    for step in range(50):
        run.log_metrics({"loss": 1 / (step + 1)}, step=step)
    run.log_episodes([dict(episodes[0], run={"work": {"type": "train", "step": 1}})])
    run.finish(timeout=1.5)
    stored, total, rest = report(caplog)
    # Of the 50 rows, not of the run's one record; nothing refused, all kept for sync.
    assert total == 50 and stored + rest["kept"] == 50 and "refused" not in rest
    assert run.acknowledged_records.get("train_metrics", 0) == stored
    assert run.acknowledged_records["traces"] == 1  # the episode is counted on its own sink


def test_refused_rows_are_told_apart_from_kept_ones(prime_env, caplog):
    caplog.set_level(logging.WARNING, "prime_runs")
    run = train()
    prime_env.fail("rft_metrics", 422, times=2)  # two rows refused for their own sake
    for step in range(20):
        run.log_metrics({"loss": 0.5}, step=step)
    assert run.flush(30)
    prime_env.stall("rft_metrics", 4)
    for step in range(20, 30):
        run.log_metrics({"loss": 0.5}, step=step)
    run.finish(timeout=1)
    stored, total, rest = report(caplog)
    assert total == 30 and rest["refused"] == 2
    assert stored + rest["refused"] + rest.get("kept", 0) == 30
    assert stored >= 18 and run.acknowledged_records["train_metrics"] == stored
    assert sum("was not stored" in e for e in run.errors) == 2

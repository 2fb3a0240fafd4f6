"""The report's training part, without a browser: each metric by step from the run's
metrics journal (bucketed past 1,000 steps, its extremes kept), the episodes by dispatch
step with on- and off-policy told apart, what the sample table holds per step, and none of
it for an evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

import prime_runs as pr
from _training_loop import STEPS, train_offline
from prime_runs._journal.archive import RunArchive
from prime_runs._report import build, load_run
from prime_runs._report._training import POINTS, bucketed


def _doc(run: pr.Run) -> dict:
    return build([load_run(RunArchive(Path(str(run.archive_path))))])["runs"][0]


def test_a_training_runs_metrics_by_step_episodes_and_sample_table(isolated_env, episodes):
    run = train_offline(episodes)

    doc = _doc(run)

    assert doc["kind"] == "train"
    training = doc["training"]
    assert training["spec"]["max_steps"] == STEPS and training["steps"] == STEPS
    loss = training["metrics"]["loss"]
    assert loss["x"] == list(range(STEPS)) and "lo" not in loss  # short: every step drawn
    assert loss["y"][0] == 2.0 and loss["last_step"] == STEPS - 1
    assert training["metrics"]["reward/mean"]["max"] == pytest.approx((STEPS - 1) / STEPS)
    by_step = training["by_step"]
    assert (by_step["steps"], by_step["episodes"]) == (STEPS, 2 * STEPS)
    assert (by_step["on_policy"], by_step["off_policy"]) == (STEPS, STEPS)
    assert by_step["count"]["y"] == [2] * STEPS
    # Steps 0, 10, 20: two episodes each, one without a conversation; nothing sent yet.
    assert training["table"] == [[s, 2, 1, 0, 1, 1] for s in (0, 10, 20)]
    fields = doc["episodes"]["fields"]
    rows = [dict(zip(fields, row, strict=True)) for row in doc["episodes"]["rows"]]
    assert {(r["policy"], r["lag"]) for r in rows} == {("on-policy", 0), ("off-policy", 1)}
    assert sorted({r["step"] for r in rows}) == list(range(STEPS))


def test_a_long_series_is_bucketed_with_its_extremes():
    steps = list(range(10 * POINTS))
    values = [float(i % 10) for i in steps]  # a saw: 0..9 in every bucket

    drawn = bucketed(steps, values)

    assert len(drawn["x"]) == POINTS
    assert drawn["x"][0] == 4.5 and drawn["y"][0] == 4.5
    assert set(drawn["lo"]) == {0.0} and set(drawn["hi"]) == {9.0}


def test_an_evaluation_has_no_training_part(isolated_env, episodes):
    run = pr.init(name="an-eval", environments=["e"], mode="offline")
    run.log_episodes(episodes[:3])
    run.finish()

    doc = _doc(run)

    assert doc["kind"] == "eval" and doc["training"] is None

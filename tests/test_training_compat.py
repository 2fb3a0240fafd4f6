"""Two things 0.1.4 did that a training loop may lean on, against the stand-in over HTTP:
``run.log_metrics()`` after ``finish()`` raises under ``on_error="raise"`` (any run kind;
under "warn" it is reported and dropped), and a run left open at interpreter exit is closed
within its ``init(finish_timeout=)`` rather than the generic exit budget. Also: an
evaluation refuses rows at any time, saying once what to use instead."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.testing import StandInPlatform

SPEC = pr.TrainingSpec(max_steps=4)
# An unfinished run is closed as crashed within 10 s of exit (docs/concepts.md, statuses).
EXIT_TIMEOUT = 10.0


def _train(**kw: object) -> pr.Run:
    return pr.init(
        kind="train", model="m", environments=["gsm8k"], team_id="team-1", training=SPEC, **kw
    )


def test_log_metrics_after_finish_raises_under_on_error_raise(prime_env: StandInPlatform) -> None:
    evaluation = pr.init(environments=["gsm8k"], on_error="raise")
    with pytest.raises(pr.RecordError, match="is an evaluation"):
        evaluation.log_metrics({"loss": 1.0}, step=0)  # an evaluation has no rows...
    evaluation.finish()
    with pytest.raises(pr.RunFinishedError, match="has finished"):
        evaluation.log_metrics({"loss": 1.0}, step=1)  # ...and after finish(), as 0.1.4
    training = _train(on_error="raise")
    training.log_metrics({"loss": 1.0}, step=0)
    training.finish()
    with pytest.raises(pr.RunFinishedError):
        training.log_metrics({"loss": 0.5}, step=1)
    assert sorted(prime_env.training_steps(training.id)) == [0]


def test_log_metrics_after_finish_is_reported_and_dropped_under_warn(
    prime_env: StandInPlatform,
) -> None:
    evaluation = pr.init(environments=["gsm8k"])
    evaluation.finish()
    evaluation.log_metrics({"loss": 1.0}, step=1)  # never raises into the producer
    assert evaluation.dropped_records == 1
    assert any("has finished" in e for e in evaluation.errors)
    training = _train()
    training.finish()
    training.log_metrics({"loss": 1.0}, step=1)
    assert training.dropped_records == 1
    assert prime_env.training_metrics(training.id) == []


EXIT_SCRIPT = """
import time
import prime_runs as pr
run = pr.init(kind="train", model="m", team_id="team-1", environments=["gsm8k"],
              training=pr.TrainingSpec(max_steps=2), finish_timeout=1.0)
run.log_metrics({"loss": 1.0}, step=0)
print(run.id, time.time(), flush=True)
"""


def test_a_run_left_open_at_exit_is_closed_within_its_finish_timeout(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    script = tmp_path / "left_open.py"
    script.write_text(EXIT_SCRIPT)
    prime_env.stall("rft_status", 60.0)  # the crash close-out never answers
    try:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120
        )
        ended = time.time()
    finally:
        prime_env.unstall()
    assert done.returncode == 0, done.stderr
    run_id, left_at = done.stdout.split()
    took = ended - float(left_at)
    # Within 1 s (plus the close-out margin and the interpreter's teardown), not the
    # generic exit budget, which a stalled close-out would have used up.
    assert took < EXIT_TIMEOUT / 2, (took, done.stderr)
    assert [r["step"] for r in prime_env.training_metrics(run_id)] == [0]
    assert prime_env.requests_for("rft_status")  # the close-out was tried, as crashed


def test_log_metrics_on_an_evaluation_is_refused_once_naming_what_to_use(
    prime_env: StandInPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    evaluation = pr.init(environments=["gsm8k"])
    with caplog.at_level("WARNING", logger="prime_runs"):
        for step in range(3):
            evaluation.log_metrics({"loss": 1.0}, step=step)
    evaluation.finish()
    warnings = [r.getMessage() for r in caplog.records if "is an evaluation" in r.getMessage()]
    assert len(warnings) == 1  # once per run, not once per call
    (entry,) = [e for e in evaluation.errors if "is an evaluation" in e]
    assert "3 refused so far" in entry
    assert 'init(kind="train")' in entry and "update_summary" in entry
    assert evaluation.status is pr.RunStatus.COMPLETED  # never fatal to the producer
    assert prime_env.requests_for("rft_metrics") == []

"""finish() always ends, on time, with archive and status agreeing (issue 12, items 4, 5, 7
and 11): huge numbers, odd timeouts, log calls racing finish(), a platform that is down."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import prime_runs as pr
import prime_runs._runs.finishing as finishing
from _support import DATA, journal_lines, run_status
from prime_runs._runs.finishing import CLOSE_MARGIN, DOWN_CLOSE_BUDGET
from prime_runs.cli import main
from prime_runs.metrics import from_encoded
from prime_runs.settings import INFLIGHT_WINDOW_ENV


def _huge(episodes: list[dict]) -> list[dict]:
    first = json.loads(json.dumps(episodes[0]))
    first["traces"][0]["rewards"]["exact"]["score"] = 10**400
    second = json.loads(json.dumps(episodes[1]))
    second["traces"][0]["metrics"]["best"] = 10**400
    return [first, second]


# -- item 4: numbers a float cannot hold ---------------------------------------------


@pytest.mark.parametrize("journal", [True, False])
def test_an_int_too_big_for_a_float_never_stops_finish(episodes, journal):
    run = pr.init(name="huge", environments=[{"id": "env-1"}], mode="offline", journal=journal)
    run.log_episodes([*_huge(episodes), *episodes[2:5]])
    run.finish()
    assert run.finished and run.status is pr.RunStatus.COMPLETED
    assert any("left out of the run summary" in e for e in run.errors)
    if journal:
        status = run_status(run)
        assert status["status"] == "completed" and status["finished_at"] is not None
        # The summary covers the records it could read, and says so.
        assert status["summary"] == pr.metrics.from_episodes(episodes[2:5])


def test_under_raise_a_huge_number_is_a_record_error_after_the_run_is_terminal(episodes):
    run = pr.init(name="huge", environments=[{"id": "env-1"}], mode="offline", on_error="raise")
    run.log_episodes(_huge(episodes))
    with pytest.raises(pr.RecordError, match="fits a float"):
        run.finish()
    assert run.finished and run_status(run)["status"] == "completed"
    run.finish()  # nothing left to raise, nothing left to do


def test_a_huge_number_online_still_finalizes(prime_env, episodes):
    run = pr.init(name="huge", environments=[{"id": "env-1"}])
    run.log_episodes([*_huge(episodes), *episodes[2:4]])
    run.finish()
    evaluation = prime_env.evaluations[run.id]
    assert evaluation["finalize_count"] == 1 and run.status is pr.RunStatus.COMPLETED
    assert run_status(run)["closed"] is True
    assert set(prime_env.episodes) >= {e["id"] for e in episodes[2:4]}


# -- item 5: timeouts --------------------------------------------------------------------

# finish()'s silent grace (10 s), shortened where a test waits it out: what is under test is
# that the grace bounds finish() against a platform that stores nothing, not its length.
GRACE = 3.0

TIMEOUT_CHILD = r"""
import json, math, sys, time
import prime_runs as pr
import prime_runs._runs.finishing as finishing
from prime_runs.errors import ConfigurationError

finishing.SILENT_GRACE = float(sys.argv[2])

episodes = [json.loads(line) for line in open(sys.argv[1])]
run = pr.init(name="timeouts", environments=[{"id": "env-1"}])
print("registered", flush=True)
input()  # the platform stalls now
run.log_episodes(episodes)
refused = []
for value in (float("nan"), -1.0, "5", True):
    for call in (run.flush, lambda t: run.finish(timeout=t)):
        try:
            call(value)
        except ConfigurationError as exc:
            refused.append(str(exc))
assert not run.finished, "an invalid timeout leaves the run open"
started = time.monotonic()
run.finish(timeout=float("inf"))
print(json.dumps({"refused": refused, "took": time.monotonic() - started,
                  "finished": run.finished, "status": run.status.value,
                  "path": run.archive_path}))
"""


def test_non_finite_and_negative_timeouts_are_typed_errors_and_inf_ends(prime_env, episodes):
    child = subprocess.Popen(
        [sys.executable, "-c", TIMEOUT_CHILD, str(DATA / "episodes.jsonl"), str(GRACE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "registered\n"
        prime_env.stall(None, 600)  # uploads never answer: nan used to spin here forever
        stdout, stderr = child.communicate("go\n", timeout=90)
    finally:
        child.kill()
        prime_env.unstall()
    done = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(out["refused"]) == 8 and all("timeout" in m for m in out["refused"])
    assert out["finished"] and out["status"] == "completed"
    # inf has no deadline of its own; the platform that stores nothing bounds it.
    assert out["took"] < GRACE + DOWN_CLOSE_BUDGET + CLOSE_MARGIN + 5
    status = json.loads((Path(out["path"]) / "status.json").read_text())
    assert status["status"] == "completed" and status["finished_at"] is not None


@pytest.mark.parametrize("timeout", [0.0, 2.0])
def test_finish_returns_within_its_timeout_against_a_stalled_platform(prime_env, episodes, timeout):
    run = pr.init(name="stalled", environments=[{"id": "env-1"}])
    prime_env.stall(None, 600)
    try:
        run.log_episodes(episodes)
        started = time.monotonic()
        run.finish(timeout=timeout)
        took = time.monotonic() - started
    finally:
        prime_env.unstall()
    # The documented bound is timeout + CLOSE_MARGIN; the rest is slack for a busy machine.
    assert took < timeout + CLOSE_MARGIN + 1.4
    assert run.finished and run_status(run)["status"] == "completed"
    assert any("prime-runs sync" in e for e in run.errors)


# -- item 7: log calls racing finish() ----------------------------------------------------


def _race_round(episodes: list[dict], threads: int = 4) -> tuple[pr.Run, int, int]:
    run = pr.init(name="race", environments=[{"id": "env-1"}], mode="offline", on_error="raise")
    landed = [0] * threads
    after_finish = [0] * threads
    finished = threading.Event()
    go = threading.Barrier(threads + 1)

    def producer(index: int) -> None:
        go.wait()
        n = 0
        while True:
            episode = dict(episodes[n % len(episodes)], id=f"r{index}-{n}")
            n += 1
            try:
                run.log_episodes(episode)
            except pr.RunFinishedError:
                return
            landed[index] += 1
            if finished.is_set():
                after_finish[index] += 1

    workers = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    go.wait()
    time.sleep(0.02)
    run.finish()
    finished.set()
    for worker in workers:
        worker.join(30)
    return run, sum(landed), sum(after_finish)


def test_finish_shuts_out_log_calls_in_flight(episodes):
    for _ in range(25):
        run, landed, after_finish = _race_round(episodes)
        assert after_finish == 0  # no call returned successfully after finish() returned
        status = run_status(run)
        journal = journal_lines(run)
        # Every call that returned is in the archive and in the final counts; nothing else.
        assert len(journal) == landed == status["logged"] == run.logged_records
        assert _same_means(status["summary"], from_encoded(journal))


def _same_means(got: object, want: object) -> bool:
    """The same summary up to each mean's last bits: racing log calls are tallied in
    another order than the journal holds them, and a float sum depends on its order."""
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(_same_means(got[key], want[key]) for key in want)
        )
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-12)
    return got == want


def test_logging_after_finish_warns_once_with_a_count(episodes, caplog):
    run = pr.init(name="late", environments=[{"id": "env-1"}], mode="offline")
    run.finish()
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        for _ in range(200):
            run.log_episodes(episodes[:3])
    warnings = [r for r in caplog.records if "after" in r.getMessage()]
    assert len(warnings) == 1
    late = [e for e in run.errors if "after finish()" in e]
    assert len(late) == 1 and "600 records" in late[0]
    assert run.dropped_records == 600


# -- item 11: a platform that is down throughout ---------------------------------------


def test_finish_against_a_platform_down_throughout_is_short_and_says_what_to_do(
    prime_env, episodes, caplog, monkeypatch
):
    monkeypatch.setenv(INFLIGHT_WINDOW_ENV, "0")  # the outage's 503s store nothing
    monkeypatch.setattr(finishing, "SILENT_GRACE", GRACE)
    run = pr.init(name="down", environments=[{"id": "env-1"}])
    prime_env.outage(503)
    run.log_episodes(episodes)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run.finish()
    took = time.monotonic() - started
    assert took < GRACE + DOWN_CLOSE_BUDGET + CLOSE_MARGIN + 5  # was about a minute
    said = [e for e in run.errors if "kept locally" in e]
    assert len(said) == 1 and f"{len(episodes)} records" in said[0]
    assert "prime-runs sync" in said[0] and said[0] in caplog.text
    assert run_status(run)["status"] == "completed"
    # ... and sync does deliver them once the platform is back.
    prime_env.recover()
    assert main(["sync", run.id]) == 0
    assert set(prime_env.episodes) == {e["id"] for e in episodes}
    assert prime_env.evaluations[run.id]["finalize_count"] == 1


def test_a_close_out_that_ends_after_finish_returned_is_recorded(prime_env, episodes):
    run = pr.init(name="slow-close", environments=[{"id": "env-1"}])
    run.log_episodes(episodes[:2])
    assert run.flush(30)
    # Answered within the request's own timeout, but after finish() stopped waiting.
    prime_env.stall("eval_finalize", CLOSE_MARGIN + 0.4)
    try:
        started = time.monotonic()
        run.finish(timeout=0)
        assert time.monotonic() - started < CLOSE_MARGIN + 1.4
        assert run_status(run)["closed"] is False
        assert any("did not confirm the run's close-out" in e for e in run.errors)
        deadline = time.monotonic() + 20
        while not run_status(run)["closed"] and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        prime_env.unstall()
    assert run_status(run)["closed"] is True
    assert prime_env.evaluations[run.id]["finalize_count"] == 1

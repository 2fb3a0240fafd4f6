"""The owner's finish-time read-back of what other workers stored (``_runs/coverage``)
costs nothing when this host saw every record, is bounded in bytes, and when its time
runs out keeps what it read: the finalized numbers are partial and say so, never zero.
Against the stand-in over real HTTP, workers in processes of their own."""

from __future__ import annotations

from pathlib import Path

import _workers
import prime_runs as pr
from _workers import episode
from prime_runs.testing import StandInPlatform

REMOTE = 300
SUMMARIZED_KEY = "records_summarized"  # metrics.prime_runs: the records the summary covers
PARTIAL_KEY = "summary_partial"  # metrics.prime_runs: the read-back stopped part-way


def finalized(platform: StandInPlatform) -> dict[str, object]:
    (request,) = platform.requests_for("eval_finalize")
    return request.json["metrics"]


def test_a_read_back_cut_short_finalizes_the_numbers_of_what_it_read_as_partial(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="partial", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0) for i in range(2)])
    assert owner.flush(30)
    # A worker on another disk: the owner sees its records only on the platform.
    _workers.run_worker(owner.context(), "w", [0.0] * REMOTE, root=tmp_path / "node-a")
    # The first pages answer; the next one is held past the read-back's time. (Earlier
    # listing requests were the appends' row-count reads, of the owner and the worker.)
    earlier = len(prime_env.requests_for("samples_list"))
    prime_env.stall("samples_list", 60, after=6)
    owner.finish(timeout=10)

    lists = prime_env.requests_for("samples_list")[earlier:]
    answered = [r for r in lists if r.status == 200]
    assert len(answered) == 6
    read = sum(int(r.query["limit"]) for r in answered)  # every page full: more followed
    assert 2 < read < REMOTE + 2
    metrics = finalized(prime_env)
    # The owner's 2 rows come first; every other row read is a worker's (reward 0).
    assert metrics["prime_runs"][SUMMARIZED_KEY] == read
    assert metrics["prime_runs"][PARTIAL_KEY] is True
    assert metrics["avg_reward"] == 2 / read
    said = " ".join(owner.errors)
    assert f"the run summary is partial: it covers {read} records, 2 of this host" in said
    assert prime_env.evaluations[owner.id]["status"] != "RUNNING"

    # A worker whose record lands after the finalize reads every row: whole numbers again.
    prime_env.unstall()
    said = _workers.run_worker(owner.context(), "late", [0.0], root=tmp_path / "node-b")
    assert any("after it was finalized" in e for e in said)
    metrics = prime_env.evaluations[owner.id]["metrics"]
    assert metrics["prime_runs"][SUMMARIZED_KEY] == REMOTE + 3
    assert PARTIAL_KEY not in metrics["prime_runs"]
    assert metrics["avg_reward"] == 2 / (REMOTE + 3)


def test_a_read_back_that_completes_is_whole(prime_env: StandInPlatform, tmp_path: Path) -> None:
    owner = pr.init(name="whole", environments=["gsm8k"])
    owner.log_episodes([episode("owner", i, 1.0) for i in range(2)])
    _workers.run_worker(owner.context(), "w", [0.0] * 30, root=tmp_path / "node-a")
    owner.finish()
    metrics = finalized(prime_env)
    assert metrics["prime_runs"] == {"traces_episodes_written": 32, SUMMARIZED_KEY: 32}
    assert metrics["avg_reward"] == 2 / 32
    routes = [r.route for r in prime_env.requests]
    last_append = max(i for i, route in enumerate(routes) if route == "samples_append")
    read_back = [r for r in prime_env.requests[last_append:] if r.route == "samples_list"]
    assert int(read_back[0].query["limit"]) == 1  # a row's weight is unknown until one is read
    assert owner.errors == []

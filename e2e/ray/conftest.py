"""Fixtures of the Ray tier: one stand-in platform and one local Ray cluster per session,
and the checks every case makes at the stand-in."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prime_runs.testing import StandInPlatform

HERE = Path(__file__).resolve().parent
# What would point the SDK elsewhere: the cluster's workers inherit this process's
# environment, and a node-local archive must come from the case, not from here.
CLEARED = ("PRIME_RUNS_DIR", "TRACEPARENT", "BAGGAGE", "PRIME_RUNS_MODE", "PRIME_API_KEY")


@pytest.fixture(scope="session")
def platform() -> Iterator[StandInPlatform]:
    with StandInPlatform() as standin:
        yield standin


@pytest.fixture(scope="session")
def cluster(platform: StandInPlatform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import ray

    for name in CLEARED:
        os.environ.pop(name, None)
    os.environ.update(platform.env())
    os.environ["HOME"] = str(tmp_path_factory.mktemp("home"))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # The job's code travels as Ray's working_dir: every worker runs in Ray's own session
    # folder, so a worker without PRIME_RUNS_DIR journals there, not beside the driver.
    job = tmp_path_factory.mktemp("job")
    shutil.copy(HERE / "raywork.py", job)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"working_dir": str(job)},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def check_run(platform: StandInPlatform, run_id: str, truth: dict[str, float]) -> None:
    """At the stand-in: every record once (Prime Traces and the sample table), one
    evaluation, finalize once and after the last record, and the finalized numbers equal
    to the true means over every record."""
    rows = Counter(row["sample_id"] for row in platform.samples(run_id))
    assert rows == Counter(set(truth)), "each record exactly one sample row"
    writes = platform.episode_writes
    assert {i: writes.get(i) for i in truth} == dict.fromkeys(truth, 1), "each episode once"
    creates = [r for r in platform.requests_for("eval_create") if r.status == 201]
    evaluation = platform.evaluations[run_id]
    assert sum(1 for r in creates if r.json.get("name") == evaluation["name"]) == 1
    assert evaluation["finalize_count"] == 1
    requests = platform.requests
    (finalize,) = [
        i for i, r in enumerate(requests) if r.route == "eval_finalize" and run_id in r.path
    ]
    for i, r in enumerate(requests):
        if r.route == "samples_append" and run_id in r.path:
            assert i < finalize, "a sample row landed after finalize"
        if r.route == "traces_upload" and any(line.get("id") in truth for line in r.lines):
            assert i < finalize, "a trace upload landed after finalize"
    metrics = requests[finalize].json["metrics"]
    assert metrics["avg_reward"] == pytest.approx(sum(truth.values()) / len(truth))
    assert metrics["prime_runs"]["traces_episodes_written"] == len(truth)
    assert metrics["prime_runs"]["records_summarized"] == len(truth)

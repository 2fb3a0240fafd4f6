"""A real local Ray cluster against the stand-in: tasks on node-local archives and in
Ray's working_dir, an actor and a threaded actor, a task killed mid-run and retried, and
a worker joining sixty times. Each case checks the run at the stand-in (conftest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from raywork import episode

import prime_runs as pr
from conftest import check_run
from prime_runs.testing import StandInPlatform


def rewards(n: int, k: int) -> list[float]:
    return [float((i * k) % 3 == 0) for i in range(n)]


def owner(tmp_path: Path, name: str) -> pr.Run:
    return pr.init(name=name, environments=["gsm8k"], dir=tmp_path / "driver", join=False)


def truth_of(tag: str, values: list[float]) -> dict[str, float]:
    return {f"ep-{tag}-{i}": r for i, r in enumerate(values)}


def test_tasks_on_node_local_archives(cluster: Any, platform: StandInPlatform, tmp_path: Path):
    import raywork

    run = owner(tmp_path, "ray-tasks")
    truth = truth_of("driver", [1.0] * 5)
    run.log_episodes([episode("driver", i, 1.0) for i in range(5)])
    calls = []
    for k in range(4):
        values = rewards(20, k + 1)
        truth |= truth_of(f"task{k}", values)
        node = {"PRIME_RUNS_DIR": str(tmp_path / f"node-{k}")}
        task = raywork.shard.options(runtime_env={"env_vars": node})
        calls.append(task.remote(run.context(), f"task{k}", values))
    results = cluster.get(calls, timeout=240)
    assert {Path(r["archive"]).parent.name for r in results} == {f"node-{k}" for k in range(4)}
    assert all(r["errors"] == [] for r in results)
    run.finish()
    check_run(platform, run.id, truth)
    assert run.errors == []


def test_tasks_in_rays_working_dir(cluster: Any, platform: StandInPlatform, tmp_path: Path):
    import raywork

    run = owner(tmp_path, "ray-working-dir")  # the driver logs nothing itself
    truth: dict[str, float] = {}
    calls = []
    for k in range(2):
        values = rewards(15, k + 2)
        truth |= truth_of(f"wd{k}", values)
        calls.append(raywork.shard.remote(run.context(), f"wd{k}", values))
    results = cluster.get(calls, timeout=240)
    # No PRIME_RUNS_DIR: the workers journal inside Ray's session folder (the job's
    # working_dir), not in the driver's archive; the summary covers them all the same.
    for result in results:
        archive = Path(result["archive"])
        assert archive.is_relative_to(Path(result["cwd"])), result
        assert not archive.is_relative_to(tmp_path), result
    run.finish()
    check_run(platform, run.id, truth)


def test_actor_and_threaded_actor(cluster: Any, platform: StandInPlatform, tmp_path: Path):
    import raywork

    run_a, run_b = owner(tmp_path, "ray-actor-a"), owner(tmp_path, "ray-actor-b")
    evaluator = raywork.Evaluator.remote(run_a.context())
    truth_a = truth_of("actor0", rewards(10, 1)) | truth_of("actor1", rewards(10, 2))
    cluster.get([evaluator.evaluate.remote(f"actor{k}", rewards(10, k + 1)) for k in range(2)])
    assert cluster.get(evaluator.drain.remote(), timeout=120) == []
    cluster.kill(evaluator)  # drained first: nothing is lost to the kill

    both = raywork.TwoRuns.remote()
    calls = [
        both.serve.remote(run_a.context(), "threadA", rewards(25, 1)),
        both.serve.remote(run_b.context(), "threadB", rewards(25, 2)),
    ]
    assert cluster.get(calls, timeout=240) == [[], []]
    cluster.kill(both)
    truth_a |= truth_of("threadA", rewards(25, 1))
    run_a.finish()
    run_b.finish()
    check_run(platform, run_a.id, truth_a)
    check_run(platform, run_b.id, truth_of("threadB", rewards(25, 2)))


def test_task_killed_mid_run_and_retried(cluster: Any, platform: StandInPlatform, tmp_path: Path):
    import raywork

    run = owner(tmp_path, "ray-retry")
    values = rewards(10, 1)
    node = {"PRIME_RUNS_DIR": str(tmp_path / "node")}
    task = raywork.crashes_once.options(runtime_env={"env_vars": node})
    errors = cluster.get(task.remote(run.context(), str(tmp_path / "attempted"), values))
    assert (tmp_path / "attempted").exists()
    (said,) = errors
    assert said.startswith("5 records logged into run") and "earlier attempt" in said
    run.finish()
    check_run(platform, run.id, truth_of("retried", values))


def test_sixty_joins_in_one_worker_cost_what_one_does(
    cluster: Any, platform: StandInPlatform, tmp_path: Path
):
    import raywork

    run = owner(tmp_path, "ray-joins")
    first, last = cluster.get(raywork.usage_after_joins.remote(run.context(), 60), timeout=240)
    assert last[0] <= first[0], (first, last)
    assert last[1] <= first[1] + 2, (first, last)
    run.finish()
    check_run(platform, run.id, truth_of("loop", [1.0] * 60))


@pytest.fixture(autouse=True)
def _fresh(platform: StandInPlatform) -> None:
    platform.recover()

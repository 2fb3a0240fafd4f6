"""The object path: verifiers' own `WireEpisode` objects, built from the captured fixture
records, fed to our `log_episodes`, `metrics.from_episodes` and `projection.build_samples`.
Whatever the objects give must equal what the plain mappings give."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from conftest import DATA, read_jsonl
from verifiers.v1.episode import WireEpisode

import prime_runs as pr
from prime_runs.testing import StandInPlatform

FILES = ("episodes", "edge_episodes", "train_episodes")


def records(name: str) -> list[dict[str, Any]]:
    return read_jsonl(DATA / f"{name}.jsonl")


def by_run(episodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The fixture's episodes grouped by their run, in file order."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for record in episodes:
        runs.setdefault(record["run"]["id"], []).append(record)
    return runs


def objects(mappings: list[dict[str, Any]]) -> list[WireEpisode]:
    return [WireEpisode.model_validate(copy.deepcopy(m)) for m in mappings]


def test_objects_round_trip_to_the_fixture_records() -> None:
    # The premise of every comparison below: verifiers' model holds the whole record.
    for name in FILES:
        mappings = records(name)
        assert [e.to_record() for e in objects(mappings)] == mappings


@pytest.mark.parametrize("name", FILES)
def test_summary_from_objects_equals_summary_from_mappings(name: str) -> None:
    for mappings in [records(name), *by_run(records(name)).values()]:
        from_objects = pr.metrics.from_episodes(objects(mappings))
        assert from_objects == pr.metrics.from_episodes(mappings)
        assert set(from_objects) == {"avg_reward", "avg_metrics", "avg_error"}


def test_summary_of_the_captured_single_run() -> None:
    # Run 3 of the capture: four single-trace episodes; verifiers' own trace.reward.
    run = by_run(records("episodes"))["ev_fixture_0003"]
    rewards = [t.reward for e in objects(run) for t in e.traces]
    assert len(rewards) == len(run) and any(rewards)
    summary = pr.metrics.from_episodes(objects(run))
    assert summary["avg_reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert summary["avg_error"] == pytest.approx(sum(not e["ok"] for e in run) / len(run))


@pytest.mark.parametrize("name", FILES)
def test_samples_from_objects_equal_samples_from_mappings(name: str) -> None:
    for mappings in by_run(records(name)).values():
        rows = pr.projection.build_samples(objects(mappings))
        assert rows == pr.projection.build_samples(mappings)
        assert [r["episode_id"] for r in rows] == [m["id"] for m in mappings if m["traces"]]


def test_samples_from_objects_equal_the_golden_v0_rows() -> None:
    # samples_v0.jsonl: run 3, run 2, then the two notes-tool episodes of run 1.
    runs = by_run(records("episodes"))
    best_of_n = runs["ev_fixture_0001"]
    calls = [runs["ev_fixture_0003"], runs["ev_fixture_0002"][:2], best_of_n[6:8]]
    rows = [row for call in calls for row in pr.projection.build_samples(objects(call))]
    assert rows == records("samples_v0")


# -- log_episodes against the stand-in platform ------------------------------------------


def _in_window(mappings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies with every trace's timing moved to now: Prime Traces (and the stand-in)
    refuse traces whose start is more than a year old, and the fixture's clock is fixed."""
    shifted = copy.deepcopy(mappings)
    latest = max(t["timing"]["start"] for e in shifted for t in e["traces"])
    delta = time.time() - 60 - latest
    for episode in shifted:
        for trace in episode["traces"]:
            timing = trace["timing"]
            for key in ("start", "end"):
                if isinstance(timing.get(key), (int, float)):
                    timing[key] += delta
    return shifted


def _log_run(episodes: list[Any]) -> str:
    """Log `episodes` into one online run, the way verifiers does, and close it."""
    run = pr.init(
        mode="online",
        id=None,
        name="object-path",
        environments=["prfix-v1"],
        model="scripted/model",
        framework="verifiers",
        config={"model": "scripted/model", "num_examples": 2, "rollouts_per_example": 2},
    )
    for episode in episodes:
        run.log_episodes([episode])
    run.finish(pr.metrics.from_episodes(episodes), status=pr.RunStatus.COMPLETED, error=None)
    assert run.errors == [] and run.dropped_records == 0
    assert not any(run.failed_records.values()), run.failed_records
    return run.id


def _stored(platform: StandInPlatform, run_id: str) -> dict[str, Any]:
    return {
        "evaluation": {
            k: v
            for k, v in platform.evaluations[run_id].items()
            if k not in ("created_at", "updated_at", "finalized_at")
        },
        "episodes": platform.episodes,
        "traces": platform.traces,
        "trace_writes": platform.trace_writes,
        "samples": platform.samples(run_id),
    }


def test_log_episodes_objects_reach_the_platform_like_mappings(
    prime_env: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prime_env (the SDK's pytest plugin): a stand-in with the environment pointed at it.
    mappings = _in_window(records("episodes"))
    episodes = objects(mappings)
    before = [e.to_record() for e in episodes]

    object_run = _log_run(episodes)
    from_objects = _stored(prime_env, object_run)
    # The SDK stamps copies: the producer's objects are untouched.
    assert [e.to_record() for e in episodes] == before

    with StandInPlatform() as other:
        for key, value in other.env().items():
            monkeypatch.setenv(key, value)
        mapping_run = _log_run(copy.deepcopy(mappings))
        from_mappings = _stored(other, mapping_run)

    assert object_run == mapping_run  # both stand-ins number their first evaluation alike
    assert from_objects == from_mappings

    # And what got there is every episode once, stamped with the run, one row each.
    assert set(from_objects["episodes"]) == {m["id"] for m in mappings}
    member_ids = {t["id"] for m in mappings for t in m["traces"]}
    assert set(from_objects["traces"]) == member_ids
    assert set(from_objects["trace_writes"].values()) == {1}
    for envelope in from_objects["episodes"].values():
        assert envelope["run"]["id"] == object_run
    for doc in from_objects["traces"].values():
        assert doc["run"]["id"] == object_run
    rows = from_objects["samples"]
    assert sorted(r["episode_id"] for r in rows) == sorted(m["id"] for m in mappings)
    evaluation = from_objects["evaluation"]
    assert evaluation["finalize_count"] == 1
    summary = pr.metrics.from_episodes(mappings)
    assert {k: evaluation["metrics"].get(k) for k in summary} == summary

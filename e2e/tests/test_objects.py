"""The object path: verifiers' own `WireEpisode` (and `WireTrace`) objects, built from the
captured fixture records, fed to our `log_episodes` / `log_traces`, `metrics.from_episodes`
and `projection.build_samples`. Whatever the objects give must equal what the plain
mappings give."""

from __future__ import annotations

import copy
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from verifiers.v1.episode import WireEpisode
from verifiers.v1.trace import WireTrace

import prime_runs as pr
from conftest import DATA, read_jsonl
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


# -- log_episodes / log_traces against the stand-in platform ------------------------------


def _traces_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    return record["traces"] if "traces" in record else [record]


def _in_window(mappings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies with every trace's timing moved to now: Prime Traces (and the stand-in)
    refuse traces whose start is more than a year old, and the fixture's clock is fixed."""
    shifted = copy.deepcopy(mappings)
    latest = max(t["timing"]["start"] for r in shifted for t in _traces_of(r))
    delta = time.time() - 60 - latest
    for record in shifted:
        for trace in _traces_of(record):
            timing = trace["timing"]
            for key in ("start", "end"):
                if isinstance(timing.get(key), (int, float)):
                    timing[key] += delta
    return shifted


def _log_run(items: list[Any], kind: str) -> str:
    """Log `items` (episodes or bare traces) into one online run the way verifiers does
    (`init` with its keywords, one call per item) and close it; return the run id."""
    run = pr.init(
        mode="online",
        id=None,
        name="object-path",
        environments=["prfix-v1"],
        model="scripted/model",
        framework="verifiers",
        config={"model": "scripted/model", "num_examples": 2, "rollouts_per_example": 2},
    )
    log = run.log_episodes if kind == "episodes" else run.log_traces
    for item in items:
        log([item])
    summary = pr.metrics.from_episodes(items) if kind == "episodes" else None
    run.finish(summary, status=pr.RunStatus.COMPLETED, error=None)
    assert run.errors == [] and run.dropped_records == 0
    assert not any(run.failed_records.values()), run.failed_records
    return run.id


def _stored(platform: StandInPlatform, run_id: str) -> dict[str, Any]:
    """What reached the stand-in for the run, minus server clock readings."""
    clock = ("created_at", "updated_at", "finalized_at")
    return {
        "evaluation": {k: v for k, v in platform.evaluations[run_id].items() if k not in clock},
        "episodes": platform.episodes,
        "traces": platform.traces,
        "trace_writes": platform.trace_writes,
        "samples": platform.samples(run_id),
    }


def _log_both_ways(
    first: StandInPlatform,
    monkeypatch: pytest.MonkeyPatch,
    mappings: list[dict[str, Any]],
    as_objects: list[Any],
    kind: str,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Log the objects into `first`, the mappings into a second fresh stand-in; return the
    run id and what each stand-in stored."""
    before = [o.to_record() for o in as_objects]
    object_run = _log_run(as_objects, kind)
    from_objects = _stored(first, object_run)
    # The SDK stamps copies: the producer's objects are untouched.
    assert [o.to_record() for o in as_objects] == before
    with StandInPlatform() as second:
        for key, value in second.env().items():
            monkeypatch.setenv(key, value)
        # Both stand-ins name their first evaluation alike, so the second run's archive
        # folder would be the first's: a run folder of its own, as a real platform's unique
        # ids give it (a shared folder counts both runs' records as this run's).
        first_root = Path(os.environ["PRIME_RUNS_DIR"])
        monkeypatch.setenv("PRIME_RUNS_DIR", tempfile.mkdtemp(dir=first_root.parent))
        mapping_run = _log_run(copy.deepcopy(mappings), kind)
        from_mappings = _stored(second, mapping_run)
    assert object_run == mapping_run  # both stand-ins number their first evaluation alike
    return object_run, from_objects, from_mappings


def test_log_episodes_objects_reach_the_platform_like_mappings(
    prime_env: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prime_env (the SDK's pytest plugin): a stand-in with the environment pointed at it.
    mappings = _in_window(records("episodes"))
    run_id, from_objects, from_mappings = _log_both_ways(
        prime_env, monkeypatch, mappings, objects(mappings), "episodes"
    )
    assert from_objects == from_mappings

    # And what got there is every episode once, stamped with the run, one row each.
    assert set(from_objects["episodes"]) == {m["id"] for m in mappings}
    member_ids = {t["id"] for m in mappings for t in m["traces"]}
    assert set(from_objects["traces"]) == member_ids
    assert set(from_objects["trace_writes"].values()) == {1}
    for envelope in from_objects["episodes"].values():
        assert envelope["run"]["id"] == run_id
    for doc in from_objects["traces"].values():
        assert doc["run"]["id"] == run_id
    rows = from_objects["samples"]
    assert sorted(r["episode_id"] for r in rows) == sorted(m["id"] for m in mappings)
    evaluation = from_objects["evaluation"]
    assert evaluation["finalize_count"] == 1
    summary = pr.metrics.from_episodes(mappings)
    assert {k: evaluation["metrics"].get(k) for k in summary} == summary


def test_log_traces_objects_reach_the_platform_like_mappings(
    prime_env: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    mappings = _in_window(records("traces"))
    as_objects = [WireTrace.model_validate(copy.deepcopy(m)) for m in mappings]
    assert [t.to_record() for t in as_objects] == mappings
    run_id, from_objects, from_mappings = _log_both_ways(
        prime_env, monkeypatch, mappings, as_objects, "traces"
    )
    assert from_objects == from_mappings
    assert set(from_objects["traces"]) == {m["id"] for m in mappings}
    assert set(from_objects["trace_writes"].values()) == {1}
    for doc in from_objects["traces"].values():
        assert doc["run"]["id"] == run_id

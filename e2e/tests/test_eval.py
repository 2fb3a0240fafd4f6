"""Full evaluations through verifiers' own CLI (`vf-eval`): our `pr-e2e` taskset, the null
harness on the subprocess runtime, `fake_model.FakeModel` as the provider and the stand-in
platform with push on. What reached the stand-in is checked against what verifiers wrote
locally (`traces.jsonl`) and against the outcomes the canned model makes certain."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
from conftest import TASKSET_ID, EvalRun, run_vf_eval
from fake_model import MODEL_ID, FakeModel, Request
from prime_runs.testing import StandInPlatform

# Every rollout of a row gets the same reward (the canned model answers by prompt):
# exact (weight 1.0) + overlap (weight 0.5).
ROWS = [
    {
        "id": "e2e-full",
        "name": "full",
        "prompt": "Say exactly: hello world",
        "answer": "hello world",
    },
    {
        "id": "e2e-partial",
        "name": "partial",
        "prompt": "Say the first word of: good morning",
        "answer": "good morning",
    },
    {
        "id": "e2e-unicode",
        "name": "unicode",
        "prompt": "Say exactly: bonjour à tous 🎉",
        "answer": "bonjour à tous",
    },
    {"id": "e2e-upstream", "name": "upstream", "prompt": "Please fail now", "answer": "never"},
]
ROLLOUTS = 2
REWARD_BY_ROW = {"e2e-full": 1.5, "e2e-partial": 0.25, "e2e-unicode": 1.5, "e2e-upstream": 0.0}
FAILED_ROWS = {"e2e-upstream"}

# One rollout at a time, so the rows before the abort row finish (and upload) before it
# breaks the eval, and the row after it never starts.
FAILING_ROWS = [
    {"id": "f-first", "name": "first", "prompt": "Say exactly: first one", "answer": "first one"},
    {"id": "f-second", "name": "second", "prompt": "Say exactly: second one", "answer": "second"},
    {
        "id": "f-abort",
        "name": "abort",
        "prompt": "Say exactly: boom",
        "answer": "boom",
        "abort": True,
    },
    {"id": "f-never", "name": "never", "prompt": "Say exactly: not reached", "answer": "not"},
]
ABORT_ERROR = "EvalAborted: grader crashed on purpose (pr-e2e abort row)"


@dataclass(frozen=True)
class Outcome:
    """One eval and the stand-in it pushed to (kept running for the assertions)."""

    run: EvalRun
    platform: StandInPlatform
    model_requests: list[Request]

    @property
    def evaluation(self) -> dict[str, Any]:
        evaluations = self.platform.evaluations
        assert len(evaluations) == 1, f"{len(evaluations)} evaluations\n{self.run.describe()}"
        return next(iter(evaluations.values()))

    @property
    def eval_id(self) -> str:
        return str(self.evaluation["evaluation_id"])


def _eval(
    name: str,
    rows: list[dict[str, Any]],
    model: FakeModel,
    workdir: Path,
    rollouts: int,
    max_concurrent: int,
) -> Iterator[Outcome]:
    with StandInPlatform() as platform:
        before = len(model.requests)
        run = run_vf_eval(
            name,
            rows,
            model=model,
            platform_env=platform.env(),
            workdir=workdir,
            rollouts=rollouts,
            max_concurrent=max_concurrent,
        )
        print(f"\n{name}: vf-eval took {run.seconds:.1f}s")
        yield Outcome(run, platform, model.requests[before:])


@pytest.fixture(scope="module")
def completed(fake_model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    workdir = tmp_path_factory.mktemp("completed")
    yield from _eval("e2e-completed", ROWS, fake_model, workdir, ROLLOUTS, 4)


@pytest.fixture(scope="module")
def failed(fake_model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    workdir = tmp_path_factory.mktemp("failed")
    yield from _eval("e2e-failed", FAILING_ROWS, fake_model, workdir, 1, 1)


def _row_id(episode: dict[str, Any]) -> str:
    return str(episode["task"]["data"]["id"])


def _reward(trace: dict[str, Any]) -> float:
    """A trace's total reward, from its record: the weighted sum of its reward scores."""
    return sum(r["score"] * r["weight"] for r in trace.get("rewards", {}).values())


# -- a completed eval ----------------------------------------------------------------------


def test_eval_ran_every_rollout(completed: Outcome) -> None:
    run = completed.run
    assert run.returncode == 0, run.describe()
    # verifiers falls back to a local-only run when the platform run cannot be opened.
    assert "--push: could not" not in run.stderr, run.describe()
    episodes = run.episodes
    assert sorted(_row_id(e) for e in episodes) == sorted(
        r["id"] for r in ROWS for _ in range(ROLLOUTS)
    )
    for episode in episodes:
        assert episode["ok"] is (_row_id(episode) not in FAILED_ROWS)
        assert episode["run"] == {"type": "eval", "id": completed.eval_id, "name": run.name}
    # Each rollout reached the canned model, through verifiers' streaming path.
    assert len(completed.model_requests) >= len(episodes)
    assert all(r.stream and r.model == MODEL_ID for r in completed.model_requests)


def test_one_evaluation_with_the_eval_identity(completed: Outcome) -> None:
    evaluation = completed.evaluation
    assert evaluation["name"] == "e2e-completed"
    assert evaluation["model_name"] == MODEL_ID
    assert evaluation["framework"] == "verifiers"
    assert evaluation["dataset"] == TASKSET_ID
    [resolve] = completed.platform.requests_for("env_resolve")
    assert resolve.json["name"] == TASKSET_ID
    assert resolve.status == 200
    assert len(evaluation["environments"]) == 1
    assert evaluation["environments"][0]["id"]
    metadata = evaluation["metadata"]
    assert metadata["model"] == MODEL_ID
    assert metadata["num_examples"] == len(ROWS)
    assert metadata["rollouts_per_example"] == ROLLOUTS
    assert len(completed.platform.requests_for("eval_create")) == 1


def test_every_episode_once_in_prime_traces_stamped(completed: Outcome) -> None:
    platform, eval_id = completed.platform, completed.eval_id
    local = {e["id"]: e for e in completed.run.episodes}
    assert set(platform.episodes) == set(local)
    assert set(platform.episode_writes.values()) == {1}
    member_ids = {t["id"] for e in local.values() for t in e["traces"]}
    assert member_ids and set(platform.traces) == member_ids
    assert set(platform.trace_writes.values()) == {1}
    for episode_id, envelope in platform.episodes.items():
        assert envelope["run"]["id"] == eval_id
        assert envelope["run"]["type"] == "eval"
        assert envelope["env"]["id"] == TASKSET_ID
        # The stand-in keeps each member trace as its own document, keyed by id.
        assert envelope["traces"] == [t["id"] for t in local[episode_id]["traces"]]
        for trace_id in envelope["traces"]:
            member = platform.traces[trace_id]
            assert member["run"]["id"] == eval_id
            assert member["run"]["type"] == "eval"
            assert member["run"]["name"] == completed.run.name
    for upload in platform.requests_for("traces_upload"):
        assert upload.status is not None and 200 <= upload.status < 300, upload
        assert upload.line_format == "episode"


def test_one_sample_row_per_episode(completed: Outcome) -> None:
    local = {e["id"]: e for e in completed.run.episodes}
    rows = completed.platform.samples(completed.eval_id)
    assert sorted(r["episode_id"] for r in rows) == sorted(local)
    for row in rows:
        episode = local[row["episode_id"]]
        assert row["sample_id"] == episode["id"]
        assert row["reward"] == pytest.approx(REWARD_BY_ROW[_row_id(episode)])
        assert row["task"]["id"] == _row_id(episode)
    for append in completed.platform.requests_for("samples_append"):
        assert append.status == 200, append


def test_finalized_once_with_the_summary_verifiers_computed(completed: Outcome) -> None:
    evaluation = completed.evaluation
    assert evaluation["finalize_count"] == 1
    assert evaluation["status"] in ("PROCESSING", "COMPLETED")
    episodes = completed.run.episodes
    # verifiers' summary is pr.metrics.from_episodes over its episode objects; the
    # records it wrote locally are the same episodes.
    expected = pr.metrics.from_episodes(episodes)
    rewards = [_reward(t) for e in episodes for t in e["traces"]]
    assert expected["avg_reward"] == pytest.approx(sum(rewards) / len(rewards))
    want = sum(REWARD_BY_ROW[r["id"]] for r in ROWS) / len(ROWS)
    assert expected["avg_reward"] == pytest.approx(want)
    assert expected["avg_error"] == pytest.approx(len(FAILED_ROWS) / len(ROWS))
    [finalize] = completed.platform.requests_for("eval_finalize")
    assert finalize.status == 200
    for metrics in (finalize.json["metrics"], evaluation["metrics"]):
        assert {k: metrics.get(k) for k in expected} == expected


# -- an eval that breaks midway ------------------------------------------------------------


def test_failed_eval_breaks_after_some_rollouts(failed: Outcome) -> None:
    run = failed.run
    assert run.returncode != 0, run.describe()
    assert "EvalAborted" in run.stderr, run.describe()
    # The rows before the abort row finished; the one after it never started.
    assert [_row_id(e) for e in run.episodes] == ["f-first", "f-second"]


def test_failed_eval_is_closed_as_failed(failed: Outcome) -> None:
    evaluation = failed.evaluation
    assert evaluation["name"] == "e2e-failed"
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"] == ABORT_ERROR
    assert evaluation["finalize_count"] == 0
    assert failed.platform.requests_for("eval_finalize") == []


def test_failed_eval_kept_what_finished(failed: Outcome) -> None:
    platform, eval_id = failed.platform, failed.eval_id
    local = {e["id"]: e for e in failed.run.episodes}
    assert set(platform.episodes) == set(local)
    assert set(platform.trace_writes.values()) == {1}
    for envelope in platform.episodes.values():
        assert envelope["run"]["id"] == eval_id
        assert all(platform.traces[t]["run"]["id"] == eval_id for t in envelope["traces"])
    rows = platform.samples(eval_id)
    assert sorted(r["episode_id"] for r in rows) == sorted(local)

"""The same evaluation, written against 0.1.4's public API with verifiers' own episode
objects, run once by the published prime-runs 0.1.4 and once by this checkout, each against
a fresh stand-in platform: the evaluation, its episodes in Prime Traces, its v0 sample rows
and its finalized numbers must match what 0.1.4 sent (peer.py runs both sides)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import peer
import pytest

import prime_runs as pr
from conftest import DATA, read_jsonl
from prime_runs.testing import StandInPlatform

# 0.1.4's public API only: what a 0.1.4 user's evaluation calls.
LOOP = r"""
import json, sys
import prime_runs as pr
from verifiers.v1.episode import WireEpisode

episodes = [json.loads(line) for line in open(sys.argv[1])]
run = pr.init(
    name="parity-eval",
    environments=["gsm8k"],
    model="scripted/model",
    framework="verifiers",
    config={"rollouts": 2},
)
for start in range(0, len(episodes), 3):
    run.log_episodes([WireEpisode.model_validate(e) for e in episodes[start : start + 3]])
run.finish()
print(json.dumps({"id": run.id, "version": pr.__version__}))
"""


def received(platform: StandInPlatform, run_id: str) -> dict[str, Any]:
    (create,) = [r.json for r in platform.requests_for("eval_create")]
    (finalize,) = [r.json for r in platform.requests_for("eval_finalize")]
    rows = sorted(platform.samples(run_id), key=lambda row: str(row.get("sample_id")))
    return {
        "create": create,
        "finalize": finalize,
        "status": platform.evaluations[run_id]["status"],
        "rows": rows,
        "documents": platform.episodes,
        "run_id": run_id,
    }


def both(peer_python: Path, tmp_path: Path, traces: str) -> tuple[dict, dict]:
    args = [str(DATA / "episodes.jsonl")]
    return peer.both(peer_python, tmp_path, LOOP, args, received, traces=traces)


def assert_same_close(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """The close-out: what 0.1.4 sent, and (where 0.1.4's finish() without a summary sent
    none) the numbers computed from the run's episodes."""
    assert ours["status"] == theirs["status"]
    sent, theirs_sent = ours["finalize"]["metrics"], theirs["finalize"]["metrics"]
    for key, value in theirs_sent.items():
        if isinstance(value, dict):
            assert {k: sent[key][k] for k in value} == value, key
        else:
            assert sent[key] == value, key
    computed = pr.metrics.from_episodes(read_jsonl(DATA / "episodes.jsonl"))
    assert sent["avg_reward"] == pytest.approx(computed["avg_reward"])
    assert sent["avg_error"] == pytest.approx(computed["avg_error"])
    assert sent["avg_metrics"] == pytest.approx(computed["avg_metrics"])


def unstamped(row: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    """``row`` without the run stamps of the episode under ``info.native_wrapper``; with
    ``run_id``, first check that they name that run (this package journals and sends the
    record stamped with its run, and the row carries those very bytes; 0.1.4's row kept the
    producer's own ``run``)."""
    row = copy.deepcopy(row)
    wrapper = row["info"]["native_wrapper"]
    if run_id is not None:
        assert wrapper["run"]["id"] == run_id
        assert all(trace["run"]["id"] == run_id for trace in wrapper["traces"])
    wrapper["run"].pop("id")
    for trace in wrapper["traces"]:
        trace.pop("run", None)
    return row


def test_with_prime_traces_on_the_same_evaluation_and_documents(
    peer_python: Path, tmp_path: Path
) -> None:
    theirs, ours = both(peer_python, tmp_path, "enabled")
    assert ours["create"] == theirs["create"]
    assert_same_close(ours, theirs)
    assert set(ours["documents"]) == set(theirs["documents"]) and len(ours["documents"]) == 20
    # With Prime Traces on, 0.1.4 writes no sample rows; this package writes both
    # (docs/coming-from-0.1.4.md, "Both stores by default").
    assert theirs["rows"] == []
    assert len(ours["rows"]) == 20


def test_prime_traces_not_enabled_for_the_account_the_same_sample_rows(
    peer_python: Path, tmp_path: Path
) -> None:
    theirs, ours = both(peer_python, tmp_path, "service_not_enabled")
    assert ours["create"] == theirs["create"]
    assert_same_close(ours, theirs)
    assert len(ours["rows"]) == len(theirs["rows"]) == 20
    assert [unstamped(row, ours["run_id"]) for row in ours["rows"]] == [
        unstamped(row) for row in theirs["rows"]
    ]

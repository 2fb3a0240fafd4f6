"""Ranks that join a training run from processes of their own (real subprocesses, real
HTTP to the stand-in): each rank's metrics rows are stored once, the run is registered
once and finalized once, by its owner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import prime_runs as pr
import prime_runs._runs.join as _join
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import TRAIN_SAMPLES, inspect
from prime_runs.testing import StandInPlatform

RANK = r"""
import json, sys
import prime_runs as pr

rank = int(sys.argv[1])
carrier = json.loads(sys.argv[2])
run = pr.init(join=carrier)
for i in range(3):
    run.log_metrics({"loss": 1.0 / (i + 1), "rank": rank}, step=rank * 10 + i)
run.log_episodes({"id": f"ep-rank-{rank}", "env": {"id": "gsm8k"},
                  "traces": [{"id": f"tr-rank-{rank}", "timing": {"start": 1.0}}]})
ok = run.flush(60)  # every row and episode stored
run.finish()
print(json.dumps({"id": run.id, "kind": run.kind, "owner": run._state.owner, "ok": ok,
                  "folder": run.archive_path}))
"""


def _owner() -> pr.Run:
    return pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=30),
    )


def _ranks(carrier: dict[str, str], count: int) -> list[dict[str, object]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(rank), json.dumps(carrier)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for rank in range(1, count + 1)
    ]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out.append(json.loads(stdout.splitlines()[-1]))
    return out


def test_a_training_carrier_names_the_kind(isolated_env: Path) -> None:
    run = pr.init(name="eval")
    try:
        assert "prime.run.kind" not in run.context()["baggage"]  # eval carriers as before
    finally:
        run.finish()
    ctx = _join.extract(
        {
            "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
            "baggage": "prime.run.id=r1,prime.run.mode=offline,prime.run.kind=train",
        }
    )
    state = _join.join_state("r1", ctx, {})
    assert state is not None and state.identity.kind == "train" and not state.owner
    assert state.description["kind"] == "train" and hasattr(state, "training")
    state.finish(pr.RunStatus.COMPLETED, None, None, 5)


def test_ranks_send_their_rows_once_and_only_the_owner_closes(prime_env: StandInPlatform) -> None:
    owner = _owner()
    carrier = owner.context()
    assert "prime.run.kind=train" in carrier["baggage"].split(",")
    try:
        owner.log_metrics({"loss": 2.0}, step=0)
        ranks = _ranks(carrier, 2)
        assert [(r["id"], r["kind"], r["owner"], r["ok"]) for r in ranks] == [
            (owner.id, "train", False, True)
        ] * 2
        # The ranks registered nothing and closed nothing.
        assert len(prime_env.requests_for("rft_register")) == 1
        assert prime_env.requests_for("rft_finalize") == []
        assert prime_env.training_runs[owner.id]["status"] == "running"
    finally:
        owner.finish()
    rows = prime_env.training_metrics(owner.id)  # replays kept: a resend would show
    assert Counter(r["step"] for r in rows) == Counter([0, 10, 11, 12, 20, 21, 22])
    assert {r["step"]: r.get("rank") for r in rows if r["step"]}[21] == 2
    run = prime_env.training_runs[owner.id]
    assert run["status"] == "completed" and run["finalize_count"] == 1
    assert {"ep-rank-1", "ep-rank-2"} <= set(prime_env.episodes)
    assert prime_env.episodes["ep-rank-1"]["run"]["type"] == "train"
    # Each rank journaled its rows in the run's folder, all acknowledged.
    folder = Path(str(ranks[0]["folder"]))
    journals = sorted(folder.glob("train_metrics-*.jsonl"))
    assert len(journals) == 3  # the owner's and each rank's
    for journal in journals:
        lines = journal.read_text().splitlines()
        acks = journal.with_suffix(".acks").read_text().split()
        assert sorted(map(int, acks)) == list(range(len(lines)))
    # The ranks' episodes have no row in the owner's sample table: nothing left for sync.
    info = inspect(RunArchive(folder))
    assert info.pending[TRAIN_SAMPLES] == 0 and not info.needs_sync


def test_an_offline_rank_journals_its_rows_into_the_run(isolated_env: Path) -> None:
    owner = _owner()
    assert owner.mode == "offline"
    (rank,) = _ranks(owner.context(), 1)
    owner.finish()
    assert rank["id"] == owner.id and rank["kind"] == "train"
    folder = Path(str(owner.archive_path))
    rows = [
        json.loads(line)
        for journal in folder.glob("train_metrics-*.jsonl")
        for line in journal.read_text().splitlines()
    ]
    assert sorted(r["metrics"]["step"] for r in rows) == [10, 11, 12]
    assert {r["run_id"] for r in rows} == {owner.id}


EXITING = r"""
import json, sys
import prime_runs as pr

run = pr.join(json.loads(sys.argv[1]))
for step in (5, 6):
    run.log_metrics({"loss": 0.1}, step=step)
# Leaves without finish() or flush(): the exit hook drains the rank's rows.
"""


def test_a_rank_that_exits_without_finishing_still_sends_its_rows(
    prime_env: StandInPlatform,
) -> None:
    owner = _owner()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", EXITING, json.dumps(owner.context())],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert sorted(r["step"] for r in prime_env.training_metrics(owner.id)) == [5, 6]
        assert prime_env.requests_for("rft_finalize") == []
    finally:
        owner.finish()
    assert prime_env.training_runs[owner.id]["finalize_count"] == 1

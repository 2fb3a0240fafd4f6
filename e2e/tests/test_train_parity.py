"""The same training loop, written against 0.1.4's public API with verifiers' own episode
objects, run once by the published prime-runs 0.1.4 and once by this checkout, each against
a fresh stand-in platform: what the platform receives must match (the register body, one
metrics row per step, the Parquet sample objects per dispatch step and their rows, the
finalize), and Prime Traces holds every episode once, stamped as a training run's.

The peer's interpreter is `.e2e/peer-venv` (verifiers 0.4.0 with prime-runs[train]==0.1.4,
built by e2e/run.sh); this checkout's is the tier's own.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import peer
import pyarrow.parquet as pq

from conftest import DATA, eval_env
from prime_runs.testing import StandInPlatform

STEPS = 21  # the sample table takes every 10th step: 0, 10 and 20

# 0.1.4's public API only: what a 0.1.4 user's training loop calls.
LOOP = r"""
import copy, json, sys
import prime_runs as pr
from verifiers.v1.episode import WireEpisode

templates = [json.loads(line) for line in open(sys.argv[1])][:2]  # training-work episodes
steps = int(sys.argv[2])
run = pr.init(
    kind="train",
    name="parity-loop",
    model="Qwen/Qwen3-0.6B",
    environments=["gsm8k"],
    team_id="team_parity",
    training=pr.TrainingSpec(max_steps=steps, batch_size=4, rollouts_per_example=2),
    config={"learning_rate": 1e-6, "seed": 7},
)
for step in range(steps):
    batch = []
    for n, template in enumerate(templates * 2):
        record = copy.deepcopy(template)
        record["id"] = f"ep-{step}-{n}"
        for k, trace in enumerate(record["traces"]):
            trace["id"] = f"tr-{step}-{n}-{k}"
        record["run"]["work"]["step"] = step  # dispatched at this step
        batch.append(WireEpisode.model_validate(record))
    run.log_episodes(batch)
    run.log_metrics({"loss": 1.0 / (step + 1), "reward/mean": step / steps}, step=step)
run.finish()
print(json.dumps({"id": run.id, "version": pr.__version__}))
"""


def both(
    peer_python: Path, tmp_path: Path, traces: str = "enabled", **env: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The loop run by the peer, then by this checkout, each against a fresh stand-in
    whose Prime Traces is ``traces``: what each platform received."""
    args = [str(DATA / "train_episodes.jsonl"), str(STEPS)]
    return peer.both(peer_python, tmp_path, LOOP, args, received, traces=traces, env=env)


def received(platform: StandInPlatform, run_id: str) -> dict[str, Any]:
    """What the platform holds of the run, in a form both SDKs must agree on."""
    (register,) = [r.json for r in platform.requests_for("rft_register")]
    metrics = sorted(
        ({k: v for k, v in row.items() if k != "_timestamp"} for row in _rows(platform)),
        key=lambda row: row["step"],
    )
    tables: dict[int, list[dict[str, Any]]] = {}
    for sample in platform.training_samples(run_id):
        table = pq.read_table(io.BytesIO(platform.object_bytes(sample["s3_key"])))
        for row in table.to_pylist():
            # When the object was written: a column the two runs cannot share.
            assert row.pop("created_at").tzinfo is not None
            tables.setdefault(sample["step"], []).append(row)
    for rows in tables.values():
        # A step's episodes may reach the sink in more than one batch (either SDK's
        # batching decides), and each object numbers its rows in a range of its own: the
        # ids are unique in the step, their values depend on the batching.
        ids = [row.pop("sample_id") for row in rows]
        assert len(set(ids)) == len(ids)
    (finalize,) = [r.json for r in platform.requests_for("rft_finalize")]
    return {
        "register": register,
        "metrics": metrics,
        "schema": _schema(platform, run_id) if platform.training_samples(run_id) else None,
        "tables": {step: sorted(rows, key=_row_key) for step, rows in tables.items()},
        "finalize": {k: v for k, v in finalize.items() if k != "run_id"},
        "status": platform.training_runs[run_id]["status"],
        "documents": platform.episodes,
        "writes": platform.episode_writes,
        "run_id": run_id,
    }


def _rows(platform: StandInPlatform) -> list[dict[str, Any]]:
    rows = []
    for request in platform.requests_for("rft_metrics"):
        assert request.json is not None
        rows.append(request.json["metrics"])
    return rows


def _schema(platform: StandInPlatform, run_id: str) -> list[tuple[str, str]]:
    first = platform.training_samples(run_id)[0]
    schema = pq.read_schema(io.BytesIO(platform.object_bytes(first["s3_key"])))
    return [(field.name, str(field.type)) for field in schema]


def _row_key(row: dict[str, Any]) -> tuple[str, str]:
    return (str(row.get("episode_id")), str(row.get("trace_id")))


def assert_same_run(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """The run, its step curve and its close-out: request for request."""
    assert ours["register"] == theirs["register"]
    assert len(ours["metrics"]) == STEPS
    assert ours["metrics"] == theirs["metrics"]
    assert ours["finalize"] == theirs["finalize"]
    assert ours["status"] == theirs["status"] == "completed"


def assert_same_table(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """The sample table: the same steps, schema and rows."""
    assert sorted(ours["tables"]) == sorted(theirs["tables"]) == [0, 10, 20]
    assert ours["schema"] == theirs["schema"]
    for step in (0, 10, 20):
        assert len(ours["tables"][step]) == len(theirs["tables"][step]) > 0
        assert ours["tables"][step] == theirs["tables"][step], f"step {step}"


def assert_every_episode_once(received: dict[str, Any]) -> None:
    """Prime Traces: every episode once, at its dispatch step, as a training run's."""
    expected = {f"ep-{step}-{n}" for step in range(STEPS) for n in range(4)}
    assert set(received["documents"]) == expected
    assert set(received["writes"].values()) == {1}
    for episode_id, document in received["documents"].items():
        assert document["run"]["id"] == received["run_id"]
        assert document["run"]["type"] == "train"
        assert document["run"]["work"]["step"] == int(episode_id.split("-")[1])


def test_with_prime_traces_on_the_same_run_reaches_the_platform(
    peer_python: Path, tmp_path: Path
) -> None:
    theirs, ours = both(peer_python, tmp_path)
    assert_same_run(ours, theirs)
    assert_every_episode_once(theirs)
    assert_every_episode_once(ours)
    # The one difference, on purpose (docs/coming-from-0.1.4.md, "Both stores by default"):
    # 0.1.4 writes the sample table only when Prime Traces is off; this package writes both.
    assert theirs["tables"] == {}
    assert sorted(ours["tables"]) == [0, 10, 20]


def test_opted_out_of_prime_traces_the_same_sample_table(peer_python: Path, tmp_path: Path) -> None:
    theirs, ours = both(peer_python, tmp_path, PRIME_TRACES_OPT_OUT="1")
    assert_same_run(ours, theirs)
    assert_same_table(ours, theirs)
    assert theirs["documents"] == ours["documents"] == {}


def test_prime_traces_not_enabled_for_the_account_the_same_sample_table(
    peer_python: Path, tmp_path: Path
) -> None:
    theirs, ours = both(peer_python, tmp_path, traces="service_not_enabled")
    assert_same_run(ours, theirs)
    assert_same_table(ours, theirs)


CRASH = r"""
import json, sys
import prime_runs as pr

run = pr.init(kind="train", model="Qwen/Qwen3-0.6B", environments=["gsm8k"],
              team_id="team_parity", training=pr.TrainingSpec(max_steps=10))
print(json.dumps({"id": run.id}), flush=True)
with run:
    for step in range(3):
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    raise RuntimeError("loss diverged at step 3")
"""


def test_a_crashed_training_loop_is_closed_as_0_1_4_closes_it(
    peer_python: Path, tmp_path: Path
) -> None:
    out = []
    for who, python in peer.interpreters(peer_python):
        with StandInPlatform() as platform:
            env = eval_env(platform.env(), tmp_path / who)
            proc = subprocess.run(
                [str(python), "-c", CRASH], env=env, capture_output=True, text=True, timeout=300
            )
            assert proc.returncode == 1 and "loss diverged" in proc.stderr
            run_id = json.loads(proc.stdout.splitlines()[0])["id"]
            out.append(
                {
                    "status": [r.json for r in platform.requests_for("rft_status")],
                    "finalize": platform.requests_for("rft_finalize"),
                    "steps": sorted(platform.training_steps(run_id)),
                    "stored": platform.training_runs[run_id]["status"],
                }
            )
    theirs, ours = out
    assert ours == theirs
    (status,) = ours["status"]
    assert status["status"] == "failed" and "loss diverged" in status["error_message"]
    assert ours["finalize"] == [] and ours["steps"] == [0, 1, 2]
    assert ours["stored"] == "failed"


def test_the_peer_interpreter_is_the_published_0_1_4(peer_python: Path) -> None:
    # The comparison above is only as good as its premise.
    out = subprocess.run(
        [str(peer_python), "-c", "import prime_runs, pyarrow; print(prime_runs.__version__)"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.1.4"

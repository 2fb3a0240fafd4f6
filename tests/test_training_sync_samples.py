"""`prime-runs sync` sends a training run's sample table (Parquet objects per dispatch step,
presign -> PUT -> confirm) as the live sink would have, against the stand-in over HTTP:
only what no live sink settled, nothing twice after an interrupted sync, and nothing
without pyarrow (said, and left pending)."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import prime_runs as pr
import prime_runs._journal.lease as _lease
import prime_runs._sync.train_samples as table_sync
from prime_runs._journal.archive import RunArchive
from prime_runs._journal.runinfo import TRAIN_SAMPLES, inspect
from prime_runs.cli import main
from prime_runs.exporters.train_samples import SAMPLE_ID_RANGES, SAMPLE_ID_STRIDE
from prime_runs.platform import retry
from prime_runs.testing import StandInPlatform

STEPS = (0, 5, 10, 10, 20, 20, 20)  # 5 is off the cadence: no row in the table
TABLE_ROUTES = ("rft_presign", "object_put", "rft_confirm")


def at_step(episode: dict, step: int, tag: str) -> dict:
    record = copy.deepcopy(episode)
    record["id"] = f"{tag}-{record['id']}"
    for member in record["traces"]:
        member["id"] = f"{tag}-{member['id']}"
    record["run"] = {"name": "rl", "work": {"type": "train", "step": step}}
    return record


def batches(episodes: list[dict], prefix: str) -> dict[int, list[dict]]:
    """The loop's episodes by dispatch step, logged a step at a time."""
    out: dict[int, list[dict]] = {}
    for n, step in enumerate(STEPS):
        record = at_step(episodes[n % len(episodes)], step, f"{prefix}{n}")
        out.setdefault(step, []).append(record)
    return out


def loop(run: pr.Run, by_step: dict[int, list[dict]]) -> None:
    for step, records in sorted(by_step.items()):
        run.log_episodes(records)
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
        assert run.flush(30)  # one export per step, as a trainer's loop paces it


def init(**kwargs: object) -> pr.Run:
    return pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=21),
        **kwargs,  # type: ignore[arg-type]
    )


def tables(platform: StandInPlatform, run_id: str) -> dict[int, list[list[dict]]]:
    """Step -> the rows of each confirmed object, in confirm order."""
    out: dict[int, list[list[dict]]] = {}
    for confirmed in platform.training_samples(run_id):
        data = platform.object_bytes(confirmed["s3_key"])
        rows = pq.read_table(io.BytesIO(data)).to_pylist()
        assert {r["step"] for r in rows} == {confirmed["step"]}
        out.setdefault(confirmed["step"], []).append(rows)
    return out


def comparable(by_step: dict[int, list[list[dict]]]) -> dict[int, list[list[dict]]]:
    """The rows without what differs between two runs of the same loop: the run's id, the
    time written, and the episode ids (each run logs episodes of its own)."""
    drop = ("run_id", "created_at", "info", "task")
    return {
        step: [[{k: v for k, v in row.items() if k not in drop} for row in rows] for rows in objs]
        for step, objs in by_step.items()
    }


def unsplit(by_step: dict[int, list[list[dict]]]) -> dict[int, list[dict]]:
    """Each step's rows across its objects, in order, without their sample ids."""
    return {
        step: [{k: v for k, v in row.items() if k != "sample_id"} for rows in objs for row in rows]
        for step, objs in by_step.items()
    }


def row_counts(platform: StandInPlatform, run_id: str) -> dict[int, int]:
    """Step -> rows stored across its objects (a live step may come as more than one)."""
    by_step = tables(platform, run_id)
    return {step: sum(len(rows) for rows in objs) for step, objs in by_step.items()}


def table_requests(platform: StandInPlatform) -> dict[str, int]:
    return {route: len(platform.requests_for(route)) for route in TABLE_ROUTES}


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.01)


def test_an_offline_runs_table_is_the_live_runs_table(prime_env, episodes) -> None:
    live = init()
    loop(live, batches(episodes, "live"))
    live.finish()
    offline = init(mode="offline")
    loop(offline, batches(episodes, "off"))
    offline.finish()
    assert prime_env.training_samples(offline.id) == []

    assert main(["sync"]) == 0

    ((synced_id, stored),) = [(k, v) for k, v in prime_env.training_runs.items() if k != live.id]
    assert stored["status"] == "completed"
    live_tables, synced = tables(prime_env, live.id), tables(prime_env, synced_id)
    assert sorted(synced) == [0, 10, 20] == sorted(live_tables)
    assert {s: len(objs) for s, objs in synced.items()} == {0: 1, 10: 1, 20: 1}
    # The same rows at each step. A live step may come as more than one object (how its
    # episodes reached the sink decides), each numbered in a range of its own; the synced
    # step is one object numbered from 0, as a live step sent whole is.
    assert unsplit(comparable(synced)) == unsplit(comparable(live_tables))
    for rows in (objs[0] for objs in synced.values()):
        assert [row["sample_id"] for row in rows] == list(range(len(rows)))
    assert {r["run_id"] for objs in synced.values() for rows in objs for r in rows} == {synced_id}
    routes = [r.route for r in prime_env.requests]
    last_confirm = max(i for i, r in enumerate(routes) if r == "rft_confirm")
    assert last_confirm < len(routes) - 1 - routes[::-1].index("rft_finalize")
    archive = RunArchive(Path(str(offline.archive_path)))
    assert inspect(archive).pending.get(TRAIN_SAMPLES) == 0

    before = table_requests(prime_env)
    assert main(["sync"]) == 0
    assert main(["sync", offline.id]) == 0  # named: looked at, nothing sent
    assert table_requests(prime_env) == before


CRASHING = r"""
import json, os, sys
import prime_runs as pr
import prime_runs._journal.lease as _lease
import prime_runs._sync.train_samples as table_sync
by_step = {int(k): v for k, v in json.load(open(sys.argv[1])).items()}
run = pr.init(kind="train", model="m", team_id="t", environments=["gsm8k"],
              training=pr.TrainingSpec(max_steps=40))
for step in (0, 10):
    run.log_episodes(by_step[step])
    assert run.flush(30)
print(run.id, run.archive_path, flush=True)
sys.stdin.readline()  # the table's presign is down from here on
for step in (20, 30):
    run.log_episodes(by_step[step])
run.flush(2)
print("crashing", flush=True)
os._exit(1)  # killed: no finish, no close
"""


def test_a_run_partly_delivered_live_gets_only_the_rest(
    prime_env: StandInPlatform, episodes: list[dict], tmp_path: Path
) -> None:
    by_step = {
        step: [at_step(episodes[i], step, f"c{step}-{i}") for i in range(2)]
        for step in (0, 10, 20, 30)
    }
    loop_file = tmp_path / "loop.json"
    loop_file.write_text(json.dumps(by_step))
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING, str(loop_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    run_id, folder = child.stdout.readline().split()
    assert row_counts(prime_env, run_id) == {0: 2, 10: 2}  # live, in one object or more
    prime_env.outage(503, routes=["rft_presign"])
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "crashing"
    assert child.wait(60) == 1
    prime_env.recover()
    assert inspect(RunArchive(Path(folder))).pending[TRAIN_SAMPLES] == 4

    assert main(["sync"]) == 0

    confirmed = prime_env.training_samples(run_id)
    assert Counter(c["step"] for c in confirmed if c["step"] >= 20) == {20: 1, 30: 1}
    assert row_counts(prime_env, run_id) == {0: 2, 10: 2, 20: 2, 30: 2}  # each row once
    synced = tables(prime_env, run_id)
    for step in (20, 30):  # numbered where the live owner (from range 0) never goes
        ids = [r["sample_id"] for r in synced[step][0]]
        assert len(ids) == 2 and min(ids) >= (SAMPLE_ID_RANGES // 2) * SAMPLE_ID_STRIDE
    assert prime_env.training_runs[run_id]["error_message"].startswith("crashed:")
    before = table_requests(prime_env)
    assert main(["sync"]) == 0
    assert table_requests(prime_env) == before


@pytest.mark.parametrize(
    "route, times, after_processing",
    [
        ("rft_confirm", retry.ATTEMPTS, True),  # stored, never answered: in doubt
        ("object_put", 3, False),  # the object never reached the store
    ],
)
def test_an_interrupted_sync_is_completed_by_the_next_without_duplicates(
    prime_env, episodes, fast_retries, route: str, times: int, after_processing: bool
) -> None:
    run = init(mode="offline")
    loop(run, batches(episodes, "int"))
    run.finish()
    prime_env.fail(route, 503, times=times, after_processing=after_processing)

    assert main(["sync"]) == 1  # step 0's object failed: the rest waits, the run stays open

    ((run_id, stored),) = prime_env.training_runs.items()
    assert stored["status"] == "running"
    assert prime_env.training_steps(run_id)  # metrics rows and episodes went
    assert all(c["step"] == 0 for c in prime_env.training_samples(run_id))

    assert main(["sync"]) == 0

    confirmed = prime_env.training_samples(run_id)
    assert Counter(c["step"] for c in confirmed) == {0: 1, 10: 1, 20: 1}
    rows = [r for objs in tables(prime_env, run_id).values() for o in objs for r in o]
    assert len(rows) == 6  # the episodes at steps 0, 10 and 20, once each
    assert prime_env.training_runs[run_id]["status"] == "completed"
    before = table_requests(prime_env)
    assert main(["sync"]) == 0
    assert table_requests(prime_env) == before


NO_PYARROW = r"""
import sys
import time
sys.modules["pyarrow"] = None  # as if the train extra were not installed
sys.modules["pyarrow.parquet"] = None
from prime_runs.cli import main
sys.exit(main(["sync"]))
"""


def test_without_pyarrow_the_table_waits_and_says_how_to_send_it(
    prime_env: StandInPlatform, episodes: list[dict]
) -> None:
    run = init(mode="offline")
    loop(run, batches(episodes, "np"))
    run.finish()

    result = subprocess.run(
        [sys.executable, "-c", NO_PYARROW], capture_output=True, text=True, timeout=120
    )

    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "sample table was not sent: pyarrow is not installed" in out
    assert "pip install 'prime-runs[train]'" in out
    assert table_requests(prime_env) == dict.fromkeys(TABLE_ROUTES, 0)
    ((run_id, stored),) = prime_env.training_runs.items()
    assert sorted(prime_env.training_steps(run_id)) == [0, 5, 10, 20]  # the rest went
    assert f"np0-{episodes[0]['id']}" in prime_env.episodes
    assert stored["status"] == "running"  # left open for its table, as after any failure
    info = inspect(RunArchive(Path(str(run.archive_path))))
    assert info.pending[TRAIN_SAMPLES] == 6  # the off-cadence episode settled: no row

    assert main(["sync"]) == 0  # pyarrow here: the table goes, then the run is closed

    assert Counter(c["step"] for c in prime_env.training_samples(run_id)) == {0: 1, 10: 1, 20: 1}
    assert prime_env.training_runs[run_id]["status"] == "completed"


def test_episodes_a_live_process_holds_are_left_to_it(
    prime_env: StandInPlatform, episodes: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = init(mode="offline")
    loop(run, batches(episodes, "lease"))
    run.finish()
    folder = Path(str(run.archive_path))
    (segment,) = [p.name for p in (folder / "records").glob("episode-*.jsonl")]
    monkeypatch.setattr(_lease, "SYNC_WAIT", 0.2)
    _lease.hold(folder, segment)  # as the process writing it would, until its journal closes
    try:
        assert main(["sync"]) == 1
    finally:
        _lease.release(folder, [segment])
    assert table_requests(prime_env) == dict.fromkeys(TABLE_ROUTES, 0)
    assert inspect(RunArchive(folder)).pending[TRAIN_SAMPLES] == 7  # none settled meanwhile

    assert main(["sync"]) == 0

    ((run_id, _),) = prime_env.training_runs.items()
    assert Counter(c["step"] for c in prime_env.training_samples(run_id)) == {0: 1, 10: 1, 20: 1}


def test_an_object_recorded_in_flight_that_never_landed_is_sent_anew(
    prime_env: StandInPlatform, episodes: list[dict], fast_retries: None
) -> None:
    run = init(mode="offline")
    loop(run, batches(episodes, "gone"))
    run.finish()
    archive = RunArchive(Path(str(run.archive_path)))
    first = next(key for key, kind, _ in archive.iter_records() if kind == "episode")
    prime_env.outage(503, routes=["rft_presign"])
    assert main(["sync"]) == 1  # registered, rows and traces sent; no object yet
    prime_env.recover()
    ((run_id, _),) = prime_env.training_runs.items()
    state = archive.sync_state()  # as if an earlier sync had uploaded an object for it
    state["train_samples"] = {"run_id": run_id, "ranges": {"0": 1}}
    archive.write_sync_state(state)
    note = {"n": 1, "until": 0, "segs": [first.segment], "keys": [[0, first.offset]]}
    notes = archive.path / "batches"
    notes.mkdir(exist_ok=True)
    (notes / "train_samples-1-abcdef.json").write_text(
        json.dumps(
            {"sink": "train_samples", "pid": 1, "batches": [dict(note, step=0, s3_key="rft/x")]}
        )
    )

    assert main(["sync"]) == 0  # its confirm is refused (no such object): sent anew

    assert not list(notes.iterdir())  # settled: nothing of it to confirm again
    assert Counter(c["step"] for c in prime_env.training_samples(run_id)) == {0: 1, 10: 1, 20: 1}
    step0 = tables(prime_env, run_id)[0][0]  # numbered after the range recorded as used
    assert min(r["sample_id"] for r in step0) == SAMPLE_ID_STRIDE


def test_a_step_beyond_one_delivery_becomes_several_objects(
    prime_env: StandInPlatform, episodes: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_sync, "CHUNK_RECORDS", 2)  # as a live delivery's bound cuts
    run = init(mode="offline")
    loop(run, batches(episodes, "big"))
    run.finish()

    assert main(["sync"]) == 0

    ((run_id, _),) = prime_env.training_runs.items()
    step20 = tables(prime_env, run_id)[20]
    assert [len(rows) for rows in step20] == [2, 1]
    ids = [r["sample_id"] for rows in step20 for r in rows]
    assert ids == [0, 1, SAMPLE_ID_STRIDE]  # each object numbers in a range of its own


def test_a_sync_killed_before_its_confirm_answered_confirms_that_object_next_time(
    prime_env: StandInPlatform, episodes: list[dict]
) -> None:
    run = init(mode="offline")
    loop(run, batches(episodes, "kill"))
    run.finish()
    archive = RunArchive(Path(str(run.archive_path)))
    prime_env.stall("rft_confirm", 30)
    child = subprocess.Popen(
        [sys.executable, "-m", "prime_runs.cli", "sync"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(archive.path.glob("batches/train_samples-*.json")):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.2)  # the confirm is on its way, held by the stand-in
    finally:
        child.kill()
        child.wait(30)
    prime_env.unstall()  # the dead sync's confirm may land now, or not: either way once

    assert main(["sync"]) == 0

    ((run_id, _),) = prime_env.training_runs.items()
    assert Counter(c["step"] for c in prime_env.training_samples(run_id)) == {0: 1, 10: 1, 20: 1}
    puts = [r for r in prime_env.requests_for("object_put") if r.status == 200]
    assert len(puts) == 3  # step 0's object was uploaded once, and confirmed again


LIVE_CRASH = r"""
import json, sys
import prime_runs as pr

run = pr.init(kind="train", model="Qwen/Qwen3-4B", environments=["gsm8k"], team_id="team-1",
              training=pr.TrainingSpec(max_steps=21))
print(run.id, flush=True)
run.log_episodes(json.load(open(sys.argv[1])))
run.flush(120)  # the confirm's answer is held: killed before it comes
"""


def test_a_live_run_killed_before_its_confirm_answered_is_not_sent_twice_by_sync(
    prime_env: StandInPlatform, episodes: list[dict], tmp_path: Path
) -> None:
    # The platform stored the object and confirmed it, but the producer died before it
    # heard so (and before its acknowledgement was journaled). It had noted the object as
    # in flight: sync confirms that object again instead of sending its rows a second time.
    step0 = tmp_path / "step0.json"
    step0.write_text(json.dumps([at_step(episodes[i], 0, f"live{i}") for i in range(2)]))
    prime_env.fail("rft_confirm", 503, after_processing=True, delay=60)
    child = subprocess.Popen(
        [sys.executable, "-c", LIVE_CRASH, str(step0)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        run_id = child.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not prime_env.training_samples(run_id):  # confirmed, its answer held
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait(30)
    prime_env.recover()  # the held answer is dropped with its connection

    assert main(["sync"]) == 0

    assert row_counts(prime_env, run_id) == {0: 2}  # each row once
    puts = [r for r in prime_env.requests_for("object_put") if r.status == 200]
    assert len(puts) == len(prime_env.training_samples(run_id))  # none sent again by sync
    before = table_requests(prime_env)
    assert main(["sync"]) == 0
    assert table_requests(prime_env) == before


def test_a_live_run_killed_with_its_object_upload_held_is_not_sent_twice_by_sync(
    prime_env: StandInPlatform, episodes: list[dict], tmp_path: Path
) -> None:
    # The PUT is held (then stored) while the producer is killed and sync runs: sync sends
    # an object of its own; the held one lands unconfirmed, so it holds no row of the table.
    step0 = tmp_path / "step0.json"
    step0.write_text(json.dumps([at_step(episodes[i], 0, f"put{i}") for i in range(2)]))
    prime_env.hold("object_put", 4.0)
    child = subprocess.Popen(
        [sys.executable, "-c", LIVE_CRASH, str(step0)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        run_id = child.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not prime_env.requests_for("object_put"):  # on its way, held
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        child.kill()
        child.wait(30)

    assert main(["sync"]) == 0
    deadline = time.monotonic() + 60
    while prime_env.requests_for("object_put")[0].status is None:  # the held PUT lands
        assert time.monotonic() < deadline
        time.sleep(0.02)

    assert row_counts(prime_env, run_id) == {0: 2}  # each row once
    assert len(prime_env.training_samples(run_id)) == 1

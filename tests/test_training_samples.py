"""The training sample table: Parquet objects per dispatch step through presign, PUT and
confirm, against the stand-in's loopback object store (read back with pyarrow)."""

from __future__ import annotations

import copy
import io
import time

import pyarrow.parquet as pq
import pytest

import prime_runs as pr
from _support import items
from prime_runs.exporters import train_samples
from prime_runs.platform import retry
from prime_runs.platform.training import TrainingClient, TrainingPlatform
from prime_runs.settings import Settings


def at_step(episode: dict, step: int, n: int) -> dict:
    record = copy.deepcopy(episode)
    record["id"] = f"s{step}-{n}-{record['id']}"
    for member in record["traces"]:
        member["id"] = f"s{step}-{n}-{member['id']}"
    record["run"] = {"name": "rl", "work": {"type": "train", "step": step}}
    return record


def train():
    return pr.init(
        kind="train",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=20),
    )


def read(platform, key: str):
    return pq.read_table(io.BytesIO(platform.object_bytes(key))).to_pylist()


def test_objects_per_dispatch_step_on_the_cadence(prime_env, episodes):
    run = train()
    run.log_episodes([at_step(episodes[0], 0, 0), at_step(episodes[1], 0, 1)])
    run.log_episodes([at_step(episodes[2], 10, 0), at_step(episodes[3], 5, 0)])
    assert run.flush(30)
    run.log_episodes([at_step(episodes[4], 10, 1)])  # an off-policy episode, a later batch
    run.log_metrics({"loss": 0.1}, step=11)
    run.finish()
    confirmed = prime_env.training_samples(run.id)
    steps = [c["step"] for c in confirmed]
    # Step 10's episodes came in two batches (a flush between): two objects at least. A
    # batch may itself reach the sink in more than one export: rows are counted below.
    assert set(steps) == {0, 10} and steps.count(10) >= 2 and steps == sorted(steps)
    rows_by_step: dict[int, list[dict]] = {}
    for c in confirmed:
        rows = read(prime_env, c["s3_key"])
        assert {r["step"] for r in rows} == {c["step"]} and {r["run_id"] for r in rows} == {run.id}
        rows_by_step.setdefault(c["step"], []).extend(rows)
    assert len(rows_by_step[0]) == 2 and len(rows_by_step[10]) == 2  # step 5 is off-cadence
    ids = [r["sample_id"] for r in rows_by_step[10]]
    assert len(set(ids)) == 2 and max(ids) >= train_samples.SAMPLE_ID_STRIDE  # own ranges
    first = rows_by_step[0][0]
    assert first["env_name"] == episodes[0]["env"]["id"] and first["trajectory"].startswith("[")
    routes = [r.route for r in prime_env.requests]
    assert max(i for i, r in enumerate(routes) if r == "rft_confirm") < routes.index("rft_finalize")
    assert run.acknowledged_records["train_samples"] == 4
    assert run.failed_records == {} and run.errors == []
    # Every episode still reaches Prime Traces, with its dispatch step unchanged.
    assert prime_env.episodes[f"s5-0-{episodes[3]['id']}"]["run"]["work"]["step"] == 5


def test_a_lost_confirm_is_resent_without_a_second_object(prime_env, episodes, monkeypatch):
    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.01)
    run = train()
    prime_env.fail("rft_confirm", 503, times=5)  # every attempt of one request
    run.log_episodes([at_step(episodes[0], 10, 0)])
    run.finish(timeout=60)
    (confirmed,) = prime_env.training_samples(run.id)
    puts = [r for r in prime_env.requests_for("object_put") if r.status == 200]
    assert len(puts) == 1  # the same object, confirmed on the resend
    assert len(prime_env.requests_for("rft_presign")) == 1
    assert len(read(prime_env, confirmed["s3_key"])) == 1


def test_eval_work_and_bare_traces_have_no_row(prime_env, episodes, traces_records):
    run = train()
    eval_work = copy.deepcopy(episodes[0])  # run.work absent: not training work
    run.log_episodes([eval_work])
    run.log_traces(traces_records[:2])
    run.finish()
    assert prime_env.training_samples(run.id) == []
    assert prime_env.requests_for("rft_presign") == []
    assert run.failed_records == {}


def test_samples_false_turns_the_table_off(prime_env, episodes):
    run = pr.init(kind="train", model="m", team_id="t", environments=["gsm8k"], samples=False)
    run.log_episodes([at_step(episodes[0], 0, 0)])
    run.finish()
    assert prime_env.requests_for("rft_presign") == []
    assert f"s0-0-{episodes[0]['id']}" in prime_env.episodes


@pytest.mark.parametrize("step", [0, 10, 20])
def test_dispatch_step_reads_train_work_only(step):
    assert train_samples.dispatch_step({"run": {"work": {"type": "train", "step": step}}}) == step
    assert train_samples.dispatch_step({"run": {"work": {"type": "eval", "step": step}}}) is None
    assert train_samples.dispatch_step({"run": {"work": {"type": "train", "step": "1"}}}) is None


def test_a_confirm_in_doubt_is_settled_alone_before_later_episodes_of_its_step(
    prime_platform, episodes
):
    # The confirm is stored, but no attempt of its request is answered: the channel hands
    # the object's episodes back with the next ones of the same step (``Channel.deliver``
    # sends what it kept first, then the new). Those must become an object of their own,
    # not one that holds the first episodes' rows again.
    settings = Settings.resolve(api_key=prime_platform.api_key, base_url=prime_platform.base_url)
    platform = TrainingPlatform(settings, TrainingClient(settings, max_attempts=1))
    run_id = prime_platform.add_training_run("rft-doubt")
    sink = train_samples.TrainSamplesSink(platform, run_id)
    first = items([at_step(episodes[0], 10, 0)], run_id)
    later = items([at_step(episodes[1], 10, 1)], run_id)
    prime_platform.fail("rft_confirm", 503, after_processing=True)
    assert sink.export(first, time.monotonic() + 30).retry == first

    out = sink.export(first + later, time.monotonic() + 30)

    assert out.acked == first + later
    rows = [
        r
        for c in prime_platform.training_samples(run_id)
        for r in read(prime_platform, c["s3_key"])
    ]
    assert len(rows) == 2  # each episode's row once
    assert len(prime_platform.requests_for("object_put")) == 2  # its object, then the later's


@pytest.mark.parametrize("held", ["rft_presign", "object_put"])
def test_no_request_of_an_object_starts_after_its_deadline(prime_platform, episodes, held):
    # A step answered after the export's deadline (finish() giving up, a flush's timeout):
    # the next request (the PUT, the confirm) waits for the next delivery, which goes on
    # from that step: one presign, one object, one row.
    settings = Settings.resolve(api_key=prime_platform.api_key, base_url=prime_platform.base_url)
    platform = TrainingPlatform(settings, TrainingClient(settings, max_attempts=1))
    run_id = prime_platform.add_training_run("rft-late")
    sink = train_samples.TrainSamplesSink(platform, run_id)
    first = items([at_step(episodes[0], 10, 0)], run_id)
    prime_platform.stall(held, 0.5)  # answered within its attempt, after the deadline

    out = sink.export(first, time.monotonic() + 0.2)

    assert out.retry == first and not out.acked
    after = {"rft_presign": "object_put", "object_put": "rft_confirm"}[held]
    assert prime_platform.requests_for(after) == []
    prime_platform.unstall()
    assert sink.export(first, time.monotonic() + 30).acked == first
    assert len(prime_platform.requests_for("rft_presign")) == 1
    assert len(prime_platform.requests_for("object_put")) == 1
    (confirmed,) = prime_platform.training_samples(run_id)
    assert len(read(prime_platform, confirmed["s3_key"])) == 1

"""The async face (issue 32): ``await pr.ainit()``, ``async with``, ``await run.aflush()`` and
``await run.afinish()`` (and ``async with pr.join(carrier)``) never block the event loop, and
keep the sync calls' guarantees: statuses, return values, errors, timeouts, idempotence.

The loop's largest gap is measured by a ticker task in a producer process of its own (the
stand-in serves from this one: its JSON decoding would otherwise hold the producer's GIL),
with 200 tasks logging, on a healthy and on a stalled stand-in. ``run.finish()`` called on
the loop blocked it for the whole finish (here 1.2 s healthy, 10 s stalled); the bound
below is about seven times the largest gap measured through the async face (6 to 35 ms).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
from _otel import archive_of
from _support import load_jsonl, start_script
from prime_runs.testing import StandInPlatform

CLOSE_MARGIN = 0.5  # finish(timeout=T) returns within T plus half a second (its docstring)
GAP_BOUND = 0.5  # seconds the loop may go without ticking (a blocking finish(): over 1 s)
FIXTURES = Path(__file__).parent / "data" / "episodes.jsonl"

PRODUCER = r"""
import asyncio, copy, json, sys, time
import prime_runs as pr

fixtures = [json.loads(line) for line in open(sys.argv[1])]
timeout = float(sys.argv[2]) if sys.argv[2] != "none" else None


def record(task, i):
    episode = copy.deepcopy(fixtures[i % len(fixtures)])
    episode["id"] = f"t{task}-{i}-{episode['id']}"
    for member in episode.get("traces", []):
        member["id"] = f"t{task}-{i}-{member['id']}"
    return episode


async def main():
    run = pr.init(name="loop-gap", environments=["gsm8k"])
    print("ready", flush=True)
    sys.stdin.readline()  # the test stalls the stand-in (or not) meanwhile
    gaps, done = [], asyncio.Event()

    async def ticker():
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def producer(task):
        for i in range(5):
            run.log_episodes(record(task, i))  # synchronous: it never waits on the network
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.gather(*(producer(task) for task in range(200)))
    gaps.clear()
    started = time.monotonic()
    await run.afinish(timeout=timeout)
    took = time.monotonic() - started
    done.set()
    await ticking
    print(json.dumps({"took": took, "gap": max(gaps), "status": run.status.value,
                      "logged": run.logged_records, "acked": run.acknowledged_records}))


asyncio.run(main())
"""


def _measure(tmp_path: Path, platform: StandInPlatform, *, stall: bool, timeout: str) -> Any:
    proc = start_script(tmp_path, PRODUCER, str(FIXTURES), timeout)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr
        if stall:
            platform.stall(None, 120)  # every request, until unstall()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
    finally:
        platform.unstall()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_afinish_leaves_the_loop_free_on_a_healthy_platform(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    result = _measure(tmp_path, prime_env, stall=False, timeout="none")
    assert result["gap"] < GAP_BOUND, result
    assert result["status"] == "completed"
    assert result["logged"] == 1000
    assert result["acked"] == {"traces": 1000, "eval_samples": 1000}
    (evaluation,) = prime_env.evaluations.values()
    assert evaluation["finalize_count"] == 1


def test_afinish_leaves_the_loop_free_on_a_stalled_platform(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    result = _measure(tmp_path, prime_env, stall=True, timeout="4")
    # The same timeout as finish(): seconds of waiting on the stalled uploads (at least the
    # two thirds of it kept for sending), bounded, while the loop kept ticking.
    assert 2.5 <= result["took"] < 4 + CLOSE_MARGIN + 2, result
    assert result["gap"] < GAP_BOUND, result
    assert result["status"] == "completed"
    assert result["logged"] == 1000


def test_async_with_ends_the_run_as_with_does(prime_env: StandInPlatform) -> None:
    episodes = load_jsonl("episodes.jsonl")
    runs: dict[str, pr.Run] = {}

    async def completes() -> None:
        async with pr.ainit(name="completes", environments=["gsm8k"]) as run:
            runs["completed"] = run
            assert pr.current_run() is run  # the block's context is the run's
            pr.log_episodes(episodes[:2])

    async def fails() -> None:
        async with pr.ainit(name="fails", environments=["gsm8k"]) as run:
            runs["failed"] = run
            raise RuntimeError("boom")

    async def is_cancelled() -> None:
        entered = asyncio.Event()

        async def block() -> None:
            async with pr.ainit(name="cancelled", environments=["gsm8k"]) as run:
                runs["cancelled"] = run
                entered.set()
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(block())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def interrupted() -> None:
        async with pr.init(name="interrupted", environments=["gsm8k"]) as run:  # sync init
            runs["interrupted"] = run
            raise KeyboardInterrupt

    asyncio.run(completes())
    with pytest.raises(RuntimeError, match="boom"):  # the block's own exception, unchanged
        asyncio.run(fails())
    asyncio.run(is_cancelled())
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(interrupted())

    statuses = {key: run.status for key, run in runs.items()}
    assert statuses == {
        "completed": pr.RunStatus.COMPLETED,
        "failed": pr.RunStatus.FAILED,
        "cancelled": pr.RunStatus.CANCELLED,
        "interrupted": pr.RunStatus.CANCELLED,
    }
    stored = {key: prime_env.evaluations[run.id] for key, run in runs.items()}
    assert stored["completed"]["finalize_count"] == 1
    assert len(prime_env.samples(runs["completed"].id)) == 2
    assert stored["failed"]["status"] == "FAILED"
    assert stored["failed"]["error_message"] == "RuntimeError: boom"
    assert stored["cancelled"]["status"] == stored["interrupted"]["status"] == "CANCELLED"
    assert all(run.finished for run in runs.values())


def test_aflush_and_afinish_return_and_raise_what_the_sync_calls_do(
    prime_env: StandInPlatform,
) -> None:
    episodes = load_jsonl("episodes.jsonl")
    prime_env.reject_trace_ids([episodes[1]["id"]])  # Prime Traces refuses that one

    async def main() -> tuple[pr.Run, list[Any]]:
        run = await pr.ainit(name="values", environments=["gsm8k"])
        run.log_episodes(episodes[:1])
        seen: list[Any] = [await run.aflush(timeout=30)]
        run.log_episodes(episodes[1:2])
        seen.append(await run.aflush(timeout=30))  # a sink refused a record: False
        with pytest.raises(pr.ConfigurationError, match="timeout"):
            await run.aflush(timeout=float("nan"))
        with pytest.raises(ValueError, match="terminal"):
            await run.afinish(status="running")
        assert not run.finished  # a mistake in the call leaves the run open
        seen.append(await run.afinish(status="failed", error="first"))
        seen.append(await run.afinish())  # idempotent: the first call's status wins
        run.finish(status="cancelled")  # and the sync call agrees
        return run, seen

    run, seen = asyncio.run(main())
    assert seen == [True, False, None, None]
    assert run.status is pr.RunStatus.FAILED
    evaluation = prime_env.evaluations[run.id]
    assert (evaluation["status"], evaluation["error_message"]) == ("FAILED", "first")
    assert run.failed_records == {"traces": 1}


def test_ainit_runs_init_off_the_loop_during_a_slow_create(prime_env: StandInPlatform) -> None:
    prime_env.stall("eval_create", 60)  # until unstall()

    async def main() -> tuple[pr.Run, float, float, str]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticking = asyncio.create_task(ticker())
        started = time.monotonic()
        run = await pr.ainit(name="slow-create", environments=["gsm8k"], register_timeout=2)
        took = time.monotonic() - started
        done.set()
        await ticking
        local_id = run.id
        prime_env.unstall()
        assert await run.aflush(timeout=30)  # once the platform answers
        await run.afinish()
        return run, took, max(gaps), local_id

    try:
        run, took, gap, local_id = asyncio.run(main())
    finally:
        prime_env.unstall()
    assert 2 <= took < 2 + 3, took  # the bound held, off the loop
    assert gap < GAP_BOUND, gap
    assert local_id.startswith("run-") and run.id in prime_env.evaluations
    assert prime_env.evaluations[run.id]["finalize_count"] == 1


JOINER = r"""
import asyncio, json, sys, time
import prime_runs as pr

carrier = json.loads(sys.argv[1])


async def main():
    gaps, done = [], asyncio.Event()

    async def ticker():
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def task(n):
        async with pr.join(carrier) as run:
            assert pr.current_run().id == run.id  # the block is in the run's context
            for i in range(5):
                run.log_episodes({"id": f"ep-{n}-{i}", "env": {"id": "gsm8k"},
                                  "traces": [{"id": f"tr-{n}-{i}", "timing": {"start": 1.0}}]})
                await asyncio.sleep(0)
        return run

    started = time.monotonic()
    held = pr.join(carrier)  # the first join loads the SDK (the imports are the gap): held open
    first = time.monotonic() - started
    ticking = asyncio.create_task(ticker())
    runs = await asyncio.gather(*(task(n) for n in range(20)))
    await held.afinish()
    done.set()
    await ticking
    print(json.dumps({"gap": max(gaps), "first": first, "finished": all(r.finished for r in runs),
                      "acked": sum(r.acknowledged_records.get("traces", 0) for r in runs)}))


asyncio.run(main())
"""


def test_async_with_join_drains_off_the_loop_and_the_owner_closes_the_run(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    owner = pr.init(name="owner", environments=["gsm8k"])
    proc = start_script(tmp_path, JOINER, json.dumps(owner.context()))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["finished"] and result["gap"] < GAP_BOUND, result
    assert result["acked"] >= 100  # each handle of the shared join counts the join's
    assert owner.status is pr.RunStatus.RUNNING  # a join never closes the run
    owner.finish()
    assert len(prime_env.episode_writes) == 100
    assert prime_env.evaluations[owner.id]["finalize_count"] == 1


def test_a_task_cancelled_during_ainit_leaves_no_open_run(prime_env: StandInPlatform) -> None:
    prime_env.stall("eval_create", 60)  # until unstall()

    async def main() -> None:
        task = asyncio.create_task(pr.ainit(name="abandoned", environments=["gsm8k"]))
        until = time.monotonic() + 20
        while not prime_env.requests_for("env_resolve") and time.monotonic() < until:
            await asyncio.sleep(0.01)  # init() is under way on its thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    finally:
        prime_env.unstall()  # init() gets its evaluation now, and nobody awaits the run
    # status.json is written after the platform confirms the close-out: wait for both.
    until = time.monotonic() + 30
    while time.monotonic() < until:
        stored = list(prime_env.evaluations.items())
        if stored and stored[0][1].get("status") == "CANCELLED":
            if archive_of(stored[0][0]).status().get("status") == "cancelled":
                break
        time.sleep(0.05)
    (evaluation,) = prime_env.evaluations.values()
    assert (evaluation["status"], evaluation["error_message"]) == ("CANCELLED", "interrupted")
    (eval_id,) = prime_env.evaluations
    assert archive_of(eval_id).status()["status"] == "cancelled"  # not left to crash at exit

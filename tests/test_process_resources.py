"""What a run or a join takes (threads, open files, sockets) is the process's, not the run's:
a hundred runs or joins in one process, each ended as the docs say, leave threads and
descriptors where one left them (issue 20)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from prime_runs import semconv
from prime_runs._runs.state import RunState

ROUNDS = 100
SLACK = 4  # a pooled connection or a worker finishing its last batch


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settled() -> tuple[int, int]:
    gc.collect()
    return threading.active_count(), _fds()


def _assert_a_hundred_cost_what_one_did(once: Callable[[int], None]) -> None:
    once(-1)  # the process's delivery threads start with the first run or join
    threads, fds = _settled()
    for i in range(ROUNDS):
        once(i)
    # A short-lived helper (a close-out thread returning, a connection closing) may still
    # be ending on a loaded machine: give the last rounds' a bounded moment.
    deadline = time.monotonic() + 10
    after_threads, after_fds = _settled()
    while (after_threads > threads + SLACK or after_fds > fds + SLACK) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
        after_threads, after_fds = _settled()
    names = sorted(t.name for t in threading.enumerate())
    assert after_threads <= threads + SLACK, (threads, after_threads, names)
    assert after_fds <= fds + SLACK, (fds, after_fds)


def test_a_hundred_joins_of_one_run_take_no_more_threads_or_files_than_one(prime_env, episodes):
    owner = pr.init(name="joined", environments=["gsm8k"], model="m", framework="f")
    carrier = owner.context()

    def join_once(i: int) -> None:
        worker = pr.init(join=carrier)
        worker.log_episodes({**episodes[0], "id": f"j{i}"})
        worker.finish()

    _assert_a_hundred_cost_what_one_did(join_once)
    owner.finish()
    assert len(prime_env.episodes) == ROUNDS + 1


def test_a_hundred_runs_in_one_process_take_no_more_threads_or_files_than_one(prime_env, episodes):
    def run_once(i: int) -> None:
        run = pr.init(name=f"r{i}", environments=["gsm8k"], model="m", framework="f")
        run.log_episodes({**episodes[0], "id": f"r{i}"})
        run.finish()

    _assert_a_hundred_cost_what_one_did(run_once)
    assert len(prime_env.evaluations) == ROUNDS + 1


def test_a_hundred_offline_runs_close_their_journals(episodes):
    def run_once(i: int) -> None:
        run = pr.init(name=f"o{i}", environments=["gsm8k"], mode="offline")
        run.log_episodes({**episodes[0], "id": f"o{i}"})
        run.finish()

    _assert_a_hundred_cost_what_one_did(run_once)


def test_a_hundred_flushed_joins_as_the_ray_recipe_does_share_one_join(prime_env, episodes):
    owner = pr.init(name="ray-like", environments=["gsm8k"], model="m", framework="f")
    carrier = owner.context()
    workers: list[pr.Run] = []

    def task(i: int) -> None:  # docs/distributed.md: join, log, flush; no finish
        worker = pr.init(join=carrier)
        worker.log_episodes({**episodes[0], "id": f"t{i}"})
        assert worker.flush(timeout=60)
        workers.append(worker)

    _assert_a_hundred_cost_what_one_did(task)
    owner.finish()
    assert len(prime_env.episodes) == ROUNDS + 1
    # The worker process's exit would release the join; here the process is the suite's,
    # so its handles are finished while the stand-in still answers.
    for worker in workers:
        worker.finish()
    assert all(worker.finished for worker in workers)


def test_finishing_one_handle_of_a_shared_join_leaves_the_others_logging(prime_env, episodes):
    owner = pr.init(name="threaded-actor", environments=["gsm8k"], model="m", framework="f")
    first = pr.init(join=owner.context())
    second = pr.init(join=owner.context())  # another task of the same worker, meanwhile
    first.log_episodes({**episodes[0], "id": "a"})

    first.finish()

    assert first.finished and not second.finished
    second.log_episodes({**episodes[1], "id": "b"})  # not refused as logged after finish
    second.finish()
    assert second.finished and second.dropped_records == 0
    owner.finish()
    assert {"a", "b"} <= set(prime_env.episodes)


def test_a_raw_run_spans_handle_is_given_back_once_the_span_ended(episodes):
    """``current_run()`` inside a raw run span gives a handle on the run's engine, which
    holds it in turn: once the span ended and the run closed, neither is kept alive."""
    provider = TracerProvider()
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("app")
    handles = []
    for i in range(5):
        span = tracer.start_span(
            "run", attributes={semconv.RUN_NAME: f"raw{i}", semconv.RUN_ENVIRONMENTS: ["gsm8k"]}
        )
        with trace.use_span(span):
            run = pr.current_run()
            assert run is not None
            run.log_episodes({**episodes[0], "id": f"raw{i}"})
            handles.append(weakref.ref(run))
        span.end()
    del run
    assert provider.force_flush(30_000)
    provider.shutdown()  # waits for the runs' close-outs
    deadline = time.monotonic() + 10
    gc.collect()
    while any(ref() is not None for ref in handles) and time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()
    kept = [ref() for ref in handles if ref() is not None]
    assert kept == [], f"ended raw runs still alive: {kept}"


def _engines() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, RunState))


def test_a_worker_joining_a_hundred_runs_keeps_no_ended_join(episodes):
    """A long-lived worker joins run after run (each through ``pr.join``, ended as the docs
    say): what it holds for ended joins does not grow with how many it made."""

    def join_a_run(i: int) -> None:
        owner = pr.init(name=f"owner{i}", environments=["gsm8k"], mode="offline")
        with pr.join(owner.context()) as worker:
            worker.log_episodes({**episodes[0], "id": f"w{i}"})
        owner.finish()

    join_a_run(-1)
    before = _engines()
    for i in range(ROUNDS):
        join_a_run(i)
    assert _engines() <= before + 2  # the last run's join and owner, at most


# The runs' owner, another process: opens RUNS runs, prints their carriers, and finishes
# them when told (a line on stdin).
_OWNERS = """
import json, sys
import prime_runs as pr
runs = [pr.init(name=f"served{i}", environments=["gsm8k"], model="m", framework="f")
        for i in range(int(sys.argv[1]))]
print(json.dumps([run.context() for run in runs]), flush=True)
sys.stdin.readline()
for run in runs:
    run.finish()
"""


def test_a_service_serving_many_runs_spans_holds_no_more_for_more_runs(prime_env, episodes):
    """A service whose spans arrive under other processes' runs (a remote parent whose
    baggage names the run) joins each run while its spans are open, keeping a few idle
    joins for their runs' next requests: serving twenty more runs leaves files and engines
    where the first twenty left them, and shutdown delivers every record."""
    runs = 40
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNERS, str(runs)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdin is not None
        carriers = json.loads(owner.stdout.readline())
        provider = TracerProvider()
        pr.configure_exporter(provider)
        tracer = provider.get_tracer("service")

        def serve(i: int, request: int) -> None:  # one request a run's worker sent
            with tracer.start_as_current_span("handle", context=propagate.extract(carriers[i])):
                record = {**episodes[0], "id": f"served{i}-{request}"}
                tracer.start_span("episode", attributes={semconv.RECORD: json.dumps(record)}).end()

        for i in range(runs // 2):
            serve(i, 0)
        assert provider.force_flush(30_000)
        fds, engines = _fds(), _engines()
        for i in range(runs // 2, runs):
            for request in (0, 1):
                serve(i, request)
        assert provider.force_flush(30_000)  # waits for the joins ended meanwhile
        assert _fds() <= fds + SLACK
        assert _engines() <= engines
        provider.shutdown()  # ends the joins still open, once their records are sent
        owner.stdin.write("finish\n")
        owner.stdin.flush()
        assert owner.wait(timeout=120) == 0
    finally:
        owner.kill()
    wanted = {f"served{i}-0" for i in range(runs)} | {f"served{i}-1" for i in range(20, runs)}
    assert wanted <= set(prime_env.episodes)

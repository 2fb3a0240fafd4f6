"""What a run or a join takes (threads, open files, sockets) is the process's, not the run's:
a hundred runs or joins in one process, each ended as the docs say, leave threads and
descriptors where one left them (issue 20)."""

from __future__ import annotations

import gc
import os
import threading

import prime_runs as pr

ROUNDS = 100
SLACK = 4  # a pooled connection or a worker finishing its last batch


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settled() -> tuple[int, int]:
    gc.collect()
    return threading.active_count(), _fds()


def test_a_hundred_joins_of_one_run_take_no_more_threads_or_files_than_one(prime_env, episodes):
    owner = pr.init(name="joined", environments=["gsm8k"], model="m", framework="f")
    carrier = owner.context()

    def join_once(i: int) -> None:
        worker = pr.init(join=carrier)
        worker.log_episodes({**episodes[0], "id": f"j{i}"})
        worker.finish()

    join_once(-1)  # the process's delivery threads start with the first join
    threads, fds = _settled()
    for i in range(ROUNDS):
        join_once(i)
    after_threads, after_fds = _settled()

    assert after_threads <= threads + SLACK, (threads, after_threads)
    assert after_fds <= fds + SLACK, (fds, after_fds)
    owner.finish()
    assert len(prime_env.episodes) == ROUNDS + 1


def test_a_hundred_runs_in_one_process_take_no_more_threads_or_files_than_one(prime_env, episodes):
    def run_once(i: int) -> None:
        run = pr.init(name=f"r{i}", environments=["gsm8k"], model="m", framework="f")
        run.log_episodes({**episodes[0], "id": f"r{i}"})
        run.finish()

    run_once(-1)
    threads, fds = _settled()
    for i in range(ROUNDS):
        run_once(i)
    after_threads, after_fds = _settled()

    assert after_threads <= threads + SLACK, (threads, after_threads)
    assert after_fds <= fds + SLACK, (fds, after_fds)
    assert len(prime_env.evaluations) == ROUNDS + 1


def test_a_hundred_offline_runs_close_their_journals(episodes):
    def run_once(i: int) -> None:
        run = pr.init(name=f"o{i}", environments=["gsm8k"], mode="offline")
        run.log_episodes({**episodes[0], "id": f"o{i}"})
        run.finish()

    run_once(-1)
    threads, fds = _settled()
    for i in range(ROUNDS):
        run_once(i)
    after_threads, after_fds = _settled()

    assert after_threads <= threads + SLACK, (threads, after_threads)
    assert after_fds <= fds + SLACK, (fds, after_fds)

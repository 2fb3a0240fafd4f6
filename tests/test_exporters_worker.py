"""SinkWorker with a scripted sink: bounded queue, retries, retirement, deadlines, late
outcomes; and the Deadline a sink sleeps on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from prime_runs import _worker
from prime_runs._worker import SinkWorker
from prime_runs.exporters._base import Deadline, Item, Outcome


def _item(n: int, kind: str = "episode") -> Item:
    return Item(kind, b'{"id":"r%d"}' % n, None, None, f"r{n}")


class ScriptedSink:
    """Answers each export with the next scripted verdict ("ok", "retry", "retire",
    "quiet", "reject", or a callable); "ok" once the script runs out."""

    name = "fake"

    def __init__(self, *script: str | Callable[[list[Item], Deadline], Outcome]) -> None:
        self.script = list(script)
        self.batches: list[list[Item]] = []
        self.closed = 0
        self.gate: threading.Event | None = None  # holds every export until set

    def export(self, items: list[Item], deadline: Deadline) -> Outcome:  # type: ignore[override]
        self.batches.append(list(items))
        if self.gate is not None:
            self.gate.wait(30)
        verdict = self.script.pop(0) if self.script else "ok"
        if callable(verdict):
            return verdict(items, deadline)
        if verdict == "ok":
            return Outcome(acked=list(items))
        if verdict == "retry":
            return Outcome(retry=list(items), retry_reason="503", retry_after=0)
        if verdict == "reject":
            return Outcome(rejected=[(i, "bad") for i in items])
        return Outcome(retry=list(items), retire="HTTP 403", quiet=verdict == "quiet")

    def close(self) -> None:
        self.closed += 1

    def after_fork(self) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.late: list[Outcome] = []

    def __call__(self, worker: SinkWorker, outcome: Outcome) -> None:
        (self.late if outcome.late else self.outcomes).append(outcome)

    def total(self, field: str) -> int:
        return sum(len(getattr(o, field)) for o in self.outcomes)


def _worker_for(sink: ScriptedSink, rec: Recorder, **kw: int) -> SinkWorker:
    return SinkWorker(sink, on_outcome=rec, on_late=rec, **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_worker, "FIRST_BACKOFF", 0.001)


def test_put_never_waits_and_refuses_when_full() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    rec = Recorder()
    worker = _worker_for(sink, rec, max_items=3)
    assert worker.put(_item(0))
    while not sink.batches:  # the thread holds item 0 in its (gated) export
        time.sleep(0.001)
    accepted = [worker.put(_item(n)) for n in range(1, 10)]
    assert accepted == [True] * 3 + [False] * 6
    assert worker.pending() == 4
    sink.gate.set()
    assert worker.drain(time.monotonic() + 10)
    assert rec.total("acked") == 4
    assert worker.close(time.monotonic() + 5) == 0
    assert sink.closed == 1


def test_queue_bytes_are_bounded_too() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    worker = _worker_for(sink, Recorder(), max_bytes=30)
    assert worker.put(_item(0))
    while not sink.batches:
        time.sleep(0.001)
    assert worker.put(_item(1)) and worker.put(_item(2))  # 11 bytes each
    assert not worker.put(_item(3))
    sink.gate.set()
    worker.close(time.monotonic() + 5)


def test_batches_are_homogeneous_and_ordered() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    worker = _worker_for(sink, Recorder())
    worker.put(_item(0))
    while not sink.batches:
        time.sleep(0.001)
    for n, kind in enumerate(["episode", "episode", "trace", "trace", "episode"], start=1):
        worker.put(_item(n, kind))
    sink.gate.set()
    assert worker.drain(time.monotonic() + 10)
    kinds = [[i.kind for i in b] for b in sink.batches]
    assert kinds == [["episode"], ["episode", "episode"], ["trace", "trace"], ["episode"]]
    assert [i.record_id for b in sink.batches for i in b] == [f"r{n}" for n in range(6)]
    worker.close(time.monotonic() + 5)


def test_a_transient_failure_costs_a_retry_not_a_record() -> None:
    sink = ScriptedSink("retry", "retry", "ok")
    rec = Recorder()
    worker = _worker_for(sink, rec)
    for n in range(5):
        worker.put(_item(n))
    assert worker.drain(time.monotonic() + 10)
    assert rec.total("acked") == 5 and rec.total("rejected") == 0
    assert worker.retired is None
    # The same records came back, first in line.
    assert [i.record_id for i in sink.batches[1]][:1] == ["r0"]
    worker.close(time.monotonic() + 5)


def test_three_transient_failures_in_a_row_retire_the_sink() -> None:
    sink = ScriptedSink("retry", "retry", "retry")
    sink.gate = threading.Event()
    rec = Recorder()
    worker = _worker_for(sink, rec)
    for n in range(4):
        worker.put(_item(n))
    sink.gate.set()
    assert worker.drain(time.monotonic() + 10)
    assert len(sink.batches) == 3  # and no fourth attempt: it stopped hammering
    assert worker.retired is not None and "3 failures in a row" in worker.retired
    # Not stored, but not rejected for their content: they stay pending for sync.
    assert rec.total("unsent") == 4 and rec.total("rejected") == 0
    assert not worker.put(_item(9))  # later records are refused at once
    worker.close(time.monotonic() + 5)


def test_a_success_resets_the_transient_streak() -> None:
    sink = ScriptedSink("retry", "retry", "ok", "retry", "retry", "ok")
    rec = Recorder()
    worker = _worker_for(sink, rec)
    worker.put(_item(0))
    assert worker.drain(time.monotonic() + 10)
    worker.put(_item(1))
    assert worker.drain(time.monotonic() + 10)
    assert worker.retired is None
    assert rec.total("acked") == 2
    worker.close(time.monotonic() + 5)


@pytest.mark.parametrize(("verdict", "field"), [("retire", "unsent"), ("quiet", "skipped")])
def test_a_permanent_failure_retires_at_once(verdict: str, field: str) -> None:
    sink = ScriptedSink(verdict)
    sink.gate = threading.Event()
    rec = Recorder()
    worker = _worker_for(sink, rec)
    worker.put(_item(0))
    while not sink.batches:
        time.sleep(0.001)
    worker.put(_item(1))
    worker.put(_item(2))
    sink.gate.set()
    assert worker.drain(time.monotonic() + 10)
    assert len(sink.batches) == 1
    assert worker.quiet is (verdict == "quiet")
    assert rec.total(field) == 3  # the batch and what was still queued
    worker.close(time.monotonic() + 5)


def test_a_sink_that_raises_does_not_kill_the_worker() -> None:
    def boom(items: list[Item], deadline: Deadline) -> Outcome:
        raise RuntimeError("bug")

    sink = ScriptedSink(boom)
    rec = Recorder()
    worker = _worker_for(sink, rec)
    worker.put(_item(0))
    assert worker.drain(time.monotonic() + 10)
    assert rec.total("acked") == 1
    worker.close(time.monotonic() + 5)


def test_retry_after_is_honoured_between_rounds() -> None:
    seen: list[float] = []

    def slow(items: list[Item], deadline: Deadline) -> Outcome:
        seen.append(time.monotonic())
        return Outcome(retry=list(items), retry_reason="429", retry_after=0.3)

    sink = ScriptedSink(slow)
    worker = _worker_for(sink, Recorder())
    worker.put(_item(0))
    assert worker.drain(time.monotonic() + 10)
    seen.append(time.monotonic())
    assert len(sink.batches) == 2
    assert seen[1] - seen[0] >= 0.3  # the second round waited for the platform's word
    worker.close(time.monotonic() + 5)


def test_drain_and_close_honour_their_deadlines_and_late_outcomes_go_aside() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    rec = Recorder()
    worker = _worker_for(sink, rec)
    worker.put(_item(0))
    while not sink.batches:
        time.sleep(0.001)
    worker.put(_item(1))
    worker.put(_item(2))
    assert worker.drain(time.monotonic() + 0.05) is False
    left = worker.close(time.monotonic() + 0.05)
    assert left == 3  # queued, or in flight and unconfirmed: reported as unsent
    assert sink.closed == 0  # never closed under a request in flight
    assert not sink.gate.is_set()  # ... and close returned while the export still hung
    sink.gate.set()
    worker._thread.join(10)  # type: ignore[union-attr]
    assert rec.outcomes == []  # the counters never hear of it
    assert [len(o.acked) for o in rec.late] == [1]  # the one that was in flight
    assert sink.closed == 1  # the thread shut the sink once the export returned


def test_close_cuts_the_deadline_a_sink_is_sleeping_on() -> None:
    woke: list[bool] = []

    def backing_off(items: list[Item], deadline: Deadline) -> Outcome:
        woke.append(deadline.sleep(60))
        return Outcome(retry=list(items), retry_reason="503")

    sink = ScriptedSink(backing_off)
    rec = Recorder()
    worker = _worker_for(sink, rec)
    worker.put(_item(0))
    while not sink.batches:
        time.sleep(0.001)
    assert worker.close(time.monotonic() + 0.1) in (0, 1)
    worker._thread.join(10)  # type: ignore[union-attr]
    assert woke == [False]  # the 60 s back-off ended at the close deadline


def test_put_wait_waits_for_room_but_not_past_its_deadline() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    worker = _worker_for(sink, Recorder(), max_items=1)
    worker.put(_item(0))
    while not sink.batches:
        time.sleep(0.001)
    worker.put(_item(1))
    assert worker.put_wait(_item(2), time.monotonic() + 0.05) is False
    threading.Timer(0.05, sink.gate.set).start()
    assert worker.put_wait(_item(3), time.monotonic() + 10) is True
    assert worker.drain(time.monotonic() + 10)
    worker.close(time.monotonic() + 5)


def test_deadline_sleep_and_cut() -> None:
    d = Deadline(time.monotonic() + 60)
    assert d.sleep(0.01) is True
    threading.Timer(0.05, d.cut, args=(time.monotonic(),)).start()
    assert d.sleep(30) is False
    assert d.expired()
    later = Deadline(time.monotonic() + 0.01)
    later.cut(time.monotonic() + 100)  # never moves back
    assert later.at < time.monotonic() + 1

"""A run's delivery with a scripted sink, served by the process's worker of the sink: the
producer never waits, memory is bounded, order is kept, retries, retirement, deadlines,
late outcomes, a backlog larger than a batch is delivered once; and the Deadline a sink
sleeps on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import prime_runs._delivery.workers as _workers
import prime_runs._journal.ledger as _ledger
from prime_runs._delivery.delivery import Delivery
from prime_runs._journal.archive import RunArchive
from prime_runs._records.item import Deadline, Item, Outcome
from prime_runs.platform import retry


def _rec(n: int, kind: str = "episode") -> Item:
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

    def __call__(self, channel: object, outcome: Outcome) -> None:
        (self.late if outcome.late else self.outcomes).append(outcome)

    def total(self, field: str) -> int:
        return sum(len(getattr(o, field)) for o in self.outcomes)


def _delivery(sink: ScriptedSink, rec: Recorder) -> Delivery:
    delivery = Delivery("run-test", None, on_outcome=rec, on_late=rec)
    delivery.attach([sink])  # type: ignore[list-item]
    return delivery


def _wait(condition: Callable[[], bool]) -> None:
    end = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < end, "gave up waiting"
        time.sleep(0.001)


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "RESEND_FIRST", 0.001)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")


def test_hand_never_waits_and_without_a_journal_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS", 4)
    sink = ScriptedSink()
    sink.gate = threading.Event()
    rec = Recorder()
    delivery = _delivery(sink, rec)
    assert delivery.hand(_rec(0))
    _wait(lambda: bool(sink.batches))  # the live exporter holds record 0 (gated)
    held = [delivery.hand(_rec(n)) for n in range(1, 10)]
    assert held == [True] * 3 + [False] * 6  # no journal: what is not held is refused
    sink.gate.set()
    delivery.drain(time.monotonic() + 10)
    assert rec.total("acked") == 4 and delivery.pending() == 0
    assert delivery.close() == {}
    assert sink.closed == 1


def test_held_bytes_are_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ledger, "MAX_HELD_BYTES", 30)
    delivery = _delivery(ScriptedSink(), Recorder())
    assert delivery.hand(_rec(0)) and delivery.hand(_rec(1))  # 11 bytes each
    assert not delivery.hand(_rec(2))
    delivery.close()


def test_records_reach_the_sink_once_and_in_order() -> None:
    sink = ScriptedSink()
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for n, kind in enumerate(["episode", "episode", "trace", "trace", "episode"] * 20):
        delivery.hand(_rec(n, kind))
    delivery.drain(time.monotonic() + 10)
    sent = [i.record_id for b in sink.batches for i in b]
    assert sent == [f"r{n}" for n in range(100)]
    delivery.close()


def test_a_backlog_handed_while_the_sink_waits_is_delivered_once() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for n in range(500):  # the worker's first request waits on the gate meanwhile
        assert delivery.hand(_rec(n))
    sink.gate.set()
    delivery.drain(time.monotonic() + 20)
    sent = sorted(i.record_id for b in sink.batches for i in b)
    assert sent == sorted(f"r{n}" for n in range(500))  # each exactly once
    assert rec.total("acked") == 500
    delivery.close()


def test_a_transient_failure_costs_a_retry_not_a_record() -> None:
    sink = ScriptedSink("retry", "retry", "ok")
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for n in range(5):
        delivery.hand(_rec(n))
    delivery.drain(time.monotonic() + 10)
    assert rec.total("acked") == 5 and rec.total("rejected") == 0
    assert delivery.channels["fake"].retired is None
    # The same records came back, first in line, as the same objects.
    assert sink.batches[1][0] is sink.batches[0][0]
    delivery.close()


def test_three_transient_failures_in_a_row_retire_the_sink() -> None:
    sink = ScriptedSink("retry", "retry", "retry")
    sink.gate = threading.Event()
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for n in range(4):
        delivery.hand(_rec(n))
    sink.gate.set()
    delivery.drain(time.monotonic() + 10)
    channel = delivery.channels["fake"]
    assert len(sink.batches) == 3  # and no fourth attempt: it stopped hammering
    assert channel.retired is not None and "3 failures in a row" in channel.retired
    # Not stored, but not rejected for their content: they stay pending for sync.
    assert rec.total("unsent") == 4 and rec.total("rejected") == 0
    assert delivery.platform_down()
    assert delivery.hand(_rec(9))  # later records are not held for a retired sink
    assert delivery.pending() == 0
    delivery.close()


def test_a_success_resets_the_transient_streak() -> None:
    sink = ScriptedSink("retry", "retry", "ok", "retry", "retry", "ok")
    rec = Recorder()
    delivery = _delivery(sink, rec)
    delivery.hand(_rec(0))
    delivery.drain(time.monotonic() + 10)
    delivery.hand(_rec(1))
    delivery.drain(time.monotonic() + 10)
    assert delivery.channels["fake"].retired is None
    assert rec.total("acked") == 2
    delivery.close()


@pytest.mark.parametrize(("verdict", "field"), [("retire", "unsent"), ("quiet", "skipped")])
def test_a_permanent_failure_retires_at_once(verdict: str, field: str) -> None:
    sink = ScriptedSink(verdict)
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for n in range(3):
        delivery.hand(_rec(n))
    delivery.drain(time.monotonic() + 10)
    assert len(sink.batches) == 1
    assert delivery.channels["fake"].quiet is (verdict == "quiet")
    assert rec.total(field) == 3
    assert delivery.pending() == 0
    delivery.close()


def test_a_sink_that_raises_costs_a_retry_not_the_exporter() -> None:
    def boom(items: list[Item], deadline: Deadline) -> Outcome:
        raise RuntimeError("bug")

    sink = ScriptedSink(boom)
    rec = Recorder()
    delivery = _delivery(sink, rec)
    delivery.hand(_rec(0))
    delivery.drain(time.monotonic() + 10)
    assert rec.total("acked") == 1
    delivery.close()


def test_retry_after_is_honoured_between_rounds() -> None:
    seen: list[float] = []

    def slow(items: list[Item], deadline: Deadline) -> Outcome:
        seen.append(time.monotonic())
        return Outcome(retry=list(items), retry_reason="429", retry_after=0.3)

    sink = ScriptedSink(slow)
    delivery = _delivery(sink, Recorder())
    delivery.hand(_rec(0))
    delivery.drain(time.monotonic() + 10)
    seen.append(time.monotonic())
    assert len(sink.batches) == 2
    assert seen[1] - seen[0] >= 0.3  # the second round waited for the platform's word
    delivery.close()


def test_drain_and_close_honour_their_deadlines_and_late_outcomes_go_aside() -> None:
    sink = ScriptedSink()
    sink.gate = threading.Event()
    rec = Recorder()
    delivery = _delivery(sink, rec)
    delivery.hand(_rec(0))
    _wait(lambda: bool(sink.batches))
    delivery.hand(_rec(1))
    delivery.hand(_rec(2))
    start = time.monotonic()
    assert delivery.drain(start + 0.05) is False
    assert time.monotonic() - start < 5
    assert delivery.pending() == 3
    assert delivery.close() == {"fake": 3}  # reported as not sent
    assert sink.closed == 0  # never closed under a request in flight
    sink.gate.set()
    channel = delivery.channels["fake"]
    _wait(lambda: not channel.delivering())
    assert rec.outcomes == []  # the counters never hear of it
    assert sum(len(o.acked) for o in rec.late) == 1  # the one that was in flight
    assert sink.closed == 1  # the sink was shut once the export returned


def test_stop_by_cuts_the_deadline_a_sink_is_sleeping_on() -> None:
    woke: list[bool] = []

    def backing_off(items: list[Item], deadline: Deadline) -> Outcome:
        woke.append(deadline.sleep(60))
        return Outcome(retry=list(items), retry_reason="503")

    sink = ScriptedSink(backing_off)
    delivery = _delivery(sink, Recorder())
    delivery.hand(_rec(0))
    _wait(lambda: bool(sink.batches))
    delivery.stop_by(time.monotonic() + 0.1)
    _wait(lambda: bool(woke))
    assert woke == [False]  # the 60 s back-off ended at the cut
    delivery.close()


def test_deadline_sleep_and_cut() -> None:
    d = Deadline(time.monotonic() + 60)
    assert d.sleep(0.01) is True
    threading.Timer(0.05, d.cut, args=(time.monotonic(),)).start()
    assert d.sleep(30) is False
    assert d.expired()
    later = Deadline(time.monotonic() + 0.01)
    later.cut(time.monotonic() + 100)  # never moves back
    assert later.at < time.monotonic() + 1


def test_settled_records_are_let_go_and_later_ones_still_delivered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ledger, "_COMPACT", 4)  # drop settled slots after every 4
    sink = ScriptedSink("retry")  # one transient failure: a record waits across rounds
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for round_ in range(3):
        for n in range(50):
            assert delivery.hand(_rec(round_ * 50 + n))
        delivery.drain(time.monotonic() + 10)
        assert delivery.pending() == 0
    acked = [i.record_id for o in rec.outcomes for i in o.acked]
    assert sorted(acked) == sorted(f"r{n}" for n in range(150))  # each exactly once
    delivery.close()


def test_records_still_waiting_when_a_sink_retires_are_counted_at_once() -> None:
    sink = ScriptedSink("retire")
    sink.gate = threading.Event()
    rec = Recorder()
    retired: list[int] = []
    delivery = Delivery(
        "run-test", None, on_outcome=rec, on_late=rec, on_retired=lambda c, n: retired.append(n)
    )
    delivery.attach([sink])  # type: ignore[list-item]
    delivery.hand(_rec(0))
    _wait(lambda: bool(sink.batches))  # the live export holds record 0
    for n in range(1, 6):
        delivery.hand(_rec(n))  # queued behind it, claimed by no delivery
    sink.gate.set()
    _wait(lambda: bool(retired))
    assert retired == [5] and rec.total("unsent") == 1
    assert delivery.pending() == 0  # nothing left to wait for: flush() is done at once
    assert delivery.close() == {}


def test_drain_serves_the_sinks_on_its_own_thread_when_no_thread_can_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # the live path stays idle
    sink = ScriptedSink()
    rec = Recorder()
    delivery = _delivery(sink, rec)
    for n in range(5):
        delivery.hand(_rec(n))

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    with monkeypatch.context() as m:  # as in an exit hook under Python 3.12+
        m.setattr(_workers, "_workers", {})  # no worker of the sink has started yet
        m.setattr(threading.Thread, "start", refuse)
        delivery.drain(time.monotonic() + 10)
        assert delivery.close() == {}
    assert rec.total("acked") == 5


class _NotingSink(ScriptedSink):
    """Keeps its batch notes; the first holds ``attach`` there until ``go`` is set."""

    def __init__(self, name: str, entered: threading.Event, go: threading.Event) -> None:
        super().__init__()
        self.name = name
        self._entered, self._go = entered, go

    def keep_notes(self, notes: object) -> None:
        if self.name == "first":
            self._entered.set()
            self._go.wait(20)


def test_a_record_handed_while_the_sinks_attach_waits_for_every_one_of_them(
    tmp_path: Path,
) -> None:
    """A raw run span's registration attaches the sinks on its own thread while the
    producer's thread goes on handing records: none may wait for some sinks only."""
    archive = RunArchive.create(tmp_path, "run-attach", {"id": "run-attach"})
    entered, go = threading.Event(), threading.Event()
    first, second = _NotingSink("first", entered, go), _NotingSink("second", entered, go)
    rec = Recorder()
    delivery = Delivery("run-attach", archive, on_outcome=rec, on_late=rec)
    delivery.expect(["first", "second"])
    assert delivery.hand(_rec(0))
    attaching = threading.Thread(target=delivery.attach, args=([first, second],))
    attaching.start()
    assert entered.wait(20)  # attach is between its first sink and its second
    assert delivery.channels == {}  # no sink is seen before all of them are
    assert delivery.hand(_rec(1))
    go.set()
    attaching.join(20)
    delivery.drain(time.monotonic() + 10)
    for sink in (first, second):
        assert [i.record_id for b in sink.batches for i in b] == ["r0", "r1"], sink.name
    assert delivery.close() == {}

"""TracesSink against the stand-in's Prime Traces route: wire format, batching, retries
with Retry-After, splitting on rejection, and the §8.8 classification."""

from __future__ import annotations

import gzip
import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from _support import items, load_jsonl
from prime_runs._records.item import Deadline, Item
from prime_runs.exporters import traces as traces_mod
from prime_runs.exporters.traces import TracesSink, _batches, retry_wait
from prime_runs.platform._traces import compress_body
from prime_runs.testing import StandInPlatform

RUN = "ev-traces-test"
CONTEXT = {"source": "prime-runs", "run_type": "eval"}


EPISODES = load_jsonl("episodes.jsonl")
TRACES = load_jsonl("traces.jsonl")


def _items(records: list[dict[str, Any]]) -> list[Item]:
    return items(records, RUN)


@pytest.fixture
def platform() -> Iterator[StandInPlatform]:
    with StandInPlatform() as p:
        yield p


def _sink(p: StandInPlatform, **kw: Any) -> TracesSink:
    kw.setdefault("backoff", lambda error, attempt: 0.0)
    return TracesSink(api_key=p.api_key, traces_url=p.base_url, team_id=None, context=CONTEXT, **kw)


def _soon() -> float:
    return time.monotonic() + 30


def test_episode_and_trace_lines_go_as_the_contract_says(platform: StandInPlatform) -> None:
    sink = _sink(platform)
    episodes, traces = _items(EPISODES[:3]), _items(TRACES[:2])
    outcome = sink.export(episodes, _soon())
    outcome2 = sink.export(traces, _soon())
    sink.close()
    assert outcome.acked == episodes and outcome2.acked == traces
    ep_req, tr_req = platform.requests_for("traces_upload")
    body = b"".join(i.data + b"\n" for i in episodes)
    assert ep_req.idempotency_key == "sha256:" + hashlib.sha256(body).hexdigest()
    assert ep_req.headers["x-prime-line-format"] == "episode"
    assert "x-prime-line-format" not in tr_req.headers
    assert ep_req.gzip and tr_req.gzip
    assert ep_req.context == CONTEXT
    assert [line["id"] for line in ep_req.lines] == [r["id"] for r in EPISODES[:3]]
    for line in ep_req.lines:
        assert line["run"]["id"] == RUN
        assert all(m["run"]["id"] == RUN for m in line["traces"])
    assert sink.receipts == 2


def test_gzip_member_is_reproducible() -> None:
    body = b"".join(b'{"id":"%d","text":"%s"}\n' % (n, b"ab" * n) for n in range(500))
    one = compress_body(body, traces_mod.GZIP_LEVEL)
    assert one == compress_body(body, traces_mod.GZIP_LEVEL)  # a retry sends the same bytes
    assert one[:2] == b"\x1f\x8b" and one[4:8] == b"\0\0\0\0"  # gzip, mtime 0
    assert gzip.decompress(one) == body  # the standard library (and the service) reads it
    assert len(one) < len(body) // 4


def test_batches_close_at_the_size_target_kind_change_and_repeated_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(traces_mod, "TARGET_BATCH_BYTES", 25)
    items = [
        Item("episode", b"a" * 10, None, None, "a"),
        Item("episode", b"b" * 10, None, None, "b"),
        Item("episode", b"c" * 10, None, None, "c"),
        Item("trace", b"d" * 3, None, None, "d"),
        Item("trace", b"e" * 3, None, None, "d"),  # the same id again
        Item("trace", b"f" * 40, None, None, "f"),  # larger than the target: alone
    ]
    got = [[i.data[:1].decode() for i in b] for b in _batches(items)]
    assert got == [["a", "b"], ["c"], ["d"], ["e"], ["f"]]


def test_retries_the_same_bytes_and_honours_retry_after(platform: StandInPlatform) -> None:
    waits: list[tuple[float | None, int]] = []

    def backoff(error: BaseException, attempt: int) -> float:
        waits.append((getattr(error, "retry_after", None), attempt))
        return 0.0

    platform.fail("traces_upload", 429, retry_after=1.5)
    platform.fail("traces_upload", 503, after_processing=True, code="storage_unavailable")
    sink = _sink(platform, backoff=backoff)
    items = _items(EPISODES[:2])
    outcome = sink.export(items, _soon())
    assert outcome.acked == items
    assert waits == [(1.5, 0), (None, 1)]
    first, second, third = platform.requests_for("traces_upload")
    keys = {r.headers["idempotency-key"] for r in (first, second, third)}
    assert keys == {third.idempotency_key}
    assert (third.status, third.replayed) == (200, True)
    assert set(platform.episode_writes.values()) == {1}


def test_retry_wait_prefers_retry_after_and_caps_it() -> None:
    class E(Exception):
        def __init__(self, retry_after: float | None) -> None:
            self.retry_after = retry_after

    assert retry_wait(E(7.0), 3) == 7.0
    assert retry_wait(E(600.0), 0) == traces_mod.RETRY_AFTER_CAP
    assert 0.5 <= retry_wait(E(None), 0) <= 1.5
    assert retry_wait(E(None), 20) <= traces_mod.BACKOFF_CAP * 1.5


def test_retries_stop_at_the_attempt_budget_and_hand_back(platform: StandInPlatform) -> None:
    platform.outage(503)
    sink = _sink(platform, max_attempts=3)
    items = _items(EPISODES[:2])
    outcome = sink.export(items, _soon())
    assert outcome.retry == items and outcome.retire is None
    assert outcome.retry_reason is not None and "503" in outcome.retry_reason
    assert len(platform.requests_for("traces_upload")) == 3


def test_a_wait_past_the_deadline_is_not_taken(platform: StandInPlatform) -> None:
    platform.fail("traces_upload", 429, retry_after=30)
    sink = _sink(platform, backoff=retry_wait)
    items = _items(EPISODES[:1])
    outcome = sink.export(items, Deadline(time.monotonic() + 5))
    assert outcome.retry == items and outcome.retry_after == 30
    assert len(platform.requests_for("traces_upload")) == 1


def test_a_rejected_batch_is_halved_until_only_the_bad_records_fail(
    platform: StandInPlatform,
) -> None:
    bad = {EPISODES[3]["id"], EPISODES[12]["id"]}
    platform.reject_trace_ids(bad, code="environment_id_too_long")
    items = _items(EPISODES)
    outcome = _sink(platform).export(items, _soon())
    assert {i.record_id for i, _ in outcome.rejected} == bad
    assert all("environment_id_too_long" in reason for _, reason in outcome.rejected)
    assert len(outcome.acked) == len(items) - 2
    assert set(platform.episodes) == {r["id"] for r in EPISODES} - bad
    assert len(platform.requests_for("traces_upload")) <= 2 * 2 * 5 + 1


def test_records_the_service_would_refuse_are_never_sent(platform: StandInPlatform) -> None:
    items = _items([{"id": "no-timing"}, TRACES[0], {"id": ""}])
    outcome = _sink(platform).export(items, _soon())
    assert [i.record_id for i, _ in outcome.rejected] == ["no-timing", ""]
    assert outcome.acked == [items[1]]
    (request,) = platform.requests_for("traces_upload")
    assert [line["id"] for line in request.lines] == [TRACES[0]["id"]]


def test_a_line_over_64_mib_is_refused_locally(
    platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces_mod, "MAX_LINE_BYTES", 100)
    items = _items(TRACES[:1])
    outcome = _sink(platform).export(items, _soon())
    assert outcome.rejected and "trace_too_large" in outcome.rejected[0][1]
    assert platform.requests_for("traces_upload") == []


@pytest.mark.parametrize(("mode", "quiet"), [("service_not_enabled", True), ("forbidden", False)])
def test_403_retires_the_sink(platform: StandInPlatform, mode: str, quiet: bool) -> None:
    platform.traces_mode = mode
    items = _items(EPISODES[:3])
    outcome = _sink(platform).export(items, _soon())
    assert outcome.retire is not None and mode in outcome.retire
    assert outcome.quiet is quiet
    assert outcome.retry == items  # the worker decides: skipped (quiet) or failed
    assert len(platform.requests_for("traces_upload")) == 1


def test_service_not_enabled_after_a_receipt_is_not_quiet(platform: StandInPlatform) -> None:
    sink = _sink(platform)
    assert sink.export(_items(EPISODES[:1]), _soon()).acked
    platform.traces_mode = "service_not_enabled"
    outcome = sink.export(_items(EPISODES[1:2]), _soon())
    assert outcome.retire is not None and outcome.quiet is False


@pytest.mark.parametrize("status", [401, 402, 404, 500])
def test_other_permanent_failures_retire_loudly(platform: StandInPlatform, status: int) -> None:
    platform.fail("traces_upload", status)
    items = _items(EPISODES[:2])
    outcome = _sink(platform).export(items, _soon())
    assert outcome.retire is not None and str(status) in outcome.retire
    assert not outcome.quiet and outcome.retry == items


def test_a_request_level_rejection_is_not_split(platform: StandInPlatform) -> None:
    platform.fail("traces_upload", 400, code="invalid_metadata")
    items = _items(EPISODES[:8])
    outcome = _sink(platform).export(items, _soon())
    assert len(outcome.rejected) == 8
    assert len(platform.requests_for("traces_upload")) == 1


def test_the_api_key_stays_out_of_reprs(platform: StandInPlatform) -> None:
    sink = _sink(platform)
    assert platform.api_key not in repr(sink)


def test_splitting_has_a_request_budget(
    platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces_mod, "SPLIT_BUDGET", 4)
    platform.reject_trace_ids([r["id"] for r in EPISODES], code="created_at_out_of_window")
    outcome = _sink(platform).export(_items(EPISODES), _soon())
    assert len(outcome.rejected) == len(EPISODES)
    assert len(platform.requests_for("traces_upload")) == 1 + 4


def test_a_batch_that_may_have_landed_is_resent_as_the_same_bytes(
    platform: StandInPlatform,
) -> None:
    # The answer is lost after the upload was stored; by the next round more records
    # are queued behind it. Merging them would change the key and store it twice.
    platform.fail("traces_upload", 503, after_processing=True)
    sink = _sink(platform, max_attempts=1)
    first = _items(EPISODES[:3])
    assert sink.export(first, _soon()).retry == first
    later = _items(EPISODES[3:6])
    assert sink.export([*first, *later], _soon()).acked == [*first, *later]
    one, two, three = platform.requests_for("traces_upload")
    assert two.replayed and two.idempotency_key == one.idempotency_key
    assert [line["id"] for line in three.lines] == [r["id"] for r in EPISODES[3:6]]
    assert set(platform.episode_writes.values()) == {1}

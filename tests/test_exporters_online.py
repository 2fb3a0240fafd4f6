"""Online runs end to end against the stand-in: every fixture record reaches Prime Traces
(stamped) and the sample table (golden v0 rows) exactly once, through faults, stalls and
full queues, with exact loss counters and uploads drained before finalize."""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
import prime_runs._journal.ledger as _ledger
from _support import load_jsonl
from prime_runs._records.encode import encode
from prime_runs.platform import retry
from prime_runs.projection import build_samples
from prime_runs.testing import StandInPlatform

EPISODES = load_jsonl("episodes.jsonl")
EDGE = load_jsonl("edge_episodes.jsonl")
TRACES = load_jsonl("traces.jsonl")
GOLDEN = load_jsonl("samples_v0.jsonl")
ALL = EPISODES + EDGE + TRACES
ALL_EPISODES = EPISODES + EDGE


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Same policy, shorter waits: tests must not sit out real back-offs.
    monkeypatch.setattr(retry, "RESEND_FIRST", 0.005)
    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.0)


def _init(p: StandInPlatform, tmp_path: Path, **kwargs: Any) -> pr.Run:
    return pr.init(
        name="exporters",
        environments=["prfix-v1"],
        model="test-model",
        framework="verifiers",
        api_key=p.api_key,
        base_url=p.base_url,
        dir=tmp_path,
        **kwargs,
    )


def _stamped(records: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [json.loads(encode(r, run_id, "eval").data) for r in records]


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll until ``condition`` holds (a synchronisation point, not an assertion on time)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def _unique(prefix: str, record: dict[str, Any]) -> dict[str, Any]:
    """A copy of a record whose ids (envelope and members) start with ``prefix``."""
    copy_ = copy.deepcopy(record)
    copy_["id"] = f"{prefix}-{record['id']}"
    for member in copy_.get("traces", []):
        member["id"] = f"{prefix}-{member['id']}"
    return copy_


def _episodes(n: int) -> list[dict[str, Any]]:
    return [_unique(f"u{i}", EPISODES[i % len(EPISODES)]) for i in range(n)]


def _stored_once(p: StandInPlatform, run_id: str, records: list[dict[str, Any]]) -> None:
    """Every record is in Prime Traces exactly once, stamped, and every episode with traces
    has exactly one row. (The bare fixture traces repeat episode members: a trace id is
    written once per record that carries it.)"""
    expected = Counter(
        member["id"] for r in records for member in (r["traces"] if "traces" in r else [r])
    )
    assert p.trace_writes == dict(expected)
    assert p.episode_writes == {r["id"]: 1 for r in records if "traces" in r}
    for doc in p.traces.values():
        assert doc["run"]["id"] == run_id and doc["run"]["type"] == "eval"
    rows = Counter(row["sample_id"] for row in p.samples(run_id))
    assert rows == Counter(r["id"] for r in records if r.get("traces"))


# -- the happy path: both stores, stamped, golden rows -------------------------------


def test_fixture_records_reach_both_stores_once_stamped_with_golden_rows(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = _init(prime_env, tmp_path)
    run.log_episodes(EPISODES[:10])
    run.log_episodes(EPISODES[10:] + EDGE)  # a second call: numbering continues
    run.log_traces(TRACES)
    run.finish()

    assert prime_env.server_errors == []
    _stored_once(prime_env, run.id, ALL)
    # The uploaded copy carries the run on the envelope; other run keys are kept.
    envelope = prime_env.requests_for("traces_upload")
    episode_lines = [line for r in envelope if r.line_format == "episode" for line in r.lines]
    assert len(episode_lines) == len(ALL_EPISODES)
    for line in episode_lines:
        assert line["run"]["id"] == run.id and line["run"]["type"] == "eval"
        assert line["run"]["name"].startswith("fixture-")
        assert {m["run"]["id"] for m in line["traces"]} <= {run.id}
    # Bare traces go as trace lines: the format header is absent, never "trace".
    assert {r.headers.get("x-prime-line-format") for r in envelope} == {"episode", None}
    for request in envelope:
        kinds = {"traces" in line for line in request.lines}
        assert kinds == {request.headers.get("x-prime-line-format") == "episode"}
    # Provenance only: the upload context never carries the run id.
    for request in envelope:
        assert request.context == {
            "source": "prime-runs",
            "run_type": "eval",
            "framework": "verifiers",
            "model": "test-model",
        }
        assert run.id not in json.dumps(request.context)
        assert request.gzip and request.idempotency_key.startswith("sha256:")

    # Rows equal build_samples over the stamped records in logging order (one counter).
    expected = {row["sample_id"]: row for row in build_samples(_stamped(ALL, run.id))}
    stored = {row["sample_id"]: row for row in prime_env.samples(run.id)}
    assert stored == json.loads(json.dumps(expected))
    # Golden rows: everything that does not depend on the run (its id is in the stamped
    # native wrapper; rollout numbers depend on what else the run logged).
    for golden in GOLDEN:
        row = copy.deepcopy(stored[golden["sample_id"]])
        golden = copy.deepcopy(golden)
        wrapper = row["info"].pop("native_wrapper")
        golden["info"].pop("native_wrapper")
        assert wrapper["run"]["id"] == run.id and wrapper["id"] == golden["sample_id"]
        del row["rollout_number"], golden["rollout_number"]
        assert row == golden

    assert run.acknowledged_records == {"traces": len(ALL), "eval_samples": len(ALL_EPISODES) - 1}
    assert run.failed_records == {}
    assert run.dropped_records == 0
    assert [e for e in run.errors if "not stored" in e] == []


def test_finish_drains_every_upload_before_finalize(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    # Slow answers make the drain visible: finalize must still come last.
    prime_env.stall("samples_append", 0.2)
    run = _init(prime_env, tmp_path)
    for record in EPISODES:
        run.log_episodes(record)
    run.finish()
    routes = [r.route for r in prime_env.requests]
    finalize = routes.index("eval_finalize")
    uploads = [i for i, r in enumerate(routes) if r in ("samples_append", "traces_upload")]
    assert uploads and max(uploads) < finalize
    assert all(
        r.status is not None and r.status < 300
        for r in prime_env.requests[:finalize]
        if r.route in ("samples_append", "traces_upload")
    )
    assert len(prime_env.samples(run.id)) == len(EPISODES)
    assert prime_env.evaluations[run.id]["finalize_count"] == 1


def test_an_episode_over_the_request_ceiling_goes_as_one_row_per_trace(
    prime_env: StandInPlatform, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    big = _unique("big", EPISODES[0])
    for n, member in enumerate(big["traces"]):  # three members of ~9.5 MB each
        member["info"] = {"blob": chr(ord("a") + n) * 9_500_000}
    run = _init(prime_env, tmp_path)
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run.log_episodes([big, EPISODES[1]])
        run.finish()
    rows = prime_env.samples(run.id)
    per_trace = [r for r in rows if r["episode_id"] == big["id"]]
    assert sorted(r["sample_id"] for r in per_trace) == sorted(m["id"] for m in big["traces"])
    # One rollout: every row of the episode has the same number (which one depends on
    # whether the other episode of its example was delivered first).
    assert len({r["rollout_number"] for r in per_trace}) == 1
    assert all("native_wrapper" not in (r["info"] or {}) for r in per_trace)
    assert [r["sample_id"] for r in rows].count(EPISODES[1]["id"]) == 1
    assert all(r.body_size <= 26_214_400 for r in prime_env.requests_for("samples_append"))
    assert prime_env.episode_writes[big["id"]] == 1
    assert "one row per trace" in caplog.text
    assert run.acknowledged_records == {"traces": 2, "eval_samples": 2}
    assert run.failed_records == {}


# -- permanent traces failures -------------------------------------------------------


@pytest.mark.prime_platform(traces="forbidden")
def test_traces_forbidden_retires_traces_and_samples_go_on(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = _init(prime_env, tmp_path)
    run.log_episodes(EPISODES)
    run.flush(10)
    run.log_episodes(EDGE)  # after the sink retired: still counted under traces
    run.finish()
    assert len(prime_env.requests_for("traces_upload")) == 1  # no hammering
    assert Counter(r["sample_id"] for r in prime_env.samples(run.id)) == Counter(
        r["id"] for r in ALL_EPISODES if r["traces"]
    )
    assert run.failed_records == {"traces": len(ALL_EPISODES)}
    assert run.acknowledged_records == {"eval_samples": len(ALL_EPISODES) - 1}
    assert any("traces: sink stopped" in e and "forbidden" in e for e in run.errors)


@pytest.mark.prime_platform(traces="service_not_enabled")
def test_service_not_enabled_switches_traces_off_quietly(
    prime_env: StandInPlatform, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = _init(prime_env, tmp_path)
    with caplog.at_level(logging.INFO, logger="prime_runs"):
        run.log_episodes(EPISODES)
        run.flush(10)
        run.log_episodes(EDGE)
        run.finish()
    assert len(prime_env.requests_for("traces_upload")) == 1
    assert len(prime_env.samples(run.id)) == len(ALL_EPISODES) - 1
    assert run.failed_records == {}  # not a loss
    assert run.errors == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "traces" in r.msg]
    assert "traces sink switched off" in caplog.text


def test_service_not_enabled_after_a_receipt_is_a_failure(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = _init(prime_env, tmp_path)
    run.log_episodes(EPISODES[:4])
    assert run.flush(10)
    prime_env.traces_mode = "service_not_enabled"  # access revoked mid-run
    run.log_episodes(EPISODES[4:])
    run.finish()
    assert run.acknowledged_records["traces"] == 4
    assert run.failed_records == {"traces": len(EPISODES) - 4}
    assert len(prime_env.samples(run.id)) == len(EPISODES)
    assert any("service_not_enabled" in e for e in run.errors)


# -- one bad record ------------------------------------------------------------------


def test_a_rejected_record_is_split_out_and_only_it_fails(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    bad = EPISODES[5]
    prime_env.reject_trace_ids([bad["id"]], code="created_at_out_of_window")
    invalid = {"id": "no-timing"}  # Prime Traces would refuse it: never sent
    run = _init(prime_env, tmp_path)
    run.log_episodes(EPISODES)
    run.log_traces([invalid, *TRACES])
    run.finish()
    stored = set(prime_env.episodes)
    assert stored == {r["id"] for r in EPISODES} - {bad["id"]}
    kept = [r for r in EPISODES if r is not bad] + TRACES
    assert prime_env.trace_writes == dict(
        Counter(m["id"] for r in kept for m in r.get("traces", [r]))
    )
    sent = {line["id"] for r in prime_env.requests_for("traces_upload") for line in r.lines}
    assert "no-timing" not in sent
    assert run.failed_records == {"traces": 1}
    assert run.acknowledged_records["traces"] == len(EPISODES) - 1 + len(TRACES)
    assert run.acknowledged_records["eval_samples"] == len(EPISODES)
    (reason,) = [e for e in run.errors if "not stored" in e]
    assert bad["id"] in reason and "created_at_out_of_window" in reason
    # The record the service would refuse is refused when logged (offline alike).
    assert any("not logged" in e and "timing.start" in e for e in run.errors)


# -- transient failures: storms, ambiguity, outages ----------------------------------


def test_429_and_503_storms_store_every_record_exactly_once(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.fail("traces_upload", 429, times=3, retry_after=0)
    prime_env.fail("traces_upload", 503, times=3, code="writer_pool_saturated")
    prime_env.fail("traces_upload", 502, after_processing=True, retry_after=0)
    prime_env.fail("samples_append", 429, times=6, retry_after=0)
    prime_env.fail("samples_append", 503, times=2, after_processing=True, retry_after=0)
    prime_env.fail("samples_append", 503, times=1)
    run = _init(prime_env, tmp_path)
    for record in ALL:  # one at a time, so the storm meets many small batches
        run.log_episodes(record)
    run.finish()
    assert prime_env.server_errors == []
    _stored_once(prime_env, run.id, ALL)
    statuses = Counter(r.status for r in prime_env.requests_for("traces_upload"))
    assert statuses[429] == 3 and statuses[503] == 3 and statuses[502] == 1
    assert run.failed_records == {}
    assert run.acknowledged_records == {"traces": len(ALL), "eval_samples": len(ALL_EPISODES) - 1}


def test_an_ambiguous_append_that_landed_is_never_sent_twice(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    # The rows land, the answer is lost, and the read-back fails too: the next try must
    # read back again instead of appending blindly.
    prime_env.fail("samples_append", 503, after_processing=True)
    prime_env.fail("samples_list", 503, times=5, retry_after=0)
    prime_env.fail("samples_append", 502, after_processing=True, reset=True)
    run = _init(prime_env, tmp_path)
    run.log_episodes(EPISODES[:8])
    run.flush(10)
    run.log_episodes(EPISODES[8:])
    run.finish()
    rows = Counter(r["sample_id"] for r in prime_env.samples(run.id))
    assert rows == Counter(r["id"] for r in EPISODES)
    assert run.acknowledged_records["eval_samples"] == len(EPISODES)
    assert run.failed_records == {}


def test_a_sustained_outage_retires_the_sinks_without_hammering(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    records = _episodes(30)
    run = _init(prime_env, tmp_path)
    # Every record is queued before the first answer, so each one meets a sink that is
    # still open and the counts do not depend on thread timing.
    prime_env.stall(None, 30)
    run.log_episodes(records)
    prime_env.outage(503, routes=["traces_upload", "samples_append", "samples_list"])
    prime_env.unstall()
    run.finish(timeout=30)
    assert run.failed_records == {"traces": 30, "eval_samples": 30}
    assert run.acknowledged_records == {}
    assert run.dropped_records == 0
    # Three failed rounds per sink, each within its own retry budget; then silence.
    assert len(prime_env.requests_for("traces_upload")) <= 3 * retry.ATTEMPTS
    assert len(prime_env.requests_for("samples_append")) <= 3
    assert sum("sink stopped" in e and "failures in a row" in e for e in run.errors) == 2
    # Nothing stored: the run is left open for `prime-runs sync`, not finalized.
    assert prime_env.evaluations[run.id]["finalize_count"] == 0


# -- the producer never waits ----------------------------------------------------------


def test_a_stalled_platform_does_not_hold_up_log_episodes(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    records = _episodes(300)
    run = _init(prime_env, tmp_path)
    prime_env.stall(None, 60)
    try:
        for record in records:
            run.log_episodes(record)
        # Every call returned while the platform has answered no upload at all.
        assert run.logged_records == len(records)
        assert prime_env.receipts == []
        assert prime_env.samples(run.id) == []
        uploads = ("traces_upload", "samples_append")
        assert all(r.status is None for r in prime_env.requests if r.route in uploads)
        assert run.flush(timeout=0.2) is False  # flush honours its deadline
        assert prime_env.receipts == []  # ... and the stall was still on when it returned
    finally:
        prime_env.unstall()
    run.finish()
    _stored_once(prime_env, run.id, records)
    assert run.failed_records == {} and run.dropped_records == 0


def test_finish_honours_its_deadline_and_late_answers_change_no_counter(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = _init(prime_env, tmp_path)
    prime_env.stall("traces_upload", 60)
    run.log_episodes(EPISODES)
    _wait_for(lambda: prime_env.requests_for("traces_upload") != [], "the stalled upload")
    try:
        run.finish(timeout=1.0)
        assert prime_env.receipts == []  # finish returned while the upload hung
        assert run.finished
        failed, acked = run.failed_records, run.acknowledged_records
        assert failed == {"traces": len(EPISODES)}
        assert acked == {"eval_samples": len(EPISODES)}
    finally:
        prime_env.unstall()
    # The abandoned upload now lands; the run's counts stay as finish() reported them.
    _wait_for(lambda: len(prime_env.receipts) >= 1, "the late receipt")
    workers = run._state.workers  # type: ignore[union-attr]
    _wait_for(lambda: not any(w.delivering() for w in workers), "deliveries")
    assert run.failed_records == failed
    assert run.acknowledged_records == acked
    # finish() left the run open (its traces were not stored by the deadline): sync closes it.
    assert prime_env.evaluations[run.id]["finalize_count"] == 0


def _fill_queues(
    p: StandInPlatform, run: pr.Run, records: list[dict[str, Any]], dropped: int
) -> None:
    """Log ``records`` while both sinks hold the first one in a stalled request (the
    sample sink's first is the row count it reads before its append)."""
    p.stall(None, 60)
    try:
        run.log_episodes(records[0])
        _wait_for(
            lambda: {r.route for r in p.requests} >= {"traces_upload", "samples_list"},
            "both stalled uploads",
        )
        run.log_episodes(records[1:])
        assert run.dropped_records == dropped
        assert run.failed_records == {}
    finally:
        p.unstall()


def test_without_a_journal_records_over_the_memory_bound_are_exact_drops(
    prime_env: StandInPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a journal the bytes beside the spans are the only copy: 4 fit (the one in
    # the stalled request among them), the other 17 reach no sink and are counted.
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS", 4)
    records = _episodes(21)
    run = _init(prime_env, tmp_path, journal=False)
    _fill_queues(prime_env, run, records, dropped=17)
    run.finish()
    assert run.dropped_records == 17
    assert run.failed_records == {}
    assert run.acknowledged_records == {"traces": 4, "eval_samples": 4}
    in_traces = set(prime_env.episodes)
    in_samples = {r["sample_id"] for r in prime_env.samples(run.id)}
    assert in_traces == in_samples == {r["id"] for r in records[:4]}


def test_a_full_queue_is_made_good_from_the_journal_at_finish(
    prime_env: StandInPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 4-span BatchSpanProcessor queue drops most spans, and only 4 payloads stay in
    # memory: the rest are read back from the journal and delivered at finish.
    monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 4)
    records = _episodes(21)
    run = _init(prime_env, tmp_path)
    _fill_queues(prime_env, run, records, dropped=0)
    run.finish()
    assert run.dropped_records == 0
    assert run.failed_records == {}
    assert run.acknowledged_records == {"traces": 21, "eval_samples": 21}
    _stored_once(prime_env, run.id, records)


def test_concurrent_producers_lose_nothing(prime_env: StandInPlatform, tmp_path: Path) -> None:
    run = _init(prime_env, tmp_path)
    records = _episodes(200)
    batches = [records[i::4] for i in range(4)]
    threads = [threading.Thread(target=run.log_episodes, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.finish()
    _stored_once(prime_env, run.id, [r for b in batches for r in b])
    assert run.acknowledged_records == {"traces": 200, "eval_samples": 200}


# -- retired sinks and late outcomes --


def test_records_after_both_sinks_retired_are_failures_not_drops(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = _init(prime_env, tmp_path)
    prime_env.outage(503, routes=["traces_upload", "samples_append", "samples_list"])
    run.log_episodes(EPISODES[:2])
    run.flush(20)
    assert all(w.retired for w in run._state.workers)  # type: ignore[union-attr]
    run.log_episodes(EPISODES[2:])  # no queue was full: these are per-sink failures
    run.finish(timeout=20)
    assert run.dropped_records == 0
    assert run.failed_records == {"traces": len(EPISODES), "eval_samples": len(EPISODES)}


def test_a_late_receipt_is_journaled_so_sync_will_not_resend_it(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    run = _init(prime_env, tmp_path)
    prime_env.stall("traces_upload", 60)
    run.log_episodes(EPISODES[:3])
    _wait_for(lambda: prime_env.requests_for("traces_upload") != [], "the stalled upload")
    try:
        run.finish(timeout=1.0)
    finally:
        prime_env.unstall()
    workers = run._state.workers  # type: ignore[union-attr]
    _wait_for(lambda: not any(w.delivering() for w in workers), "deliveries")
    acked = run._state.archive.acknowledged()  # type: ignore[union-attr]
    assert len(acked.get("traces", ())) == len(prime_env.episodes) > 0

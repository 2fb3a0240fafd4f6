"""SamplesSink against the stand-in's sample table: v0 rows, numbering across exports and
retries, the request ceiling, ambiguous appends, and the failure classes."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from _support import items, load_jsonl
from prime_runs._records.encode import encode
from prime_runs._records.item import Item
from prime_runs.exporters.samples import SamplesSink
from prime_runs.platform import retry
from prime_runs.platform._http import PlatformClient
from prime_runs.projection import build_samples
from prime_runs.settings import INFLIGHT_WINDOW_ENV, Settings
from prime_runs.testing import StandInPlatform

RUN = "ev_standin_0001"


EPISODES = load_jsonl("episodes.jsonl")
TRACES = load_jsonl("traces.jsonl")


def _items(records: list[dict[str, Any]]) -> list[Item]:
    return items(records, RUN)


def _expected(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stamped = [json.loads(encode(r, RUN, "eval").data) for r in records]
    return json.loads(json.dumps(build_samples(stamped)))


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInPlatform]:
    monkeypatch.setattr(retry, "backoff", lambda attempt: 0.0)
    with StandInPlatform() as p:
        p.add_evaluation(RUN, name="samples-test", status="RUNNING")
        yield p


def _sink(p: StandInPlatform, **kw: Any) -> SamplesSink:
    settings = Settings.resolve(api_key=p.api_key, base_url=p.base_url)
    return SamplesSink(PlatformClient(settings), RUN, **kw)


def _soon() -> float:
    return time.monotonic() + 30


def test_rows_match_build_samples_with_numbering_across_exports(platform: StandInPlatform) -> None:
    sink = _sink(platform)
    first, second = _items(EPISODES[:7]), _items(EPISODES[7:] + TRACES)
    out1 = sink.export(first, _soon())
    out2 = sink.export(second, _soon())
    sink.close()
    assert out1.acked == first
    assert out2.acked == second[: len(EPISODES) - 7]
    assert out2.skipped == second[len(EPISODES) - 7 :]  # bare traces have no v0 row
    assert platform.samples(RUN) == _expected(EPISODES)


def test_a_retried_record_keeps_its_rollout_number(platform: StandInPlatform) -> None:
    platform.fail("samples_append", 429, times=5, retry_after=0)
    sink = _sink(platform)
    items = _items(EPISODES[:4])
    out = sink.export(items, _soon())
    assert out.retry == items and out.retry_reason and out.retry_after == 0
    assert sink.export(_items(EPISODES[4:6]), _soon()).acked  # overtakes the retry
    assert sink.export(items, _soon()).acked == items
    by_id = {r["sample_id"]: r for r in platform.samples(RUN)}
    assert by_id == {r["sample_id"]: r for r in _expected(EPISODES[:6])}


def test_an_episode_over_the_ceiling_becomes_per_trace_rows(platform: StandInPlatform) -> None:
    limit = 12_000
    sink = _sink(platform, limit=limit)
    items = _items(EPISODES[:2])  # ~11 kB episodes: the summary row does not fit
    out = sink.export(items, _soon())
    assert out.acked == items
    rows = platform.samples(RUN)
    assert Counter(r["episode_id"] for r in rows) == {r["id"]: 3 for r in EPISODES[:2]}
    assert [r["sample_id"] for r in rows] == [t["id"] for r in EPISODES[:2] for t in r["traces"]]
    # Both are example 0: the episode's number goes on each of its rows.
    assert {(r["episode_id"], r["rollout_number"]) for r in rows} == {
        (EPISODES[0]["id"], 1),
        (EPISODES[1]["id"], 2),
    }
    assert all(r.body_size <= limit for r in platform.requests_for("samples_append"))


def test_a_row_too_large_alone_is_rejected_locally(platform: StandInPlatform) -> None:
    sink = _sink(platform, limit=600)
    items = _items(EPISODES[:1] + EPISODES[16:17])
    out = sink.export(items, _soon())
    assert [i.record_id for i, _ in out.rejected] == [EPISODES[0]["id"], EPISODES[16]["id"]]
    assert "request limit" in out.rejected[0][1]
    assert platform.requests_for("samples_append") == []


def test_an_unconfirmed_append_is_read_back_before_any_resend(platform: StandInPlatform) -> None:
    platform.fail("samples_append", 503, after_processing=True)
    # The row count read before the append and the read-back after it both fail.
    platform.fail("samples_list", 503, times=10, retry_after=0)
    sink = _sink(platform)
    items = _items(EPISODES[:5])
    out = sink.export(items, _soon())
    assert out.retry == items  # landed, but nobody could confirm it
    out = sink.export(items, _soon())
    assert out.acked == items
    assert len(platform.requests_for("samples_append")) == 1  # never appended twice
    assert Counter(r["sample_id"] for r in platform.samples(RUN)) == {
        r["id"]: 1 for r in EPISODES[:5]
    }


def test_an_append_cut_short_and_stored_later_is_never_sent_again(
    platform: StandInPlatform,
) -> None:
    # The export's deadline cuts the request (1 s) while the platform holds it (3 s),
    # then stores it: a resend after the timeout would be a second copy of every row.
    platform.hold("samples_append", 3.0)
    sink = _sink(platform)
    items = _items(EPISODES[:5])
    out = sink.export(items, time.monotonic() + 1.0)
    assert out.retry == items and out.acked == []
    assert out.held_until is None  # the timeout itself is a failure of the platform
    again = sink.export(items, _soon())  # before the held request is stored: still waiting
    assert again.retry == items and again.held_until is not None
    deadline = time.monotonic() + 30
    while len(platform.samples(RUN)) < 5:
        assert time.monotonic() < deadline, "the held append never landed"
        time.sleep(0.02)

    last = sink.export(items, _soon())

    assert last.acked == items
    assert len(platform.requests_for("samples_append")) == 1
    assert Counter(r["sample_id"] for r in platform.samples(RUN)) == {
        r["id"]: 1 for r in EPISODES[:5]
    }


def test_an_append_in_doubt_is_sent_again_once_it_cannot_land(
    platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INFLIGHT_WINDOW_ENV, "0.5")
    platform.fail("samples_append", 502)  # answered by a gateway; never stored
    sink = _sink(platform)
    items = _items(EPISODES[:3])
    assert sink.export(items, _soon()).retry == items
    time.sleep(0.6)  # the window is a time, not an event

    out = sink.export(items, _soon())

    assert out.acked == items
    assert Counter(r["sample_id"] for r in platform.samples(RUN)) == {
        r["id"]: 1 for r in EPISODES[:3]
    }


def test_no_append_starts_after_the_deadline_the_row_count_read_used_up(
    platform: StandInPlatform,
) -> None:
    # The read before an append (the table's row count) is held past the export's deadline
    # (finish() giving up, a flush's timeout): the append it precedes is not sent, so the
    # rows stay the next delivery's (or sync's) and are never stored behind its back.
    platform.stall("samples_list", 5.0)
    sink = _sink(platform)
    items = _items(EPISODES[:3])

    out = sink.export(items, time.monotonic() + 0.2)

    assert out.retry == items and not out.acked
    assert platform.requests_for("samples_append") == []
    platform.unstall()
    assert sink.export(items, _soon()).acked == items
    assert Counter(r["sample_id"] for r in platform.samples(RUN)) == {
        r["id"]: 1 for r in EPISODES[:3]
    }


def test_an_ambiguous_append_resends_only_what_is_missing(platform: StandInPlatform) -> None:
    platform.fail("samples_append", 502, after_processing=True, reset=True)
    sink = _sink(platform)
    items = _items(EPISODES[:5])
    assert sink.export(items, _soon()).acked == items
    assert len(platform.samples(RUN)) == 5


def test_a_rejected_request_is_halved_down_to_the_bad_record(platform: StandInPlatform) -> None:
    platform.fail("samples_append", 422, times=3)  # the first half, quarter and row
    sink = _sink(platform)
    items = _items(EPISODES[:4])
    out = sink.export(items, _soon())
    assert [i.record_id for i, _ in out.rejected] == [EPISODES[0]["id"]]
    assert out.acked == items[1:]
    assert [r["sample_id"] for r in platform.samples(RUN)] == [r["id"] for r in EPISODES[1:4]]


def test_a_conflict_rejects_the_request_without_splitting(platform: StandInPlatform) -> None:
    platform.fail("samples_append", 409)
    out = _sink(platform).export(_items(EPISODES[:4]), _soon())
    assert len(out.rejected) == 4
    assert len(platform.requests_for("samples_append")) == 1


@pytest.mark.parametrize("status", [401, 403, 404, 500])
def test_a_sink_wide_failure_retires(platform: StandInPlatform, status: int) -> None:
    platform.fail("samples_append", status)
    items = _items(EPISODES[:3])
    out = _sink(platform).export(items, _soon())
    assert out.retire is not None and out.retry == items and not out.quiet


def test_the_api_key_stays_out_of_reprs(platform: StandInPlatform) -> None:
    assert platform.api_key not in repr(_sink(platform))

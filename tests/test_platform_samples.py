"""The legacy sample writer (contract §5): packing, and appends under injected faults
against the stand-in, with stored rows counted server-side."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.samples import (
    APPEND_TIMEOUT,
    BODY_LIMIT,
    ENVELOPE_BYTES,
    SampleWriter,
    body_of,
    pack,
)
from prime_runs.settings import INFLIGHT_WINDOW_ENV, Settings
from prime_runs.testing import StandInPlatform

DATA = Path(__file__).parent / "data"


def row(sample_id: str, size: int = 0) -> tuple[str, bytes]:
    data = json.dumps({"sample_id": sample_id, "pad": "x" * size}, separators=(",", ":"))
    return sample_id, data.encode()


def rows(n: int, prefix: str = "s") -> list[tuple[str, bytes]]:
    return [row(f"{prefix}{i}") for i in range(n)]


# -- packing ---------------------------------------------------------------------------


def test_envelope_is_14_bytes() -> None:
    assert ENVELOPE_BYTES == 14 == len(b'{"samples":[]}')
    assert BODY_LIMIT == 26_214_400


def test_body_joins_rows_without_reencoding() -> None:
    weird = ("a", b'{"sample_id":"a","x":1.50,"y":"\\u00e9"}')
    body = bytes(body_of([weird, ("b", b'{"sample_id":"b"}')]))
    assert body == b'{"samples":[{"sample_id":"a","x":1.50,"y":"\\u00e9"},{"sample_id":"b"}]}'
    assert json.loads(body)["samples"][1] == {"sample_id": "b"}


def test_greedy_packing_counts_envelope_and_commas_exactly() -> None:
    a, b, c = ("a", b"x" * 10), ("b", b"y" * 10), ("c", b"z" * 10)
    # Two rows need 14 + 10 + 1 + 10 = 35 bytes.
    batches, oversized = pack([a, b, c], limit=35)
    assert batches == [[a, b], [c]] and oversized == []
    assert all(len(body_of(batch)) <= 35 for batch in batches)
    batches, _ = pack([a, b, c], limit=34)
    assert batches == [[a], [b], [c]]
    batches, _ = pack([a, b, c], limit=46)
    assert batches == [[a, b, c]]
    assert len(body_of(batches[0])) == 46


def test_a_row_too_large_alone_is_set_aside_in_order() -> None:
    small, big = ("s", b"x" * 10), ("big", b"y" * 30)
    batches, oversized = pack([small, big, small], limit=35)
    assert oversized == [big]
    assert batches == [[small, small]]
    assert pack([("x", b"z" * 20)], limit=34) == ([[("x", b"z" * 20)]], [])


# -- appends ---------------------------------------------------------------------------


@pytest.fixture
def platform() -> Iterator[StandInPlatform]:
    with StandInPlatform() as p:
        yield p


@pytest.fixture
def client(platform: StandInPlatform) -> Iterator[PlatformClient]:
    s = Settings(platform.api_key, None, platform.base_url, platform.base_url, "http://a", "online")
    c = PlatformClient(s, sleep=lambda _: None)
    yield c
    c.close()


@pytest.fixture
def eval_id(client: PlatformClient) -> str:
    return evaluations.create(
        client, name="r", environments=[{"id": "e"}], model=None, framework=None,
        description=None, tags=[], team_id=None, metadata=None,
    ).id  # fmt: skip


def stored_ids(platform: StandInPlatform, eval_id: str) -> list[str]:
    return [r["sample_id"] for r in platform.samples(eval_id)]


def test_fixture_rows_are_stored_as_sent(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    lines = (DATA / "samples_v0.jsonl").read_bytes().splitlines()
    fixture = [(json.loads(line)["sample_id"], line) for line in lines if line.strip()]
    result = SampleWriter(client, eval_id).append(fixture)
    assert result.ok and result.acked == [sid for sid, _ in fixture]
    assert platform.samples(eval_id) == [json.loads(data) for _, data in fixture]
    (request,) = platform.requests_for("samples_append")
    assert request.path == f"/api/v1/evaluations/{eval_id}/samples"
    assert request.headers["content-type"] == "application/json"


def test_batches_follow_the_body_limit(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    sent = [row(f"s{i}", 40) for i in range(10)]
    per_row = len(sent[0][1])
    limit = ENVELOPE_BYTES + 3 * per_row + 2  # three rows a body
    result = SampleWriter(client, eval_id, limit=limit).append(sent)
    assert result.ok
    assert [r.body_size for r in platform.requests_for("samples_append")] == [
        limit, limit, limit, ENVELOPE_BYTES + per_row
    ]  # fmt: skip
    assert stored_ids(platform, eval_id) == [sid for sid, _ in sent]


@pytest.mark.parametrize("reset", [False, True])
def test_ambiguous_failure_after_storing_is_not_resent(
    platform: StandInPlatform, client: PlatformClient, eval_id: str, reset: bool
) -> None:
    platform.fail("samples_append", 502, after_processing=True, reset=reset)
    result = SampleWriter(client, eval_id).append(rows(5))
    assert result.ok and sorted(result.acked) == sorted(f"s{i}" for i in range(5))
    assert stored_ids(platform, eval_id) == [f"s{i}" for i in range(5)]
    assert len(platform.requests_for("samples_append")) == 1
    assert len(platform.requests_for("samples_list")) >= 1


@pytest.fixture
def no_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that failed can no longer be stored once its answer came: the writer may
    resend what is missing at once (by default it waits out the request timeout)."""
    monkeypatch.setenv(INFLIGHT_WINDOW_ENV, "0")


def test_ambiguous_failure_not_found_is_not_resent_while_it_may_still_land(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    writer = SampleWriter(client, eval_id)
    platform.fail("samples_append", 504)
    result = writer.append(rows(2))
    assert result.transient and set(result.failed) == {"s0", "s1"}
    assert "may still be stored" in result.failed["s0"]
    (sent,) = result.doubt
    assert sent.ids == ("s0", "s1") and sent.since == 0
    assert sent.until >= time.time() + APPEND_TIMEOUT - 5
    assert len(platform.requests_for("samples_append")) == 1
    assert writer.settle(sent, None) == (set(), False)
    # The held request lands later (here: the same rows appended by another writer).
    assert SampleWriter(client, eval_id).append(rows(2)).ok
    assert writer.settle(sent, None) == ({"s0", "s1"}, False)


def test_an_ambiguous_failure_is_read_back_and_left_to_the_sink_to_resend(
    platform: StandInPlatform, client: PlatformClient, eval_id: str, no_window: None
) -> None:
    writer = SampleWriter(client, eval_id)
    assert writer.append(rows(3, "a")).ok
    platform.fail("samples_append", 503)
    result = writer.append(rows(4, "b"))
    # Not stored, and not sent again by the writer: the sink's next delivery settles it.
    assert (
        result.transient
        and not result.permanent
        and set(result.failed) == {f"b{i}" for i in range(4)}
    )
    (sent,) = result.doubt
    assert sent.ids == tuple(f"b{i}" for i in range(4)) and sent.since == 3
    assert writer.settle(sent, None) == (set(), True)  # free: no attempt can still land
    assert writer.append(rows(4, "b")).ok
    assert stored_ids(platform, eval_id) == [f"a{i}" for i in range(3)] + [
        f"b{i}" for i in range(4)
    ]
    assert [r.status for r in platform.requests_for("samples_append")] == [200, 503, 200]


def test_reading_back_reads_only_the_rows_appended_since(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    writer = SampleWriter(client, eval_id)
    assert writer.append(rows(250, "old")).ok
    fresh = SampleWriter(client, eval_id)  # knows nothing yet: a worker joining late
    platform.fail("samples_append", 502, after_processing=True)
    before = len(platform.requests_for("samples_list"))
    assert fresh.append(rows(2, "new")).ok
    reads = platform.requests_for("samples_list")[before:]
    offsets = [(int(r.query["page"]) - 1) * int(r.query["limit"]) for r in reads]
    sizes = [int(r.query["limit"]) for r in reads]
    # The row count before the append (one row at most), then the two rows from 250 on.
    assert offsets == [0, 250] and sizes == [1, 2]
    assert len(platform.samples(eval_id)) == 252


def test_a_listing_not_in_append_order_is_read_whole(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    writer = SampleWriter(client, eval_id)
    assert writer.append(rows(120, "old")).ok
    # Newest first: the rows from position 120 on would be old ones, this writer's own.
    platform.fail("samples_append", 502, after_processing=True)
    platform.samples_order = "newest"
    result = writer.append(rows(2, "new"))
    assert result.ok and sorted(result.acked) == ["new0", "new1"]
    assert len(platform.samples(eval_id)) == 122  # found, not sent twice
    assert len(platform.requests_for("samples_append")) == 2


def test_unconfirmable_ambiguous_failure_is_not_resent(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    platform.fail("samples_append", 502, after_processing=True)
    platform.fail("samples_list", 500, times=2)  # the row count before, the read-back after
    result = SampleWriter(client, eval_id).append(rows(2))
    assert result.transient and set(result.failed) == {"s0", "s1"}
    assert "not resent" in result.failed["s0"]
    assert len(platform.samples(eval_id)) == 2  # landed once; never duplicated
    assert len(platform.requests_for("samples_append")) == 1


def test_429_is_replayed(platform: StandInPlatform, client: PlatformClient, eval_id: str) -> None:
    platform.fail("samples_append", 429, retry_after=2)
    assert SampleWriter(client, eval_id).append(rows(2)).ok
    assert stored_ids(platform, eval_id) == ["s0", "s1"]
    # Only the row count read before the append: nothing is read back.
    assert [r.query["limit"] for r in platform.requests_for("samples_list")] == ["1"]


def test_exhausted_429_is_transient(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    platform.fail("samples_append", 429, times=5)
    result = SampleWriter(client, eval_id).append(rows(2))
    assert result.transient and not result.permanent and set(result.failed) == {"s0", "s1"}
    assert len(platform.requests_for("samples_append")) == 5


@pytest.mark.parametrize("status", [400, 409, 413, 422])
def test_a_rejection_costs_only_its_batch(
    platform: StandInPlatform, client: PlatformClient, eval_id: str, status: int
) -> None:
    sent = rows(4)
    limit = ENVELOPE_BYTES + 2 * len(sent[0][1]) + 1
    platform.fail("samples_append", status)
    result = SampleWriter(client, eval_id, limit=limit).append(sent)
    assert result.rejected and not result.permanent and not result.transient
    assert set(result.failed) == {"s0", "s1"}
    assert str(status) in result.failed["s0"]
    assert result.acked == ["s2", "s3"]
    assert stored_ids(platform, eval_id) == ["s2", "s3"]


@pytest.mark.parametrize("status", [401, 402, 403, 404, 500])
def test_a_sink_wide_failure_stops_the_write(
    platform: StandInPlatform, client: PlatformClient, eval_id: str, status: int
) -> None:
    sent = rows(6)
    limit = ENVELOPE_BYTES + 2 * len(sent[0][1]) + 1
    platform.fail("samples_append", status)
    result = SampleWriter(client, eval_id, limit=limit).append(sent)
    assert result.permanent
    assert result.error is not None and result.error.status_code == status
    assert set(result.failed) == {f"s{i}" for i in range(6)}
    assert result.acked == []
    assert len(platform.requests_for("samples_append")) == 1


def test_a_row_too_large_alone_fails_locally_and_the_rest_go(
    platform: StandInPlatform, client: PlatformClient, eval_id: str
) -> None:
    sent = [row("s0"), row("huge", 200), row("s2")]
    result = SampleWriter(client, eval_id, limit=100).append(sent)
    assert result.rejected and set(result.failed) == {"huge"}
    assert "request limit" in result.failed["huge"]
    assert stored_ids(platform, eval_id) == ["s0", "s2"]

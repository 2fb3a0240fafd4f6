"""Prime Traces uploads against the stand-in, through the real prime-traces client."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prime_traces import TracesClient
from prime_traces.exceptions import (
    ForbiddenError,
    LineFormatConflictError,
    ValidationRejectedError,
)
from prime_traces.models import LineFormat

from prime_runs.testing import StandInPlatform

DATA = Path(__file__).resolve().parent.parent / "data"
RawUpload = Callable[..., httpx.Response]
CONTEXT = {"source": "prime-runs", "run_type": "eval"}


def _load(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for r in records
    )


def _trace(trace_id: str, start: float = 1795970000.0) -> dict[str, Any]:
    return {"id": trace_id, "timing": {"start": start}}


def test_trace_upload_stores_documents_and_answers_the_digest(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    records = _load("traces.jsonl")
    receipts = traces_client.upload_records(records, context=CONTEXT)
    digest = hashlib.sha256(_jsonl(records)).hexdigest()
    assert [(r.upload_id, r.status) for r in receipts] == [(digest, "committed")]
    assert prime_platform.receipts == [{"upload_id": digest, "status": "committed"}]
    assert prime_platform.traces == {r["id"]: r for r in records}
    assert set(prime_platform.trace_writes.values()) == {1}
    (request,) = prime_platform.requests_for("traces_upload")
    assert request.status == 201
    assert (request.line_format, request.idempotency_key) == ("trace", f"sha256:{digest}")
    assert request.gzip is True
    assert request.context == CONTEXT
    assert request.lines == records
    assert "x-prime-line-format" not in request.headers
    assert prime_platform.server_errors == []


def test_uncompressed_upload_is_accepted(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    traces_client.upload_records([_trace("t-1")], compress=False)
    assert prime_platform.requests_for("traces_upload")[0].gzip is False
    assert "t-1" in prime_platform.traces


def test_episode_upload_stores_envelope_with_member_ids(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    episodes = _load("episodes.jsonl")
    traces_client.upload_records(episodes, line_format=LineFormat.EPISODE)
    first = episodes[0]
    stored = prime_platform.episodes[first["id"]]
    assert stored["traces"] == [t["id"] for t in first["traces"]]
    assert stored["run"] == first["run"]
    member = first["traces"][0]
    assert prime_platform.traces[member["id"]] == member
    assert prime_platform.uploads[0]["episode_ids"] == [e["id"] for e in episodes]
    assert prime_platform.requests_for("traces_upload")[0].line_format == "episode"


def test_captured_wire_lines_upload_unchanged(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    path = DATA / "wire" / "episode_upload_user_sim.jsonl"
    traces_client.upload_file(path, line_format=LineFormat.EPISODE)
    (episode,) = _load("wire/episode_upload_user_sim.jsonl")
    assert prime_platform.episodes[episode["id"]]["env"] == episode["env"]
    assert all(t["id"] in prime_platform.traces for t in episode["traces"])


def test_empty_episode_is_valid(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    empty = {"id": "ep-empty", "traces": [], "errors": [{"type": "SandboxError"}]}
    traces_client.upload_records([empty], line_format=LineFormat.EPISODE)
    assert prime_platform.episodes["ep-empty"]["traces"] == []


def test_replay_of_a_committed_key_returns_the_receipt_without_storing(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    first = traces_client.upload_records([_trace("t-1"), _trace("t-2")])
    again = traces_client.upload_records([_trace("t-1"), _trace("t-2")])
    assert first == again
    assert prime_platform.trace_writes == {"t-1": 1, "t-2": 1}
    assert len(prime_platform.receipts) == 1
    statuses = [(r.status, r.replayed) for r in prime_platform.requests_for("traces_upload")]
    assert statuses == [(201, False), (200, True)]


def test_same_bytes_under_the_other_format_conflict(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    lines = [_jsonl([_trace("t-1")])]
    traces_client.upload_lines(lines)
    with pytest.raises(LineFormatConflictError) as caught:
        traces_client.upload_lines(lines, line_format=LineFormat.EPISODE)
    assert (caught.value.status_code, caught.value.code) == (409, "line_format_conflict")
    assert len(prime_platform.receipts) == 1


def test_a_trace_stored_again_by_new_bytes_counts_twice(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    traces_client.upload_records([_trace("t-1")])
    traces_client.upload_records([_trace("t-1"), _trace("t-2")])
    assert prime_platform.trace_writes == {"t-1": 2, "t-2": 1}


def test_digest_must_match_the_uncompressed_bytes(
    prime_platform: StandInPlatform, raw_upload: RawUpload
) -> None:
    data = _jsonl([_trace("t-1")])
    wrong = raw_upload(data, key="sha256:" + "0" * 64)
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (400, "digest_mismatch")
    compressed_ok = raw_upload(data, compress=True)
    assert compressed_ok.status_code == 201
    assert compressed_ok.json()["upload_id"] == hashlib.sha256(data).hexdigest()
    assert prime_platform.trace_writes == {"t-1": 1}


@pytest.mark.parametrize(
    "key", ["", "sha256:ABC", "md5:" + "0" * 64, "sha256:" + "A" * 64, "0" * 64]
)
def test_malformed_idempotency_keys_are_refused(
    prime_platform: StandInPlatform, raw_upload: RawUpload, key: str
) -> None:
    response = raw_upload(_jsonl([_trace("t-1")]), key=key)
    assert (response.status_code, response.json()["error"]["code"]) == (
        400,
        "invalid_idempotency_key",
    )
    assert prime_platform.traces == {}


@pytest.mark.parametrize(
    ("records", "line_format", "code"),
    [
        ([{"timing": {"start": 1.0}}], None, "invalid_trace"),
        ([{"id": "", "timing": {"start": 1.0}}], None, "invalid_trace"),
        ([{"id": "t", "timing": {"start": "soon"}}], None, "invalid_trace"),
        ([{"id": "t"}], None, "invalid_trace"),
        ([{"id": "t", "timing": {"start": True}}], None, "invalid_trace"),
        ([_trace("a"), _trace("a")], None, "duplicate_trace_id"),
        ([{"id": "ep", "traces": [_trace("a")]}], None, "line_format_mismatch"),
        ([_trace("a")], "episode", "line_format_mismatch"),
        ([{"id": "ep", "traces": {"a": 1}}], "episode", "invalid_trace"),
        ([{"id": "ep", "traces": [{"id": "a"}]}], "episode", "invalid_trace"),
        ([{"id": "ep", "traces": [_trace("a"), _trace("a")]}], "episode", "duplicate_trace_id"),
        (
            [{"id": "ep", "traces": [_trace("a")]}, {"id": "ep", "traces": [_trace("b")]}],
            "episode",
            "duplicate_episode_id",
        ),
    ],
)
def test_invalid_lines_reject_the_whole_upload(
    prime_platform: StandInPlatform,
    raw_upload: RawUpload,
    records: list[dict[str, Any]],
    line_format: str | None,
    code: str,
) -> None:
    # A valid first line proves the request is all-or-nothing.
    prefix = [_trace("ok-1")] if line_format is None else [{"id": "ep-ok", "traces": []}]
    response = raw_upload(_jsonl(prefix + records), line_format=line_format)
    assert (response.status_code, response.json()["error"]["code"]) == (400, code)
    assert prime_platform.traces == {}
    assert prime_platform.episodes == {}
    assert prime_platform.receipts == []
    assert prime_platform.requests_for("traces_upload")[0].error_code == code


def test_non_json_and_non_finite_lines_are_refused(
    prime_platform: StandInPlatform, raw_upload: RawUpload
) -> None:
    not_json = raw_upload(b"{nope\n")
    assert not_json.json()["error"]["code"] == "invalid_trace"
    nan = raw_upload(b'{"id":"t","timing":{"start":NaN}}\n')
    assert nan.json()["error"]["code"] == "invalid_trace"
    latin1 = raw_upload(b'{"id":"\xe9","timing":{"start":1}}\n')
    assert latin1.json()["error"]["code"] == "malformed_encoding"


def test_metadata_part_is_checked(raw_upload: RawUpload) -> None:
    data = _jsonl([_trace("t")])
    version = raw_upload(data, metadata={"schema_version": 2})
    assert version.json()["error"]["code"] == "unsupported_schema_version"
    context = raw_upload(data, metadata={"schema_version": 1, "context": {"n": 1}})
    assert context.json()["error"]["code"] == "invalid_metadata"
    shape = raw_upload(data, metadata=[1])
    assert shape.json()["error"]["code"] == "invalid_metadata"


def test_blank_lines_are_skipped(prime_platform: StandInPlatform, raw_upload: RawUpload) -> None:
    response = raw_upload(b"\n" + _jsonl([_trace("t")]) + b"   \n")
    assert response.status_code == 201
    assert list(prime_platform.traces) == ["t"]


def test_time_window_is_off_by_default(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    old = time.time() - 400 * 24 * 3600
    traces_client.upload_records([_trace("old", start=old)])
    assert "old" in prime_platform.traces


def test_time_window_can_be_enforced(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    prime_platform.check_time_window = True
    now = time.time()
    for start in (now - 400 * 24 * 3600, now + 3600):
        with pytest.raises(ValidationRejectedError) as caught:
            traces_client.upload_records([_trace("t", start=start)])
        assert caught.value.code == "created_at_out_of_window"
    traces_client.upload_records([_trace("fresh", start=now - 60)])
    assert list(prime_platform.traces) == ["fresh"]


def test_reject_hook_refuses_uploads_naming_an_id(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    prime_platform.reject_trace_ids({"bad"}, code="invalid_trace")
    with pytest.raises(ValidationRejectedError) as caught:
        traces_client.upload_records([_trace("good"), _trace("bad")])
    assert caught.value.code == "invalid_trace"
    assert prime_platform.traces == {}
    traces_client.upload_records([_trace("good")])
    assert list(prime_platform.traces) == ["good"]


def test_reject_hook_matches_episode_and_member_ids(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    prime_platform.reject_trace_ids(["ep-bad", "member-bad"], code="too_many_traces_in_episode")
    for episode in (
        {"id": "ep-bad", "traces": []},
        {"id": "ep-ok", "traces": [_trace("member-bad")]},
    ):
        with pytest.raises(ValidationRejectedError) as caught:
            traces_client.upload_records([episode], line_format=LineFormat.EPISODE)
        assert caught.value.code == "too_many_traces_in_episode"
    prime_platform.clear_rejections()
    traces_client.upload_records([{"id": "ep-bad", "traces": []}], line_format=LineFormat.EPISODE)
    assert list(prime_platform.episodes) == ["ep-bad"]


@pytest.mark.parametrize("mode", ["service_not_enabled", "forbidden"])
def test_traces_modes_answer_403_with_their_code(mode: str) -> None:
    with StandInPlatform(traces=mode) as platform:
        client = TracesClient(api_key=platform.api_key, base_url=platform.base_url, team_id="")
        with pytest.raises(ForbiddenError) as caught:
            client.upload_records([_trace("t")])
        assert (caught.value.status_code, caught.value.code) == (403, mode)
        assert platform.traces == {}
        # The platform API is unaffected.
        platform.traces_mode = "enabled"
        client.upload_records([_trace("t")])
        assert "t" in platform.traces


def test_read_routes_return_raw_documents(
    prime_platform: StandInPlatform, traces_client: TracesClient
) -> None:
    episode = {"id": "ep", "env": {"id": "e"}, "traces": [_trace("t")]}
    traces_client.upload_records([episode], line_format=LineFormat.EPISODE)
    api = traces_client.client
    assert api.get_json("/traces/t") == _trace("t")
    assert api.get_json("/episodes/ep") == {"id": "ep", "env": {"id": "e"}, "traces": ["t"]}
    response = api.client.get(f"{prime_platform.base_url}/api/v1/traces/missing")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "trace_not_found")


def test_team_header_is_recorded(prime_platform: StandInPlatform) -> None:
    client = TracesClient(
        api_key=prime_platform.api_key, base_url=prime_platform.base_url, team_id="team_1"
    )
    client.upload_records([_trace("t")])
    assert prime_platform.requests[0].headers["x-prime-team-id"] == "team_1"


def test_keep_documents_off_keeps_ids_only() -> None:
    with StandInPlatform(keep_documents=False) as platform:
        client = TracesClient(api_key=platform.api_key, base_url=platform.base_url, team_id="")
        client.upload_records(
            [{"id": "ep", "env": {"id": "e"}, "traces": [_trace("t")]}],
            line_format=LineFormat.EPISODE,
        )
        assert platform.traces == {"t": {"id": "t"}}
        assert platform.episodes == {"ep": {"id": "ep", "traces": ["t"]}}
        assert platform.trace_writes == {"t": 1}
        assert platform.requests[0].lines == []

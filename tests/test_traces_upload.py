"""The project's own Prime Traces request (contract §8), over real HTTP on 127.0.0.1: the
stand-in stores what it sends; errors come back as prime-traces' typed exceptions."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket

import pytest
from prime_traces import exceptions as pt_errors

from _support import load_jsonl
from prime_runs.platform._traces import UploadClient, compress_body
from prime_runs.testing import StandInPlatform

TRACES = load_jsonl("traces.jsonl")[:2]
LINES = [json.dumps(t, separators=(",", ":")).encode() for t in TRACES]


def _client(url: str, key: str, team: str | None = "team-9") -> UploadClient:
    return UploadClient(
        api_key=key,
        base_url=url,
        team_id=team,
        user_agent="prime-runs-test",
        transport=None,
        gzip_level=1,
        connect_timeout=2.0,
    )


def _parts() -> list[bytes]:
    return [part for line in LINES for part in (line, b"\n")]


def _key() -> str:
    return "sha256:" + hashlib.sha256(b"".join(_parts())).hexdigest()


def test_a_batch_is_stored_with_the_contracts_headers_and_parts(
    prime_platform: StandInPlatform,
) -> None:
    key = prime_platform.api_key
    client = _client(prime_platform.base_url + "/api/v1/", key)  # the API prefix is not doubled
    try:
        receipt = client.upload_batch(_parts(), _key(), context={"source": "prime-runs"})
    finally:
        client.close()
    assert receipt["status"] == "committed" and key not in repr(client)
    (request,) = prime_platform.requests_for("traces_upload")
    assert request.path == "/api/v1/traces" and request.status in (200, 201)
    assert request.idempotency_key == _key() and request.gzip
    assert request.headers["authorization"] == f"Bearer {key}"
    assert request.headers["x-prime-team-id"] == "team-9"
    assert "x-prime-line-format" not in request.headers  # a trace batch sends none
    assert request.context == {"source": "prime-runs"}
    assert [line["id"] for line in request.lines] == [t["id"] for t in TRACES]


def test_the_gzip_member_of_the_parts_is_the_joined_lines() -> None:
    member = compress_body(_parts(), 1)
    assert gzip.decompress(member) == b"".join(_parts())
    assert member == compress_body(_parts(), 1)  # a retry sends the same bytes


def test_a_refused_key_is_the_typed_error_and_nothing_is_stored(
    prime_platform: StandInPlatform,
) -> None:
    client = _client(prime_platform.base_url, key="wrong-key")
    try:
        with pytest.raises(pt_errors.UnauthorizedError) as raised:
            client.upload_batch(_parts(), _key())
    finally:
        client.close()
    assert "wrong-key" not in str(raised.value)
    assert prime_platform.receipts == []


def test_no_key_is_refused_before_any_request(prime_platform: StandInPlatform) -> None:
    client = _client(prime_platform.base_url, key="")
    try:
        with pytest.raises(pt_errors.APIError, match="No API key"):
            client.upload_batch(_parts(), _key())
    finally:
        client.close()
    assert prime_platform.requests_for("traces_upload") == []


def test_a_refused_connection_is_a_transport_error_and_a_stall_a_timeout(
    prime_platform: StandInPlatform,
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nothing listens here once closed
    client = _client(f"http://127.0.0.1:{port}", prime_platform.api_key)
    try:
        with pytest.raises(pt_errors.TransportError, match="POST"):
            client.upload_batch(_parts(), _key())
    finally:
        client.close()
    prime_platform.stall("traces_upload", 5)
    client = _client(prime_platform.base_url, prime_platform.api_key)
    try:
        with pytest.raises(pt_errors.APITimeoutError):
            client.upload_batch(_parts(), _key(), timeout=0.5)
    finally:
        prime_platform.unstall()
        client.close()

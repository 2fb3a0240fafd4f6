"""A request body kept as its parts goes out over real HTTP on 127.0.0.1 unjoined: framed
by its declared length (not chunked), slice by slice, and whole again on a retry."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from prime_runs.platform._bodies import SLICE, Body
from prime_runs.platform._http import PlatformClient
from prime_runs.settings import Settings


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[dict[str, str], bytes]]
    statuses: list[int]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "-1"))
        body = self.rfile.read(length) if length >= 0 else b""
        self.seen.append((dict(self.headers.items()), body))
        status = self.statuses.pop(0) if self.statuses else 200
        payload = b"{}"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type("Handler", (_Recorder,), {"seen": [], "statuses": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _client(base_url: str) -> PlatformClient:
    settings = Settings(
        api_key="pk-bodies-secret-0123",
        team_id=None,
        base_url=base_url,
        traces_url=base_url,
        frontend_url=base_url,
        mode="online",
    )
    return PlatformClient(settings, sleep=lambda _: None)


def test_slices_never_exceed_the_slice_size_and_rebuild_the_parts() -> None:
    big = bytes(range(256)) * (3 * SLICE // 256 + 7)
    body = Body([b"{", memoryview(big), b"}"])
    pieces = list(body)
    assert max(map(len, pieces)) <= SLICE
    assert len(pieces) == 2 + -(-len(big) // SLICE)
    assert b"".join(pieces) == b"{" + big + b"}" == bytes(body)
    assert len(body) == len(big) + 2
    assert list(body) == pieces  # iterable again, as a retry needs


def test_small_parts_go_out_joined_into_pieces_of_at_most_a_slice() -> None:
    rows = [b'{"row":"' + bytes([97 + i % 26]) * 11_000 + b'"}' for i in range(300)]
    parts: list[bytes] = [b'{"samples":[']
    for row in rows:
        parts += (row, b",")
    parts[-1] = b"]}"
    pieces = list(Body(parts))
    assert b"".join(pieces) == b"".join(parts)
    assert max(map(len, pieces)) <= SLICE
    # One write per slice of the body, not one per part (601 parts).
    assert len(pieces) <= -(-len(b"".join(parts)) // (SLICE - 11_100)) + 1


def test_a_body_of_parts_is_sent_by_length_and_whole_on_every_attempt(
    server: tuple[str, type[_Recorder]],
) -> None:
    base_url, handler = server
    handler.statuses.append(429)  # the first attempt is refused; the retry sends it all again
    big = b'"' + b"x" * (2 * SLICE + 123) + b'"'
    body = Body([b'{"samples":[{"a":', memoryview(big), b"}]}"])
    client = _client(base_url)
    try:
        client.request("POST", "/evaluations/e/samples", content=body, idempotent=False)
    finally:
        client.close()

    assert len(handler.seen) == 2
    for headers, received in handler.seen:
        assert received == bytes(body)
        assert headers["Content-Length"] == str(len(body))
        assert "Transfer-Encoding" not in headers
        assert headers["Content-Type"] == "application/json"

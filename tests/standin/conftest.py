"""Shared helpers for the stand-in tests: a real prime-traces client and raw uploads."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prime_traces import TracesClient

from prime_runs.testing import StandInPlatform

RawUpload = Callable[..., httpx.Response]


@pytest.fixture
def traces_client(prime_platform: StandInPlatform) -> Iterator[TracesClient]:
    """The client prime-runs uses for uploads, pointed at the stand-in (no team header)."""
    client = TracesClient(
        api_key=prime_platform.api_key, base_url=prime_platform.base_url, team_id=""
    )
    yield client
    client.client.close()


def _key_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def raw_upload(prime_platform: StandInPlatform) -> Iterator[RawUpload]:
    """POST a hand-built multipart upload, for cases the real client never sends."""
    client = httpx.Client(
        base_url=prime_platform.base_url,
        headers={"Authorization": f"Bearer {prime_platform.api_key}"},
    )

    def upload(
        data: bytes,
        *,
        key: str | None = None,
        line_format: str | None = None,
        metadata: Any = None,
        compress: bool = False,
    ) -> httpx.Response:
        headers = {"Idempotency-Key": key if key is not None else _key_of(data)}
        if line_format is not None:
            headers["X-Prime-Line-Format"] = line_format
        meta = {"schema_version": 1} if metadata is None else metadata
        part: tuple[Any, ...] = ("traces.jsonl", data, "application/x-ndjson")
        if compress:
            part = (*part[:1], gzip.compress(data), part[2], {"Content-Encoding": "gzip"})
        files = {"metadata": (None, json.dumps(meta).encode(), "application/json"), "traces": part}
        return client.post("/api/v1/traces", headers=headers, files=files)

    yield upload
    client.close()

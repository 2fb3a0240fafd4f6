"""prime-traces' private upload helpers that the traces sink calls, pinned by name and shape.

``UploadClient.upload_batch`` reuses private methods of prime-traces' client, so the
dependency is bounded to the releases tested here. A release that renames or reshapes one
fails this test with the method's name, before any upload can fail in the field.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import httpx

import prime_runs.platform._traces as pt_client

ROOT = Path(__file__).resolve().parents[1]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_every_private_method_the_sink_calls_is_still_there_with_the_same_shape() -> None:
    problems = pt_client.private_api_problems()
    version = importlib.metadata.version("prime-traces")
    assert not problems, (
        f"prime-traces {version} changed private methods prime_runs.platform._traces "
        "relies on: " + "; ".join(problems)
    )


def test_a_changed_or_missing_method_is_reported_by_name() -> None:
    class Reshaped(pt_client.TracesAPIClient):  # what a future release might look like
        def _multipart_files(self, body, metadata):  # type: ignore[override]
            return {}

        _upload_result = None  # type: ignore[assignment]

    problems = pt_client.private_api_problems(Reshaped)
    assert len(problems) == 2, problems
    assert any("_multipart_files now takes (self, body, metadata)" in p for p in problems)
    assert any("_upload_result is gone" in p for p in problems)


def test_the_client_keeps_its_httpx_pool_attribute() -> None:
    client = pt_client.new_client(
        api_key="k",
        base_url="http://127.0.0.1:9",
        team_id=None,
        user_agent="test",
        transport=None,
        gzip_level=1,
        connect_timeout=1.0,
    )
    try:
        assert isinstance(client.client, httpx.Client), "TracesAPIClient.client is no httpx pool"
    finally:
        client.close()


def test_the_dependency_is_bounded_to_the_installed_release() -> None:
    """pyproject.toml allows only releases these tests ran against (the installed one)."""
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    found = re.search(r'"prime-traces(?P<spec>[^";]*)"', text)
    assert found, "pyproject.toml declares no prime-traces dependency"
    clauses = dict(re.findall(r"(>=|<)\s*([0-9.]+)", found["spec"]))
    assert set(clauses) == {">=", "<"}, f"prime-traces must be bounded: {found['spec']!r}"
    installed = _version(importlib.metadata.version("prime-traces"))
    assert _version(clauses[">="]) <= installed < _version(clauses["<"]), (
        f"installed prime-traces {installed} is outside {found['spec']!r}: run the tests "
        "against it and move the bound"
    )


def test_the_multipart_parts_do_not_read_the_body_when_it_is_compressed() -> None:
    # upload_batch hands the lines over unjoined when it compresses (the body is hashed and
    # gzipped from them, never joined): the helper must take the gzip member alone.
    client = pt_client.TracesAPIClient(api_key="k", base_url="http://127.0.0.1:9")
    try:
        files = client._multipart_files(
            [b"unjoined", b"\n"], schema_version=1, context=None, compressed=b"gzip member"
        )
    finally:
        client.close()
    assert files["traces"][1] == b"gzip member"

"""Shared fixtures: fixture records, an isolated environment, span capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

DATA = Path(__file__).parent / "data"


def load_jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


@pytest.fixture
def episodes() -> list[dict]:
    return load_jsonl("episodes.jsonl")


@pytest.fixture
def traces_records() -> list[dict]:
    return load_jsonl("traces.jsonl")


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No developer settings leak in: no key, no config file, archive under tmp."""
    for name in (
        "PRIME_API_KEY",
        "PRIME_TEAM_ID",
        "PRIME_API_BASE_URL",
        "PRIME_BASE_URL",
        "PRIME_TRACES_URL",
        "PRIME_FRONTEND_URL",
        "PRIME_RUNS_MODE",
        "TRACEPARENT",
        "BAGGAGE",
    ):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "archive"
    monkeypatch.setenv("PRIME_RUNS_DIR", str(root))
    return root


@pytest.fixture
def span_capture() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A user's own provider with an in-memory exporter, as an existing OTel setup would have."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter

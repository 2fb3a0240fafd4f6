"""Shared fixtures: fixture records, an isolated environment, span capture."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _support import load_jsonl
from prime_runs.settings import ENV_VARIABLES


@pytest.fixture
def episodes() -> list[dict]:
    return load_jsonl("episodes.jsonl")


@pytest.fixture
def burst(episodes: list[dict]) -> Callable[[int], list[dict]]:
    """``burst(n)``: n episodes made from the fixtures, each with ids of its own."""

    def make(n: int) -> list[dict]:
        out = []
        for i in range(n):
            record = copy.deepcopy(episodes[i % len(episodes)])
            record["id"] = f"b{i}-{record['id']}"
            for member in record.get("traces", []):
                member["id"] = f"b{i}-{member['id']}"
            out.append(record)
        return out

    return make


@pytest.fixture
def traces_records() -> list[dict]:
    return load_jsonl("traces.jsonl")


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No developer settings leak in: no key, no config file, archive under tmp."""
    for name in ENV_VARIABLES:
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

"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_runs._encode import encode
from prime_runs.exporters._base import Item

DATA = Path(__file__).parent / "data"


def load_jsonl(name: str) -> list[dict[str, Any]]:
    """A fixture file of tests/data as a list of records."""
    return [json.loads(line) for line in (DATA / name).read_text("utf-8").splitlines() if line]


def items(records: list[dict[str, Any]], run_id: str) -> list[Item]:
    """Records encoded for ``run_id`` as the sinks receive them (no journal key)."""
    out = []
    for record in records:
        e = encode(record, run_id, "eval")
        out.append(Item(e.kind, e.data, None, e.problem, record.get("id")))
    return out

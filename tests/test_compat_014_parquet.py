"""The training viewer's Parquet table that 0.1.4's ``prime_runs.projection`` wrote
(``episodes_to_parquet_bytes``, ``train_sample_schema``, ``parquet_available``), read back
with pyarrow; and what a caller gets without pyarrow."""

from __future__ import annotations

import builtins
import io
import json
import math
from typing import Any

import pytest

from _compat_014 import episode, trace
from prime_runs import projection
from prime_runs.projection import (
    episodes_to_parquet_bytes,
    parquet_available,
    train_sample_schema,
)

COLUMNS = [
    "run_id",
    "step",
    "tag",
    "problem_id",
    "sample_id",
    "prompt",
    "completion",
    "trajectory",
    "answer",
    "env_name",
    "task",
    "info",
    "reward",
    "advantage",
    "metrics",
    "timing",
    "num_input_tokens",
    "num_output_tokens",
    "created_at",
]


def _table(payload: bytes | None) -> list[dict[str, Any]]:
    pq = pytest.importorskip("pyarrow.parquet")
    assert payload is not None
    return pq.read_table(io.BytesIO(payload)).to_pylist()


def _strict(text: str) -> Any:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in a JSON column"))


def _train_episode(episode_id: str, idx: Any, reward: float, advantage: float | None) -> Any:
    info = {} if advantage is None else {"advantage": advantage}
    ep = episode(episode_id, trace(f"{episode_id}-t", idx=idx, reward=reward, info=info))
    ep.env.id = "gsm8k"
    return ep


def test_the_viewer_table_has_014s_columns_and_one_row_per_episode() -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    episodes = [_train_episode("e1", 3, 1.0, 0.25), _train_episode("e2", 4, 0.0, -0.25)]

    payload = episodes_to_parquet_bytes(episodes, "run-abc", 10)

    assert parquet_available()
    schema = train_sample_schema()
    assert schema.names == COLUMNS
    assert schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert pq.read_schema(io.BytesIO(payload)).equals(schema)
    rows = _table(payload)
    picked = ["run_id", "step", "problem_id", "sample_id", "reward", "advantage", "env_name"]
    assert [[row[k] for k in picked] for row in rows] == [
        ["run-abc", 10, 3, 0, 1.0, 0.25, "gsm8k"],
        ["run-abc", 10, 4, 1, 0.0, -0.25, "gsm8k"],
    ]
    first = rows[0]
    assert (first["tag"], first["prompt"], first["answer"]) == ("", "", "")
    assert (first["num_input_tokens"], first["num_output_tokens"]) == (10, 5)
    assert _strict(first["trajectory"]) == [
        {
            "messages": [{"role": "assistant", "content": "branch 0"}],
            "num_input_tokens": 10,
            "num_output_tokens": 5,
            "advantage": 0.25,  # the trainer's advantage rides on every branch
        }
    ]
    assert _strict(first["completion"]) == [{"role": "assistant", "content": "branch 0"}]
    assert _strict(first["task"]) == {"idx": 3, "answer": "42"}
    info = _strict(first["info"])
    assert (info["native_wrapper"]["id"], info["native_trace_index"]) == ("e1", 0)
    assert first["created_at"].tzinfo is not None


def test_sample_ids_count_from_the_offset_and_problem_ids_fall_back_to_them() -> None:
    pytest.importorskip("pyarrow")
    episodes = [_train_episode("e1", 3, 1.0, None), _train_episode("e2", "not-an-int", 1.0, None)]

    rows = _table(episodes_to_parquet_bytes(episodes, "run-abc", 10, sample_id_offset=7))

    assert [(r["sample_id"], r["problem_id"], r["advantage"]) for r in rows] == [
        (7, 3, None),
        (8, 8, None),
    ]


def test_non_finite_numbers_are_null_in_json_columns_and_kept_in_float_columns() -> None:
    pytest.importorskip("pyarrow")
    ep = _train_episode("e1", 0, 1.0, float("inf"))
    ep.traces[0].metrics["kl"] = float("nan")

    (row,) = _table(episodes_to_parquet_bytes([ep], "run-abc", 10))

    assert _strict(row["metrics"]) == {"kl": None}
    assert _strict(row["trajectory"])[-1]["advantage"] is None
    assert math.isinf(row["advantage"])


def test_nothing_with_a_trajectory_gives_no_table() -> None:
    pytest.importorskip("pyarrow")
    no_branches = episode("e", trace(branches=0))
    assert episodes_to_parquet_bytes([no_branches, episode("empty")], "run-abc", 10) is None
    assert episodes_to_parquet_bytes([], "run-abc", 10) is None


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((None, 1), {}, "run_id must be a str, got NoneType"),
        (("run", "1"), {}, "step must be an int, got str"),
        (("run", True), {}, "step must be an int, got bool"),
        (("run", 1), {"sample_id_offset": 1.5}, "sample_id_offset must be an int, got float"),
    ],
)
def test_bad_arguments_are_named(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        episodes_to_parquet_bytes([], *args, **kwargs)


def test_without_pyarrow_the_table_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)

    assert projection.parquet_available() is False
    with pytest.raises(ImportError, match=r"pip install 'prime-runs\[train\]'"):
        episodes_to_parquet_bytes([_train_episode("e1", 0, 1.0, None)], "run-abc", 10)
    with pytest.raises(ImportError, match="needs pyarrow"):
        train_sample_schema()


def test_the_live_sinks_object_is_the_table_014_writes() -> None:
    # The training sink (live and sync) and 0.1.4's public encoder write the same rows,
    # down to the text of the JSON columns (0.1.4's `json.dumps`: spaces after separators,
    # non-ASCII escaped), so the viewer reads the same bytes from either version.
    pytest.importorskip("pyarrow")
    from _support import load_jsonl
    from prime_runs.exporters.train_samples import encode_step

    records = load_jsonl("train_episodes.jsonl")[:2]
    ours = _table(encode_step(records, "run-abc", 40, 5))
    theirs = _table(episodes_to_parquet_bytes(records, "run-abc", 40, sample_id_offset=5))

    for row in (*ours, *theirs):
        row.pop("created_at")
    assert ours == theirs and len(ours) == 2
    for column in ("completion", "trajectory", "task", "info", "metrics", "timing"):
        text = ours[0][column]
        assert text == json.dumps(json.loads(text)), column
    assert "\\u2014" in ours[0]["completion"] + ours[1]["completion"]  # an em dash, escaped

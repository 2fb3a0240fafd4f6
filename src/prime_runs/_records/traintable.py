"""The training viewer's Parquet table (one training step's rows), behind
``prime_runs.projection.episodes_to_parquet_bytes``: the v0 rows plus the columns only a
training run has. pyarrow is optional (the ``train`` extra), so it is imported only here and
only when a table is written.

The columns and their meaning are prime-runs 0.1.4's, so the viewer reads our tables as it
read 0.1.4's. JSON columns are compact strict JSON (non-finite numbers as ``null``); the float
columns keep what the row has.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import prime_runs._records.access as _records
from prime_runs._records.jsonio import encode_json, sanitize_nonfinite

_INSTALL_HINT = "pip install 'prime-runs[train]'"


def available() -> bool:
    try:
        _pyarrow()
    except ImportError:
        return False
    return True


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # binds pyarrow.parquet, used by encode()
    except ImportError as error:
        raise ImportError(
            f"the training sample table needs pyarrow, which is not installed: {_INSTALL_HINT}"
        ) from error
    return pyarrow


def schema() -> Any:
    pa = _pyarrow()
    return pa.schema(
        [
            ("run_id", pa.string()),
            ("step", pa.int64()),
            ("tag", pa.string()),
            ("problem_id", pa.int64()),
            ("sample_id", pa.int64()),
            ("prompt", pa.string()),
            ("completion", pa.string()),
            ("trajectory", pa.string()),
            ("answer", pa.string()),
            ("env_name", pa.string()),
            ("task", pa.string()),
            ("info", pa.string()),
            ("reward", pa.float64()),
            ("advantage", pa.float64()),
            ("metrics", pa.string()),
            ("timing", pa.string()),
            ("num_input_tokens", pa.int64()),
            ("num_output_tokens", pa.int64()),
            ("created_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def check_arguments(run_id: Any, step: Any, sample_id_offset: Any) -> None:
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str, got {type(run_id).__name__}")
    for name, value in (("step", step), ("sample_id_offset", sample_id_offset)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")


def encode(
    episodes: Sequence[Any], samples: Sequence[Any], run_id: str, step: int, offset: int
) -> bytes | None:
    """The Parquet bytes of ``samples`` (``build_samples(episodes)``), or ``None`` when no
    sample has a trajectory."""
    return encode_rows(episodes, samples, run_id, step, offset)[0]


def encode_rows(
    episodes: Sequence[Any], samples: Sequence[Any], run_id: str, step: int, offset: int
) -> tuple[bytes | None, set[Any]]:
    """:func:`encode`, and the ids of the episodes that have a row in it: a sample without
    a trajectory (an episode that never produced a message) has none."""
    pa = _pyarrow()
    extras = _training_columns(episodes)
    now = datetime.now(timezone.utc)
    rows = []
    rowed: set[Any] = set()
    for sample_id, sample in enumerate(samples, start=offset):
        if not isinstance(sample, dict) or not sample.get("trajectory"):
            continue  # nothing to show: no conversation
        advantage, env_name = extras.get(sample.get("episode_id"), (None, ""))
        rows.append(_row(sample, sample_id, advantage, env_name, run_id, step, now))
        rowed.add(sample.get("episode_id"))
    if not rows:
        return None, rowed
    table = pa.Table.from_pylist(rows, schema=schema())
    buffer = io.BytesIO()
    pa.parquet.write_table(
        table, buffer, compression="snappy", use_dictionary=True, write_statistics=True
    )
    return buffer.getvalue(), rowed


def _training_columns(episodes: Sequence[Any]) -> dict[Any, tuple[Any, str]]:
    """``{episode id: (advantage, env name)}``: the summary trace's ``info.advantage`` (set
    by the trainer) and the episode's ``env.id``."""
    columns: dict[Any, tuple[Any, str]] = {}
    for episode in episodes:
        traces = _records.traces_of(episode) if _records.is_episode(episode) else ()
        if not traces:
            continue
        summary = traces[_records.summary_trace_index(traces)]
        info = _records.field(summary, "info") or {}
        env_id = _records.field(_records.field(episode, "env"), "id")
        columns[_records.field(episode, "id")] = (info.get("advantage"), str(env_id or ""))
    return columns


def _row(
    sample: dict[str, Any],
    sample_id: int,
    advantage: Any,
    env_name: str,
    run_id: str,
    step: int,
    now: datetime,
) -> dict[str, Any]:
    # The trainer's advantage rides on every branch, as the viewer expects.
    trajectory = [{**branch, "advantage": advantage} for branch in sample["trajectory"]]
    return {
        "run_id": run_id,
        "step": step,
        "tag": "",
        "problem_id": _problem_id(sample.get("example_id"), sample_id),
        "sample_id": sample_id,
        "prompt": "",
        "completion": _json_column(sample.get("completion")),
        "trajectory": _json_column(trajectory),
        "answer": "",
        "env_name": env_name,
        "task": _json_column(sample.get("task")),
        "info": _json_column(sample.get("info")),
        "reward": sample.get("reward"),
        "advantage": advantage,
        "metrics": _json_column(sample.get("metrics")),
        "timing": _json_column(sample.get("timing")),
        "num_input_tokens": trajectory[-1].get("num_input_tokens"),
        "num_output_tokens": trajectory[-1].get("num_output_tokens"),
        "created_at": now,
    }


def _problem_id(example_id: Any, sample_id: int) -> int:
    """The example's integer idx; the row's sample id when it has none (or not an integer)."""
    try:
        return int(example_id) if example_id is not None else sample_id
    except (TypeError, ValueError):
        return sample_id


def _json_column(value: Any) -> str:
    # The text 0.1.4 writes (the standard library's default separators, ASCII escapes), so
    # the viewer reads the same bytes from either version; a value only orjson can encode
    # (numpy, dataclasses) still goes through it.
    clean = sanitize_nonfinite(value)
    try:
        return json.dumps(clean, allow_nan=False)
    except (TypeError, ValueError):
        return encode_json(clean).decode("utf-8")

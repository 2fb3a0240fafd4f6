"""A record logged under a run's local id is stored under the platform's with its stamps
changed and nothing else (issue 30): ``run.id`` and ``run.type`` of the envelope and of each
member trace (contract §10.2). A producer may read the local id (``pr.current_run().id``)
and quote it anywhere: a value, a list item, a key, a nested member's field, inside a longer
or escaped string, a prompt. Live (a raw ``run`` span whose evaluation is created while
records are logged) and in ``prime-runs sync`` (an offline run), under and over 4 MiB.

Real components: the stand-in platform over HTTP with a stalled create, a real provider and
processor, the CLI as its own process; what is compared is what the stand-in stored.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
import prime_runs._journal.ledger as _ledger
from _otel import platform_id
from _support import archive_root, run_cli
from prime_runs import semconv
from prime_runs.projection import build_samples
from prime_runs.testing import StandInPlatform

RUN_ATTRS = {semconv.RUN_NAME: "stamp-only", semconv.RUN_ENVIRONMENTS: ["gsm8k"]}
LARGE = 5 * 1024 * 1024  # over the 4 MiB above which a record is read without its strings


def quoting(record: dict[str, Any], run_id: str, tag: str) -> dict[str, Any]:
    """``record`` (a fixture episode) with ids of its own and ``run_id`` quoted all over."""
    record = copy.deepcopy(record)
    record["id"] = f"{tag}-{record['id']}"
    record["info"] = {
        "ref": run_id,
        "list": [run_id, "x", [run_id]],
        run_id: "a key",
        "nested": {"deep": [{"id": run_id, "run": {"id": run_id}}]},
        "text": f'the run {run_id} said "{run_id}"',
        "escaped": f'\\"{run_id}\\" and \\\\"{run_id}',
        "exact_json": json.dumps({"run": {"id": run_id}}),
    }
    for n, member in enumerate(record["traces"]):
        member["id"] = f"{tag}-{n}-{member['id']}"
        member["info"] = {**(member.get("info") or {}), "ref": run_id, "ids": {run_id: [run_id]}}
        member["run"] = {"name": run_id, "work": {"type": "eval", "step": 0, "of": run_id}}
        messages = member["nodes"][-1]["message"]
        messages["content"] = f"{messages.get('content') or ''} (run {run_id})"
    return record


def stamped(record: dict[str, Any], run_id: str) -> dict[str, Any]:
    """``record`` as the platform must store it: its stamps set to ``run_id``, nothing else."""
    out = copy.deepcopy(record)
    out["run"] = {**(record.get("run") or {}), "id": run_id, "type": "eval"}
    for member in out["traces"]:
        member["run"] = (
            {**member["run"], "id": run_id, "type": "eval"} if "run" in member else out["run"]
        )
    return out


def assert_stored_exactly(
    platform: StandInPlatform, eval_id: str, records: list[dict[str, Any]]
) -> None:
    """Prime Traces documents and v0 sample rows are the records with their stamps set."""
    expected = [stamped(record, eval_id) for record in records]
    for record in expected:
        envelope = {k: v for k, v in record.items() if k != "traces"}
        envelope["traces"] = [member["id"] for member in record["traces"]]
        assert platform.episodes[record["id"]] == envelope
        for member in record["traces"]:
            assert platform.traces[member["id"]] == member
    rows = {row["episode_id"]: row for row in platform.samples(eval_id)}
    assert len(rows) == len(records)
    for row in build_samples(expected):
        stored = rows[row["episode_id"]]
        assert {**stored, "rollout_number": 0} == {**row, "rollout_number": 0}


@pytest.mark.parametrize("held", [True, False], ids=["held", "read-back"])
def test_a_raw_run_spans_records_logged_while_it_registers_keep_their_content(
    prime_env: StandInPlatform,
    episodes: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    held: bool,
) -> None:
    if not held:  # every record held as its journal key only, and read back to be sent
        monkeypatch.setattr(_ledger, "MAX_HELD_ITEMS_JOURNALED", 0)
    provider = TracerProvider()
    pr.configure_exporter(provider)
    tracer = provider.get_tracer("app")
    prime_env.stall("eval_create", 3.0)
    try:
        run_span = tracer.start_span("run", attributes=RUN_ATTRS)
        with trace.use_span(run_span):
            run = pr.current_run()
            assert run is not None
            local_id = run.id
            logged = [quoting(episodes[n], local_id, f"log{n}") for n in range(2)]
            run.log_episodes(logged)
            # A record span too (the OpenTelemetry producer's way), and a large record.
            spanned = quoting(episodes[2], local_id, "span")
            tracer.start_span("episode", attributes={semconv.RECORD: json.dumps(spanned)}).end()
            large = quoting(episodes[3], local_id, "large")
            large["info"]["blob"] = f"{local_id} " + "y" * LARGE
            run.log_episodes([large])
            assert prime_env.evaluations == {}  # all logged before the evaluation exists
        eval_id = platform_id(local_id)
        until = time.monotonic() + 20  # the sinks are attached once the id is on the span
        while run_span.attributes[semconv.RUN_ID] != eval_id and time.monotonic() < until:
            time.sleep(0.02)
    finally:
        prime_env.unstall()
    run_span.end()
    assert provider.force_flush(60_000)
    provider.shutdown()
    assert eval_id != local_id
    assert_stored_exactly(prime_env, eval_id, [*logged, spanned, large])


def _offline(records_of: Any) -> tuple[Any, list[dict[str, Any]]]:
    run = pr.init(name="stamp-only", mode="offline", dir=archive_root(), environments=["gsm8k"])
    records = records_of(run.id)
    run.log_episodes(records)
    run.finish()
    return run, records


def _synced(platform: StandInPlatform, run: Any) -> str:
    done = run_cli("sync", run.id, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    sync = json.loads((Path(run.archive_path) / "sync.json").read_text())
    return str(sync["platform"]["id"])


def _small_and_large(episodes: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    small = [quoting(episodes[n], run_id, f"small{n}") for n in range(2)]
    large = []
    for n in range(2):
        record = quoting(episodes[2 + n], run_id, f"large{n}")
        # Over 4 MiB: a long string naming the id, and the id as a value beside it.
        record["info"]["blob"] = f"{run_id} " + "z" * LARGE + f' "{run_id}"'
        large.append(record)
    return [*small, *large]


def test_sync_of_an_offline_run_keeps_the_content_at_any_size(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    run, records = _offline(lambda run_id: _small_and_large(episodes, run_id))
    eval_id = _synced(prime_env, run)
    assert eval_id != run.id
    assert_stored_exactly(prime_env, eval_id, records)
    assert (Path(run.archive_path) / "stamps").is_dir()  # where those stamps lie, noted


def test_sync_of_records_journaled_without_their_stamps_noted_keeps_the_content(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    # An archive written by an earlier version notes no stamps: sync decodes such a record
    # (a large one without its long strings) and sets the new id on its stamps only.
    run, records = _offline(lambda run_id: _small_and_large(episodes, run_id))
    shutil.rmtree(Path(run.archive_path) / "stamps", ignore_errors=True)
    eval_id = _synced(prime_env, run)
    assert_stored_exactly(prime_env, eval_id, records)


def test_sync_of_records_that_do_not_name_the_id_keeps_them_too(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    # The common case: the id occurs only as the stamps, and no note is written for them.
    def plain(run_id: str) -> list[dict[str, Any]]:
        out = [quoting(episodes[n], "not-the-run", f"plain{n}") for n in range(2)]
        out[1]["info"]["blob"] = "w" * LARGE
        return out

    run, records = _offline(plain)
    assert not (Path(run.archive_path) / "stamps").exists()
    eval_id = _synced(prime_env, run)
    assert_stored_exactly(prime_env, eval_id, records)

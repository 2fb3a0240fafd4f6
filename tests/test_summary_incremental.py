"""The default run summary is kept as records are logged (issue 13, figure 7): finish() reads
back from the journal only what other processes wrote, and the summary is still the one the
journal's lines give, forked children's records included."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import prime_runs as pr
from _support import DATA, journal_lines, load_jsonl, run_status
from prime_runs._journal.archive import RunArchive
from prime_runs._records.encode import encode
from prime_runs.metrics import SummaryAccumulator, from_encoded, from_episodes


class _Reads:
    """Counts journal lines read back and records decoded for the summary."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines = 0
        self.decoded = 0
        iter_records = RunArchive.iter_records
        add_encoded = SummaryAccumulator.add_encoded

        def counting_iter(archive: RunArchive, *args: Any, **kwargs: Any) -> Iterator[Any]:
            for entry in iter_records(archive, *args, **kwargs):
                self.lines += 1
                yield entry

        def counting_add(acc: SummaryAccumulator, data: bytes) -> bool:
            self.decoded += 1
            return add_encoded(acc, data)

        monkeypatch.setattr(RunArchive, "iter_records", counting_iter)
        monkeypatch.setattr(SummaryAccumulator, "add_encoded", counting_add)


def _odd(episodes: list[dict[str, Any]]) -> list[Any]:
    """Records whose journal line reads differently from the mapping, or not at all."""
    out = [copy.deepcopy(e) for e in episodes[:11]]
    out[0]["traces"][0]["metrics"]["best"] = math.nan  # stored as null: left out of "best"
    out[1]["traces"][1]["rewards"]["exact"]["score"] = math.inf  # null: not scored
    out[2]["traces"][0]["rewards"]["overlap"]["weight"] = math.nan  # null weight: unusable
    out[3]["ok"] = math.nan  # null: not ok
    out[4]["traces"][0]["agent"]["trainable"] = math.nan  # null: not trainable
    out[5]["traces"][2]["metrics"]["big"] = 2**70  # beyond 64 bits, still a float's range
    out[6]["traces"][0]["rewards"]["exact"]["score"] = 10**400  # left out whole
    out[7]["traces"][0]["metrics"]["best"] = "high"  # left out whole
    out[8]["traces"][1]["rewards"]["exact"] = math.nan  # a null entry: not scored
    out[9]["traces"] = tuple(out[9]["traces"])  # a list in JSON
    out[10]["traces"][0]["metrics"]["nan_free"] = -math.inf
    return out


@pytest.mark.parametrize(
    "name", ["episodes.jsonl", "edge_episodes.jsonl", "train_episodes.jsonl", "traces.jsonl"]
)
def test_a_logged_record_counts_as_its_journal_line_reads(name: str) -> None:
    records = load_jsonl(name)
    if name == "episodes.jsonl":
        records += _odd(records)
    logged, decoded = SummaryAccumulator(), SummaryAccumulator()
    for record in records:
        data = encode(record, "run-x", "eval").data
        assert logged.add_logged(record, data) == decoded.add_encoded(data)
    assert logged.result() == decoded.result()
    assert logged.skipped == decoded.skipped


def test_finish_reads_none_of_its_own_records_back(
    episodes: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _Reads(monkeypatch)
    run = pr.init(name="tally", environments=[{"id": "env-1"}], mode="offline")
    run.log_episodes(episodes)
    run.log_traces(load_jsonl("traces.jsonl"))
    run.finish()
    assert reads.lines == 0 and reads.decoded == 0
    assert run_status(run)["summary"] == from_encoded(journal_lines(run))
    assert len(journal_lines(run)) > len(episodes)  # both kinds were journaled


def test_odd_numbers_summarize_and_are_reported_as_their_journal_lines(
    episodes: list[dict[str, Any]],
) -> None:
    records = _odd(episodes)
    run = pr.init(name="odd", environments=[{"id": "env-1"}], mode="offline")
    run.log_episodes(records)
    run.finish()
    lines = journal_lines(run)
    assert len(lines) == len(records)
    expected = SummaryAccumulator()
    for line in lines:
        expected.add_encoded(line)
    assert expected.skipped == 3  # a null weight, 10**400 and a string
    assert run_status(run)["summary"] == json.loads(json.dumps(expected.result()))
    assert run.errors == [
        "3 records were left out of the run summary: a reward or metric is not a number "
        "that fits a float (e.g. 10**400 or a string)"
    ]


def test_an_explicit_summary_still_wins_and_nothing_is_read_back(
    episodes: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _Reads(monkeypatch)
    run = pr.init(name="given", environments=[{"id": "env-1"}], mode="offline")
    run.log_episodes(episodes)
    run.finish(summary={"avg_reward": 0.25})
    assert run_status(run)["summary"] == {"avg_reward": 0.25}
    assert reads.lines == 0


FORK_SCRIPT = r"""
import json, os, sys
import prime_runs as pr
from prime_runs.metrics import SummaryAccumulator

decoded = 0
add_encoded = SummaryAccumulator.add_encoded


def counting(acc, data):
    global decoded
    decoded += 1
    return add_encoded(acc, data)


SummaryAccumulator.add_encoded = counting
episodes = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
parent, child = episodes[:12], episodes[12:]
run = pr.init(name="fork-summary", environments=[{"id": "env-1"}], mode="offline")
run.log_episodes(parent[:6])
pid = os.fork()
if pid == 0:
    run.log_episodes(child)
    os._exit(0)  # the child never finishes: the parent reads its segment back
_, code = os.waitpid(pid, 0)
run.log_episodes(parent[6:])
run.finish()
print(json.dumps({"path": run.archive_path, "child_exit": code, "decoded": decoded,
                  "errors": run.errors}))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_childs_records_count_and_only_they_are_read_back(
    tmp_path: Path, episodes: list[dict[str, Any]]
) -> None:
    script = tmp_path / "fork_summary.py"
    script.write_text(FORK_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(DATA / "episodes.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["child_exit"] == 0 and out["errors"] == []
    parent, child = episodes[:12], episodes[12:]
    # Only the child's records were decoded: the parent's own were tallied as logged.
    assert out["decoded"] == len(child)
    status = json.loads((Path(out["path"]) / "status.json").read_text())
    assert status["summary"] != from_episodes(parent)  # the child's records matter here
    assert status["summary"] == from_episodes(parent + child)

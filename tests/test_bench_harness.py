"""The benchmark harness's own logic (bench/): workloads, grouping, targets, reports,
and one real growth child with `prime-runs sync`. Nothing here times anything."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
DATA = Path(__file__).resolve().parent / "data" / "episodes.jsonl"


def _bench(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def _record(payload: Any) -> dict[str, Any]:
    return payload.to_record() if hasattr(payload, "to_record") else payload


def test_verifiers_workload_is_the_fixture_records_with_fresh_ids() -> None:
    workload = _bench("workload")
    fixture = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    episodes = workload.Generator(salt=5).workload("verifiers", 2 * len(fixture))
    ids = set()
    for index, episode in enumerate(episodes):
        record = _record(episode.payload)
        base = fixture[index % len(fixture)]
        # Unpadded: everything but the ids is the fixture record's.
        assert {k: v for k, v in record.items() if k not in ("id", "traces")} == {
            k: v for k, v in base.items() if k not in ("id", "traces")
        }
        for trace, base_trace in zip(record["traces"], base["traces"], strict=True):
            assert trace["nodes"] == base_trace["nodes"]
            ids.add(trace["id"])
        ids.add(record["id"])
        assert episode.nbytes == len(workload.encode(record))
        assert hasattr(episode.payload, "to_record") == (index % 2 == 0)
    members = sum(len(record["traces"]) for record in fixture)
    assert len(ids) == 2 * (len(fixture) + members)  # nothing repeats
    with pytest.raises(ValueError, match="unknown workload"):
        workload.Generator(salt=5).workload("tiny", 1)


def test_large_workload_is_plain_records_of_15_mib_each_and_not_run_by_default() -> None:
    workload = _bench("workload")
    episodes = workload.Generator(salt=5).workload("large", 2)
    records = [episode.payload for episode in episodes]
    assert all(type(record) is dict for record in records)
    for episode, record in zip(episodes, records, strict=True):
        assert episode.nbytes == len(workload.encode(record))
        assert abs(episode.nbytes - workload.LARGE_BYTES) < 64 * 1024
    assert records[0]["id"] != records[1]["id"]
    assert "large" in workload.WORKLOADS and "large" not in workload.DEFAULT_WORKLOADS


def _throughput(side: str, workload: str | None, cpu_s: float) -> dict[str, Any]:
    result = {"episodes": 1000, "cpu_s": cpu_s, "wall_s": 2.0, "finish_s": 0.01}
    if side != "json":
        result["platform"] = {"episodes": 1000}
    entry = {"rep": 0, "scenario": "throughput", "side": side, "result": result}
    return entry if workload is None else {**entry, "workload": workload}


def test_figures_and_targets_are_kept_apart_per_workload() -> None:
    figures = _bench("figures")
    raw = [
        _throughput("ours", "mixed", 1.0),
        _throughput("peer", "mixed", 4.0),
        _throughput("ours", "verifiers", 1.0),
        _throughput("peer", "verifiers", 1.0),
    ]
    found = figures.aggregate(raw)
    assert found["workloads"]["mixed"]["ours"]["cpu_per_1k"] == pytest.approx(1.0)
    assert found["workloads"]["verifiers"]["peer"]["cpu_per_1k"] == pytest.approx(1.0)
    cpu = {r["workload"]: r["ours"] for r in figures.targets(found) if r["figure"] == "1"}
    assert cpu == {"mixed": True, "verifiers": False}


def test_a_version_1_results_file_still_renders_as_the_mixed_workload() -> None:
    report = _bench("report")
    machine = {"cpu": "cpu", "cores": 2, "memory_gb": 1.0, "os": "os", "python": "3"}
    params = {"episodes": 1000, "runs": 1, "work_ms": 2.0, "work_iters": 1, "bursts": []}
    legacy = {
        "machine": machine,
        "params": {**params, "timebox": 30.0, "workload_mb": 35.0},
        "figures": {},
        "raw": [_throughput("ours", None, 1.0), _throughput("peer", None, 4.0)],
    }
    text = report.render(legacy)
    assert "Workload: mixed" in text and "Workload: verifiers" not in text
    assert "| 1 | CPU per 1k episodes <= 0.5x peer | mixed | met |" in text


def test_growth_targets_flag_a_figure_that_grows() -> None:
    growth = _bench("growth")

    def runs(cpu: list[float], finish: list[float], sync: list[float]) -> dict[str, Any]:
        ours = {
            str(size): {"cpu_per_1k": c, "finish_s": f}
            for size, c, f in zip((2000, 20000), cpu, finish, strict=True)
        }
        offline = {
            str(size): {"sync_cpu_beyond_fixed_per_1k": s, "synced_pct": 100.0}
            for size, s in zip((2000, 20000), sync, strict=True)
        }
        return {"ours": ours, "ours-offline": offline}

    def verdicts(*series: list[float]) -> list[bool | None]:
        return [r["ours"] for r in growth.targets(runs(*series))]

    assert verdicts([1.0, 1.1], [0.01, 0.02], [0.2, 0.22]) == [True] * 4
    assert verdicts([1.0, 1.5], [0.01, 0.5], [0.2, 0.3]) == [False, False, False, True]
    # Falling as the run grows (a fixed cost spread thinner) is not growing.
    assert verdicts([1.0, 0.5], [0.01, 0.01], [0.23, 0.14]) == [True] * 4


def test_the_sync_figure_is_read_beyond_the_commands_fixed_cost() -> None:
    growth = _bench("growth")
    result = {
        "episodes": 2000,
        "cpu_s": 0.1,
        "finish_s": 0.0,
        "sync_wall_s": 1.0,
        "sync_cpu_s": 0.8,
        "sync_standin_cpu_s": 0.3,
        "sync_fixed_wall_s": 0.4,
        "sync_fixed_cpu_s": 0.2,
        "sync_returncode": 0,
        "sync_platform": {"episodes": 2000, "samples": 2000},
    }
    figures = growth.per_run("ours-offline", result)
    assert figures["sync_wall_per_1k"] == pytest.approx(0.5)
    assert figures["sync_cpu_beyond_fixed_per_1k"] == pytest.approx(0.3)  # (0.8 - 0.2) / 2
    assert figures["sync_standin_cpu_per_1k"] == pytest.approx(0.15)


def test_an_offline_growth_run_is_synced_whole_by_the_cli(tmp_path: Path) -> None:
    harness, growth = _bench("harness"), _bench("growth")
    result = harness.run_child(
        "ours-offline",
        "growth",
        {"count": 30, "salt": 11},
        tmp_path / "logs",
        after=growth.sync_after,
    )
    assert "error" not in result, result
    assert result["platform"]["episodes"] == 0  # offline: nothing sent by the run itself
    assert result["sync_returncode"] == 0, result["sync_output"]
    figures = growth.per_run("ours-offline", result)
    assert figures["synced_pct"] == 100.0 and figures["synced_samples_pct"] == 100.0
    # The empty-home sync (the fixed cost) found nothing, so it created no evaluation.
    assert result["sync_evaluations"] == 1 and result["sync_fixed_wall_s"] > 0


def test_scale_repeats_the_small_runs_and_reports_medians() -> None:
    growth = _bench("growth")
    entries = growth.plan([2000, 100000], ["ours"], salt=0, runs=3)
    assert [e[3]["count"] for e in entries] == [2000, 100000, 2000, 2000]
    assert len({e[3]["salt"] for e in entries}) == 4  # every run logs fresh ids
    raw = [
        {
            "side": "ours",
            "params": {"count": count},
            "result": {"episodes": count, "cpu_s": cpu, "finish_s": 0.01, "wall_s": 1.0},
        }
        for count, cpu in ((2000, 0.9), (100000, 20.0), (2000, 0.4), (2000, 0.5))
    ]
    figures = growth.aggregate(raw)["ours"]
    assert figures["2000"]["cpu_per_1k"] == pytest.approx(0.25)  # the median of 0.45, 0.2, 0.25
    assert figures["100000"]["cpu_per_1k"] == pytest.approx(0.2)

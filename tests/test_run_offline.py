"""The run model offline: spans, archive, encode-once, summary, statuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import _archives
import prime_runs as pr
from prime_runs import semconv


def archived_records(run: pr.Run) -> list[dict]:
    archive = _archives.Archive(Path(run.archive_path))
    return [json.loads(data) for _, _, data in archive.iter_records()]


def test_offline_is_the_default_without_a_key(episodes, isolated_env):
    run = pr.init(name="first", environments=["prfix-v1"], model="m", framework="verifiers")
    assert run.mode == "offline"
    assert run.url is None
    assert Path(run.archive_path).parent == isolated_env
    run.log_episodes(episodes[:3])
    run.finish()
    assert run.status is pr.RunStatus.COMPLETED
    assert run.finished
    desc = json.loads((Path(run.archive_path) / "run.json").read_text())
    assert desc["name"] == "first"
    assert desc["environments"] == ["prfix-v1"]
    assert desc["model"] == "m" and desc["framework"] == "verifiers"
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert status["status"] == "completed"
    assert status["summary"] == pr.metrics.from_episodes(episodes[:3])


def test_records_are_archived_stamped_and_in_order(episodes):
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.log_episodes(episodes)
    got = archived_records(run)
    run.finish()
    assert [r["id"] for r in got] == [e["id"] for e in episodes]
    for record in got:
        assert record["run"]["id"] == run.id
        assert record["run"]["type"] == "eval"
        for member in record["traces"]:
            assert member["run"]["id"] == run.id
    # Other run keys survive the stamp; nothing else changes.
    assert got[0]["run"]["name"] == episodes[0]["run"]["name"]
    stripped = [{k: v for k, v in r.items() if k != "run"} for r in got]
    originals = [{k: v for k, v in e.items() if k != "run"} for e in episodes]
    for s, o in zip(stripped, originals, strict=True):
        assert {k: v for k, v in s.items() if k != "traces"} == {
            k: v for k, v in o.items() if k != "traces"
        }


def test_the_producer_object_is_not_mutated_and_later_mutation_changes_nothing(episodes):
    original = copy.deepcopy(episodes[0])
    record = copy.deepcopy(episodes[0])
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.log_episodes([record])
    assert record == original  # not stamped in place
    record["traces"][0]["rewards"] = {"mutated": {"score": 9.0, "weight": 1.0}}
    record["id"] = "changed"
    run.finish()
    (got,) = archived_records(run)
    assert got["id"] == original["id"]
    assert got["traces"][0]["rewards"] == original["traces"][0]["rewards"]


class Episode:
    """An object like verifiers' Episode: to_record() returns a fresh mapping."""

    def __init__(self, record: dict) -> None:
        self._record = record
        self.calls = 0

    def to_record(self) -> dict:
        self.calls += 1
        return copy.deepcopy(self._record)


def test_objects_with_to_record_are_encoded_once(episodes):
    objects = [Episode(e) for e in episodes[:4]]
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.log_episodes(objects)
    run.finish()
    assert [o.calls for o in objects] == [1, 1, 1, 1]
    assert [r["id"] for r in archived_records(run)] == [e["id"] for e in episodes[:4]]


def test_span_tree_on_a_users_provider(span_capture, episodes, traces_records):
    provider, exporter = span_capture
    run = pr.init(name="tree", environments=["e"], mode="offline", tracer_provider=provider)
    run.log_episodes(episodes[:2])
    run.log_traces(traces_records[:1])
    run.finish()
    spans = exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names == ["episode", "episode", "trace", "run"]
    root = spans[-1]
    assert root.parent is None
    assert root.attributes[semconv.RUN_ID] == run.id
    assert root.attributes[semconv.RUN_NAME] == "tree"
    assert root.attributes[semconv.RUN_MODE] == "offline"
    assert root.attributes[semconv.RUN_STATUS] == "completed"
    for child in spans[:-1]:
        assert child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
        # The payload travels beside the span, not as a megabyte attribute.
        assert semconv.RECORD not in child.attributes
    assert spans[0].attributes[semconv.RECORD_ID] == episodes[0]["id"]
    assert spans[0].attributes[semconv.RECORD_ENV] == episodes[0]["env"]["id"]
    assert spans[2].attributes[semconv.RECORD_KIND] == "trace"


def test_summary_defaults_to_the_episodes_seen_and_an_explicit_one_wins(episodes):
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.log_episodes(episodes)
    run.finish()
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert status["summary"] == pr.metrics.from_episodes(episodes)

    run2 = pr.init(name="y", environments=["e"], mode="offline")
    run2.log_episodes(episodes[:1])
    run2.finish({"avg_reward": 0.5, "custom": float("nan")})
    status2 = json.loads((Path(run2.archive_path) / "status.json").read_text())
    assert status2["summary"] == {"avg_reward": 0.5, "custom": None}


def test_finish_is_idempotent_and_first_status_wins(episodes):
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.finish(None, pr.RunStatus.FAILED, "boom")
    run.finish()
    run.finish(None, "cancelled")
    assert run.status is pr.RunStatus.FAILED
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert status["status"] == "failed" and status["error"] == "boom"


def test_finish_rejects_running_and_leaves_the_run_open():
    run = pr.init(name="x", environments=["e"], mode="offline")
    with pytest.raises(ValueError):
        run.finish(None, "running")
    assert not run.finished
    run.finish()
    assert run.finished


def test_context_manager_statuses():
    with pr.init(name="ok", environments=["e"], mode="offline") as run:
        pass
    assert run.status is pr.RunStatus.COMPLETED

    with pytest.raises(ZeroDivisionError):
        with pr.init(name="bad", environments=["e"], mode="offline") as run:
            1 / 0  # noqa: B018
    assert run.status is pr.RunStatus.FAILED
    status = json.loads((Path(run.archive_path) / "status.json").read_text())
    assert status["error"] == "ZeroDivisionError: division by zero"

    with pytest.raises(KeyboardInterrupt):
        with pr.init(name="int", environments=["e"], mode="offline") as run:
            raise KeyboardInterrupt
    assert run.status is pr.RunStatus.CANCELLED


def test_fail_is_finish_failed():
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.fail(RuntimeError("nope"))
    assert run.status is pr.RunStatus.FAILED
    assert json.loads((Path(run.archive_path) / "status.json").read_text())["error"] == (
        "RuntimeError: nope"
    )


def test_config_forms_are_archived(tmp_path):
    path = tmp_path / "eval.toml"
    text = "# the environment\nenvironment = 'gsm8k'\n\n[sampling]\nt = 0.7\n"
    path.write_text(text)
    run = pr.init(name="x", environments=["e"], mode="offline", config=str(path))
    run.finish()
    desc = json.loads((Path(run.archive_path) / "run.json").read_text())
    assert desc["config"] == {
        "config_source": {"format": "toml", "text": text, "filename": "eval.toml"}
    }

    pydantic = pytest.importorskip("pydantic")

    class Cfg(pydantic.BaseModel):
        a: int = 1
        b: str = "x"

    run2 = pr.init(name="y", environments=["e"], mode="offline", config=Cfg(b="set"))
    run2.finish()
    desc2 = json.loads((Path(run2.archive_path) / "run.json").read_text())
    assert desc2["config"] == {"b": "set"}


def test_disabled_mode_writes_nothing_and_accepts_everything(isolated_env, episodes):
    import threading

    before = threading.active_count()
    run = pr.init(name="x", environments=["e"], mode="disabled")
    run.log_episodes(episodes)
    run.log_traces([{"id": "t"}])
    assert run.flush() is True
    run.finish({"avg_reward": 1.0})
    assert run.id.startswith("disabled-") and len(run.id) == len("disabled-") + 16
    assert run.url is None
    assert run.status is pr.RunStatus.COMPLETED
    assert not isolated_env.exists()
    assert threading.active_count() == before


def test_mode_from_environment(monkeypatch):
    monkeypatch.setenv(pr.MODE_ENV, " Disabled ")
    assert pr.init(name="x").mode == "disabled"
    monkeypatch.setenv(pr.MODE_ENV, "sideways")
    with pytest.raises(pr.ConfigurationError, match="sideways"):
        pr.init(name="x")


def test_module_level_logging_goes_to_the_current_run(episodes):
    run = pr.init(name="x", environments=["e"], mode="offline")
    with run:
        pr.log_episodes(episodes[:2])
    assert run.logged_records == 2
    assert len(archived_records(run)) == 2


def test_logging_from_worker_threads(episodes):
    import threading

    run = pr.init(name="x", environments=["e"], mode="offline")
    threads = [
        threading.Thread(target=run.log_episodes, args=([e],)) for e in episodes for _ in range(5)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.finish()
    ids = [r["id"] for r in archived_records(run)]
    assert len(ids) == len(episodes) * 5
    assert sorted(set(ids)) == sorted(e["id"] for e in episodes)


def test_a_foreign_run_id_is_replaced_on_the_copy_and_counted(episodes, caplog):
    import logging

    run = pr.init(name="x", environments=["e"], mode="offline")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run.log_episodes(episodes[:3])  # the fixtures carry the capture's run ids
        run.finish()
    assert all(r["run"]["id"] == run.id for r in archived_records(run))
    assert episodes[0]["run"]["id"] != run.id  # the producer's record is untouched
    assert "3 records named a different run id" in caplog.text

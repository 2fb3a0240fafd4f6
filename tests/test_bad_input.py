"""Bad input: a typed error under on_error="raise"; a warning and a counted loss under "warn"."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import _archives
import prime_runs as pr


def ids_in_archive(run: pr.Run) -> list[str]:
    archive = _archives.Archive(Path(run.archive_path))
    return [json.loads(data)["id"] for _, _, data in archive.iter_records()]


class NotARecord:
    pass


class BadToRecord:
    def to_record(self):
        return ["not", "a", "mapping"]


BAD_RECORDS = [
    pytest.param(NotARecord(), "mapping or have a to_record", id="no-to_record"),
    pytest.param(BadToRecord(), "expected a mapping", id="to_record-not-mapping"),
    pytest.param({"id": "x", "blob": object()}, "not JSON-serializable", id="not-json"),
    pytest.param({"id": "x", 1j: 2}, "not JSON-serializable", id="bad-key"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_RECORDS)
def test_bad_record_warns_counts_and_keeps_neighbours(bad, message, episodes, caplog):
    run = pr.init(name="x", environments=["e"], mode="offline")
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run.log_episodes([episodes[0], bad, episodes[1]])
    run.finish()
    assert ids_in_archive(run) == [episodes[0]["id"], episodes[1]["id"]]
    assert run.dropped_records == 1
    assert any(message in e for e in run.errors)
    assert any(message in r.getMessage() for r in caplog.records)
    assert run.status is pr.RunStatus.COMPLETED


@pytest.mark.parametrize(("bad", "message"), BAD_RECORDS)
def test_bad_record_raises_a_typed_error_under_raise(bad, message, episodes):
    run = pr.init(name="x", environments=["e"], mode="offline", on_error="raise")
    with pytest.raises(pr.RecordError, match=message):
        run.log_episodes([episodes[0], bad])
    run.log_episodes([episodes[1]])
    run.finish()
    # The record before the bad one was logged; nothing after it was lost either.
    assert ids_in_archive(run) == [episodes[0]["id"], episodes[1]["id"]]


def test_not_an_iterable_is_a_record_error():
    run = pr.init(name="x", environments=["e"], mode="offline", on_error="raise")
    with pytest.raises(pr.RecordError, match="iterable of records"):
        run.log_episodes(42)
    with pytest.raises(pr.RecordError):
        run.log_episodes("a string is not records")
    run.finish()


def test_non_finite_numbers_become_null(episodes):
    record = json.loads(json.dumps(episodes[0]))
    record["traces"][0]["metrics"]["weird"] = float("nan")
    record["traces"][0]["metrics"]["huge"] = float("inf")
    run = pr.init(name="x", environments=["e"], mode="offline", on_error="raise")
    run.log_episodes([record])
    run.finish()
    archive = _archives.Archive(Path(run.archive_path))
    ((_, _, data),) = list(archive.iter_records())
    got = json.loads(data)  # strict JSON: no NaN literal in the archive
    assert b"NaN" not in data and b"Infinity" not in data
    assert got["traces"][0]["metrics"]["weird"] is None
    assert got["traces"][0]["metrics"]["huge"] is None
    assert run.dropped_records == 0


def test_logging_after_finish(episodes, caplog):
    run = pr.init(name="x", environments=["e"], mode="offline")
    run.finish()
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run.log_episodes(episodes[:1])
    assert any("has finished" in e for e in run.errors)
    assert ids_in_archive(run) == []
    assert run.dropped_records == 1  # a counted loss, not only a message

    strict = pr.init(name="y", environments=["e"], mode="offline", on_error="raise")
    strict.finish()
    with pytest.raises(pr.RunFinishedError, match="finished"):
        strict.log_episodes(episodes[:1])


def test_unknown_mode_and_on_error():
    with pytest.raises(pr.ConfigurationError, match="'sometimes'"):
        pr.init(name="x", mode="sometimes")
    with pytest.raises(pr.ConfigurationError, match="on_error"):
        pr.init(name="x", mode="offline", on_error="ignore")


def test_unreadable_config_path(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(pr.ConfigurationError, match=r"nope\.toml"):
        pr.init(name="x", mode="offline", config=str(missing))
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(pr.ConfigurationError):
        pr.init(name="x", mode="offline", config=binary)


def test_config_of_an_unsupported_type():
    with pytest.raises(pr.ConfigurationError):
        pr.init(name="x", mode="offline", config=12)


def test_online_without_a_key_is_a_configuration_error():
    with pytest.raises(pr.ConfigurationError, match="online"):
        pr.init(name="x", environments=["e"], mode="online")


def test_unwritable_archive_root(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(pr.ConfigurationError, match="dir="):
        pr.init(name="x", mode="offline", dir=blocker)

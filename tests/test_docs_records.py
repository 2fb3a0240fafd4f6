"""docs/records.md shows records that are really accepted: its minimal episode and trace are
the fixtures in tests/data, they land through a real run against the stand-in, its Python
example runs with the service's time window checked, and the refusals it lists are the ones
the SDK gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import prime_runs as pr

DOC = Path(__file__).parents[1] / "docs" / "records.md"
DATA = Path(__file__).parent / "data"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text("utf-8"), flags=re.DOTALL)


def test_the_minimal_records_shown_are_the_tested_fixtures():
    episode, trace = (json.loads(block) for block in _blocks("json")[:2])

    assert episode == json.loads((DATA / "minimal_episode.json").read_text())
    assert trace == json.loads((DATA / "minimal_trace.json").read_text())


def test_the_minimal_records_shown_land_on_every_sink(prime_env):
    episode, trace = (json.loads(block) for block in _blocks("json")[:2])
    run = pr.init(name="records-doc", environments=["my-env"], model="m", framework="f")

    run.log_episodes([episode])
    run.log_traces([trace])
    run.finish()

    assert (run.errors, run.failed_records, run.dropped_records) == ([], {}, 0)
    assert run.acknowledged_records == {"traces": 2, "eval_samples": 1}
    assert set(prime_env.episodes) == {episode["id"]}
    assert set(prime_env.traces) == {trace["id"], episode["traces"][0]["id"]}
    assert all(doc["run"]["id"] == run.id for doc in prime_env.traces.values())
    (row,) = prime_env.samples(run.id)
    assert (row["sample_id"], row["reward"], row["agent"]) == (episode["id"], 1.0, "solver")
    assert prime_env.server_errors == []


@pytest.mark.prime_platform(check_time_window=True)
def test_the_python_example_runs_against_a_service_that_checks_the_time_window(prime_env):
    (example,) = _blocks("python")

    exec(compile(example, str(DOC), "exec"), {})

    assert set(prime_env.episodes) == {"ep-0001"}
    assert set(prime_env.traces) == {"tr-0001"}
    ((eval_id, evaluation),) = prime_env.evaluations.items()
    assert evaluation["status"] == "PROCESSING"
    assert [r["sample_id"] for r in prime_env.samples(eval_id)] == ["ep-0001"]


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"timing": {"start": 1795970000.0}}, "invalid_trace: the record needs a non-empty"),
        ({"id": "t-1"}, "invalid_trace: a trace needs a numeric `timing.start`"),
        ({"id": "e-1", "traces": [{"timing": {}}]}, "invalid_trace: every member trace needs"),
    ],
    ids=["no-id", "no-start", "member-without-id"],
)
@pytest.mark.parametrize("mode", ["online", "offline"])
def test_the_local_checks_listed_refuse_at_log_time_online_and_offline(
    prime_env, record, reason, mode
):
    run = pr.init(name="records-doc", environments=["my-env"], model="m", framework="f", mode=mode)

    run.log_traces([record])
    run.finish()

    assert run.logged_records == 0 and run.failed_records == {}
    (error,) = run.errors[:1]
    assert error.startswith(f"a record was not logged: {reason}"), run.errors
    assert "docs/records.md" in error
    assert prime_env.requests_for("traces_upload") == []  # refused before any request
    assert reason.split(":")[0] in DOC.read_text("utf-8")


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_on_error_raise_raises_the_same_record_error_online_and_offline(prime_env, mode):
    run = pr.init(name="records-doc", environments=["e"], mode=mode, on_error="raise")

    with pytest.raises(pr.RecordError, match="needs a non-empty string `id`; give each record"):
        run.log_episodes([{"prompt": "2+2?", "completion": "4", "reward": 1.0}])
    run.finish()

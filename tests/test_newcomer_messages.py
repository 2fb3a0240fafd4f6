"""Messages a newcomer met in their first hour (issue 23) say what is wrong and name the fix:
an offline run refuses at log time what the platform would refuse later, a malformed raw
``prime.record`` is not blamed on a limit nobody set, a raw-span run is told about its span
attribute, a dataclass or a datetime is named, a second ``finish()`` is not silent, and
``show`` leaves out a reward too large for a float."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import prime_runs as pr
from _support import run_cli

NO_ID = {"prompt": "2+2?", "completion": "4", "reward": 1.0}


def _root() -> Path:
    return Path(os.environ["PRIME_RUNS_DIR"])


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_offline_run_refuses_at_log_time_what_sync_would_have_seen_refused(
    prime_env, episodes, caplog
):
    run = pr.init(name="first-hour", environments=["gsm8k"], mode="offline", dir=_root())
    run.log_episodes([NO_ID, *episodes[:2]])
    run.finish()

    (refused,) = [w for w in _warnings(caplog) if "a record was not logged" in w]
    assert "invalid_trace: the record needs a non-empty string `id`" in refused
    assert "uuid.uuid4().hex" in refused  # the fix
    assert "2 records were not logged" not in " ".join(_warnings(caplog))
    assert run.logged_records == 2
    sync = run_cli("sync", run.id)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "rejected" not in sync.stdout
    assert set(prime_env.episodes) == {e["id"] for e in episodes[:2]}


@dataclasses.dataclass
class Episode:
    id: str
    traces: list


def test_a_dataclass_and_a_datetime_are_named_with_their_fix(caplog):
    run = pr.init(name="first-hour", environments=["e"], mode="offline", dir=_root())
    run.log_episodes([Episode("ep-1", [])])
    run.log_episodes([{"id": "ep-2", "traces": [], "at": datetime.datetime.now()}])
    run.finish()

    dataclass_error, datetime_error = run.errors[:2]
    assert "cannot log this Episode object" in dataclass_error
    assert "dataclasses.asdict(obj)" in dataclass_error
    assert "datetime" in datetime_error and ".isoformat()" in datetime_error
    (summary,) = [w for w in _warnings(caplog) if "records were not logged" in w]
    assert "2 refused as bad input" in summary and "run.errors says why" in summary
    assert "attribute length limit" not in summary  # nothing here was cut


def test_a_malformed_raw_record_is_not_blamed_on_a_limit_alone(caplog):
    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=_root())
    tracer = provider.get_tracer("newcomer")
    with tracer.start_as_current_span("run", attributes={"prime.run.environments": ["e"]}):
        with tracer.start_as_current_span(
            "episode", attributes={"prime.record": '{"id": "ep-1", "traces": []'}
        ):
            pass
    provider.shutdown()

    (message,) = [w for w in _warnings(caplog) if "is not a whole JSON record" in w]
    assert "stops open after 27 characters" in message
    assert "If it was cut by an attribute length limit of 27 characters" in message
    assert "If no such limit is set, the producer wrote incomplete JSON" in message
    assert "json.dumps(record)" in message


def test_a_raw_span_run_without_environments_is_told_about_its_attribute(caplog):
    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=_root())
    tracer = provider.get_tracer("newcomer")
    with tracer.start_as_current_span("run", attributes={"prime.run.name": "raw"}):
        pass
    provider.shutdown()

    (hint,) = [w for w in _warnings(caplog) if "names no environment" in w]
    assert "set the run span's prime.run.environments attribute" in hint
    assert "init()" not in hint


def test_a_second_finish_that_asks_for_more_is_not_silent(caplog):
    run = pr.init(name="first-hour", environments=["e"], mode="offline", dir=_root())
    run.finish()
    caplog.clear()

    run.finish()  # a plain repeat changes nothing and stays quiet
    assert _warnings(caplog) == []
    run.finish(status=pr.RunStatus.FAILED, error="oops")

    (warning,) = _warnings(caplog)
    assert f"run {run.id} was already finished" in warning
    assert "finish(status=failed, error='oops')" in warning and "is ignored" in warning
    assert "single finish()" in warning
    assert run.status is pr.RunStatus.COMPLETED


def test_show_leaves_out_a_reward_too_large_for_a_float(episodes):
    run = pr.init(name="first-hour", environments=["e"], mode="offline", dir=_root())
    run.finish()
    start = time.time()
    big = (
        f'{{"id": "ep-big", "traces": [{{"id": "tr-big", "timing": {{"start": {start}}}, '
        '"rewards": {"r": {"score": 1e400, "weight": 1.0}}}]}'
    )
    good = json.dumps(dict(episodes[0], id="ep-good"))
    segment = Path(run.archive_path) / "records" / "episode-1-abcdef.jsonl"
    segment.write_text(f"{good}\n{big}\n")

    show = run_cli("show", run.id)

    assert show.returncode == 0
    assert "inf" not in show.stdout
    assert "rewards:      n=1 " in show.stdout


def test_ls_leaves_out_a_summary_reward_too_large_for_a_float(episodes):
    run = pr.init(name="first-hour", environments=["e"], mode="offline", dir=_root())
    run.log_episodes(episodes[:1])
    run.finish()
    status = Path(run.archive_path) / "status.json"
    status.write_text(status.read_text().replace('"avg_reward":', '"avg_reward": 1e400, "x":'))

    ls = run_cli("ls")

    assert ls.returncode == 0
    (row,) = [line for line in ls.stdout.splitlines() if line.startswith(run.id)]
    assert row.split()[5] == "-" and "inf" not in row


_NO_KEY_SCRIPT = """
import sys
import prime_runs as pr
mode = sys.argv[1] or None
for name in ("first", "second"):
    run = pr.init(name=name, environments=["gsm8k"], mode=mode)
    print(run.mode, run.url)
    run.finish()
"""


@pytest.mark.parametrize(
    ("mode", "env_mode", "told"),
    [("", None, True), ("offline", None, False), ("", "offline", False)],
)
def test_a_run_offline_for_want_of_a_key_says_so_once_on_stderr(tmp_path, mode, env_mode, told):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIME_")}
    env.update(HOME=str(tmp_path), PRIME_RUNS_DIR=str(tmp_path / "archive"))
    if env_mode:
        env["PRIME_RUNS_MODE"] = env_mode
    done = subprocess.run(
        [sys.executable, "-c", _NO_KEY_SCRIPT, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["offline", "None", "offline", "None"]
    notices = done.stderr.count("no API key found")
    assert notices == (1 if told else 0), done.stderr
    if told:
        assert "PRIME_API_KEY" in done.stderr and "mode='offline'" in done.stderr

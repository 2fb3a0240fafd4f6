"""The runnable examples: each runs as its own process, as a user would run it.

Every run gets a fresh HOME (no ``~/.prime/config.json``) and archive root, and none of
the user's PRIME_* settings, so what it prints and writes is checked in isolation.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs import semconv, settings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RECORDED_EPISODES = EXAMPLES / "data" / "episodes.jsonl"

# Settings that would change where the examples send their runs.
_SCRUBBED = settings.ENV_VARIABLES


@dataclass
class Sandbox:
    env: dict[str, str]
    cwd: Path
    runs: Path  # PRIME_RUNS_DIR


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    base = tmp_path / "example"
    (base / "home").mkdir(parents=True)
    (base / "cwd").mkdir()
    runs = base / "runs"
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(HOME=str(base / "home"), PRIME_RUNS_DIR=str(runs), PYTHONUNBUFFERED="1")
    return Sandbox(env, base / "cwd", runs)


def run_example(sandbox: Sandbox, name: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=sandbox.cwd,
        env={**sandbox.env, **extra_env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    return result


def only_run(runs: Path) -> Path:
    folders = [p for p in runs.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def archived_records(archive: Path) -> list[dict[str, object]]:
    records = []
    for segment in sorted((archive / "records").glob("*.jsonl")):
        data = segment.read_bytes()
        assert data.endswith(b"\n")
        records.extend(json.loads(line) for line in data.splitlines())
    return records


def check_offline_archive(archive: Path, count: int, name: str) -> list[dict[str, object]]:
    description = json.loads((archive / "run.json").read_text())
    status = json.loads((archive / "status.json").read_text())
    assert description["name"] == name
    assert description["mode"] == "offline"
    assert status["status"] == "completed"
    assert status["logged"] == count
    records = archived_records(archive)
    assert len(records) == count
    assert len({r["id"] for r in records}) == count  # fresh ids, none repeated
    assert {r["run"]["id"] for r in records} == {archive.name}  # stamped with the run
    return records


def recorded_ids() -> set[str]:
    ids = set()
    for line in RECORDED_EPISODES.read_bytes().splitlines():
        episode = json.loads(line)
        ids.add(episode["id"])
        ids.update(t["id"] for t in episode["traces"])
    return ids


def test_quickstart_archives_an_offline_run(sandbox: Sandbox) -> None:
    result = run_example(sandbox, "quickstart.py")
    archive = only_run(sandbox.runs)
    records = check_offline_archive(archive, 36, "quickstart")
    # Fresh ids: nothing collides with the recorded fixture or with another run.
    assert not {r["id"] for r in records} & recorded_ids()

    out = result.stdout
    assert f"run {archive.name} (offline, completed)" in out
    assert "36 logged, 0 dropped" in out
    assert re.search(r"avg reward\s+\d\.\d{3}", out)
    assert re.search(r"error rate\s+\d+\.\d%", out)
    assert f"{archive}/" in out or f"{archive.name}/" in out
    assert "36 records" in out and "status.json" in out
    status = json.loads((archive / "status.json").read_text())
    assert f"avg reward  {status['summary']['avg_reward']:.3f}" in out
    for command in ("ls", f"show {archive.name}", f"report {archive.name} --open", "sync"):
        assert f"prime-runs {command}" in out
    assert "Traceback" not in result.stderr
    # It ends by writing the run's report and saying where.
    report = re.search(r"^  report\s+(\S+report\.html)  \(open it in a browser\)$", out, re.M)
    assert report, out
    page = (sandbox.cwd / report[1]).read_text("utf-8")
    assert (sandbox.cwd / report[1]).resolve() == (archive / "report.html").resolve()
    data = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    (described,) = json.loads(data)["runs"]
    assert (described["id"], described["counts"]["records"]) == (archive.name, 36)


def test_quickstart_stays_offline_with_an_api_key_set(sandbox: Sandbox) -> None:
    # A key in the environment would make a run online; the quickstart forces offline,
    # so the unreachable platform below is never contacted.
    run_example(
        sandbox,
        "quickstart.py",
        PRIME_API_KEY="not-a-real-key",
        PRIME_API_BASE_URL="http://127.0.0.1:9",
        PRIME_TRACES_URL="http://127.0.0.1:9",
    )
    archive = only_run(sandbox.runs)
    check_offline_archive(archive, 36, "quickstart")


def test_two_quickstarts_are_two_runs(sandbox: Sandbox) -> None:
    run_example(sandbox, "quickstart.py")
    run_example(sandbox, "quickstart.py")
    runs = sorted(p for p in sandbox.runs.iterdir())
    assert len(runs) == 2
    first, second = (archived_records(run) for run in runs)
    assert not {r["id"] for r in first} & {r["id"] for r in second}


def test_online_quickstart_reports_what_the_stand_in_received(
    sandbox: Sandbox,
) -> None:
    # A real key in the environment must not matter: the example passes its own.
    result = run_example(sandbox, "online_quickstart.py", PRIME_API_KEY="not-a-real-key")
    out = result.stdout
    run_id = re.search(r"^run (\S+) \(online, completed\): 12 episodes logged$", out, re.M)
    assert run_id, out
    assert re.search(
        r"prime traces\s+12 episodes \(\d+ traces\) "
        r"in (1 upload|([02-9]|\d\d+) uploads); 12 of 12 lines",
        out,
    )
    assert re.search(r"sample rows\s+12 rows, 12 matching a logged episode", out)
    assert re.search(r"finalize\s+1x, status PROCESSING", out)
    assert "eval_create x1" in out and "eval_finalize x1" in out
    assert "{'eval_samples': 12, 'traces': 12}" in out
    assert re.search(r"failed\s+\{\}, dropped 0", out)
    assert re.search(r"journal\s+12 records", out)
    # Its journal was temporary: nothing is left in the archive root.
    runs = sandbox.runs
    assert not runs.exists() or not any(runs.iterdir())


def test_configure_exporter_example(sandbox: Sandbox) -> None:
    result = run_example(sandbox, "configure_exporter.py")
    archive = only_run(sandbox.runs)
    check_offline_archive(archive, 8, "configure-exporter")
    description = json.loads((archive / "run.json").read_text())
    assert description["config"] == {"num_examples": 8}
    out = result.stdout
    assert f"run {archive.name} (offline, completed): 8 episodes logged" in out
    assert "8 episode, 8 rollout, 1 run, 1 handle_request" in out
    assert f"under 'handle_request'; prime.run.id={archive.name}" in out


def test_raw_opentelemetry_example(sandbox: Sandbox) -> None:
    result = run_example(sandbox, "raw_opentelemetry.py")
    archive = only_run(sandbox.runs)
    check_offline_archive(archive, 10, "raw-opentelemetry")
    description = json.loads((archive / "run.json").read_text())
    assert description["framework"] == "my-harness"
    assert description["tags"] == ["example"]
    status = json.loads((archive / "status.json").read_text())
    assert set(status["summary"]) == {"avg_reward", "avg_metrics", "avg_error"}
    assert f"run {archive.name}: completed, 10 episodes logged" in result.stdout


def test_examples_read_nothing_outside_the_examples_folder() -> None:
    for path in EXAMPLES.glob("*.py"):
        text = path.read_text()
        assert "tests/" not in text and "/shared" not in text, path


# The docs are checked against the code too, so a new name cannot go undocumented.
DOCS = EXAMPLES.parent / "docs"


def test_concepts_documents_every_semconv_name() -> None:
    text = (DOCS / "concepts.md").read_text()
    for constant, value in vars(semconv).items():
        if constant.isupper() and isinstance(value, str):
            assert f"`{value}`" in text, f"{constant} = {value!r} is not in docs/concepts.md"
            assert f"`{constant}`" in text, f"{constant} is not in docs/concepts.md"


def test_configuration_documents_every_init_keyword_and_variable() -> None:
    text = (DOCS / "configuration.md").read_text()
    for keyword in inspect.signature(pr.init).parameters:
        assert f"| `{keyword}` |" in text, f"init({keyword}=) is not in docs/configuration.md"
    for name, value in vars(settings).items():
        if name.endswith("_ENV"):
            assert f"`{value}`" in text, f"{value} is not in docs/configuration.md"


def test_genai_agent_turns_genai_spans_into_episodes(sandbox: Sandbox) -> None:
    result = run_example(sandbox, "genai_agent.py")
    archive = only_run(sandbox.runs)
    records = check_offline_archive(archive, 3, "genai-agent")
    status = json.loads((archive / "status.json").read_text())
    rewards = [r["traces"][0]["rewards"]["correct"]["score"] for r in records]  # type: ignore[index]
    assert sorted(rewards) == [0.0, 1.0, 1.0]  # the third task's answer key is wrong
    assert status["summary"]["avg_reward"] == pr.metrics.from_episodes(records)["avg_reward"]
    for record in records:
        (trace,) = record["traces"]  # type: ignore[misc]
        roles = [node["message"]["role"] for node in trace["nodes"]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert [call["usage"]["completion_tokens"] for call in trace["calls"]] == [12, 5]
    assert "3 episodes logged" in result.stdout and "avg_reward 0.667" in result.stdout
    assert "Traceback" not in result.stderr

"""``prime-runs report`` over every kind of archive the SDK writes: offline, online (against
the stand-in), synced, crashed by SIGKILL, with a torn last line and an unreadable line, and
several runs side by side; plus the command line and the page's defences."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import prime_runs as pr
from _support import load_jsonl
from prime_runs._journal.archive import RunArchive
from prime_runs._report import _html, build, load_run, render
from prime_runs.cli import main


def _root() -> Path:
    return Path(os.environ["PRIME_RUNS_DIR"])


def _offline_run(episodes: list[dict], name: str = "report-test", **finish) -> pr.Run:
    run = pr.init(
        name=name,
        environments=["best-of-n", "user-sim"],
        model="scripted/model",
        framework="verifiers",
        config={"temperature": 0.7},
        mode="offline",
        dir=_root(),
    )
    run.log_episodes(episodes)
    run.finish(**finish)
    return run


def _data_of(page: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S
    )
    assert match, "no data block"
    return json.loads(match.group(1))


def test_offline_run_header_counts_and_rows(episodes):
    run = _offline_run(episodes)
    data = build([load_run(RunArchive(Path(run.archive_path)))])
    (doc,) = data["runs"]
    assert (doc["id"], doc["name"], doc["mode"], doc["status"]) == (
        run.id,
        "report-test",
        "offline",
        "completed",
    )
    assert doc["environments"] == ["best-of-n", "user-sim"] and doc["model"] == "scripted/model"
    assert doc["platform"] is None and doc["pending"].endswith("close")
    assert doc["summary"] == RunArchive(Path(run.archive_path)).status()["summary"]
    assert doc["computed_summary"] == pr.metrics.from_episodes(episodes)
    assert doc["counts"]["records"] == len(episodes)
    assert doc["counts"]["failed"] == sum(1 for e in episodes if not e["ok"])
    assert doc["counts"]["embedded"] == len(episodes)  # a small run embeds every episode
    rows = doc["episodes"]["rows"]
    fields = doc["episodes"]["fields"]
    assert [r[fields.index("id")] for r in rows] == [e["id"] for e in episodes]
    keys = [data["examples"][r[fields.index("example")]]["key"] for r in rows]
    assert keys == [e["task"]["key"] for e in episodes]
    assert sum(data["charts"]["reward"]["counts"][0]) == len(episodes)


def test_a_small_budget_embeds_fewer_conversations_but_every_row(episodes):
    run = _offline_run(episodes)
    data = build([load_run(RunArchive(Path(run.archive_path)))], budget=30_000)
    (doc,) = data["runs"]
    embedded = doc["counts"]["embedded"]
    assert 0 < embedded < len(episodes) and len(doc["browse"]) == embedded
    assert len(doc["episodes"]["rows"]) == len(episodes)
    browse = doc["episodes"]["fields"].index("browse")
    positions = [r[browse] for r in doc["episodes"]["rows"] if r[browse] >= 0]
    assert sorted(positions) == list(range(embedded))
    assert len(json.dumps(doc["browse"], ensure_ascii=False)) <= 30_000


def test_torn_and_unreadable_lines_are_skipped_and_counted(episodes):
    run = _offline_run(episodes[:4])
    (segment,) = (Path(run.archive_path) / "records").glob("*.jsonl")
    with segment.open("ab") as f:
        f.write(b"this is not json\n[1, 2]\n" + b'{"id": "torn-by-a-kill", "tra')
    doc = build([load_run(RunArchive(Path(run.archive_path)))])["runs"][0]
    assert doc["counts"]["records"] == 4
    assert doc["counts"]["bad_lines"] == 2
    assert doc["counts"]["torn_lines"] == 1


def test_a_run_killed_mid_way_reports_as_crashed(tmp_path, episodes):
    script = textwrap.dedent(
        """
        import json, os, signal, sys
        import prime_runs as pr
        records = [json.loads(line) for line in open(sys.argv[2])][:3]
        run = pr.init(name="killed", environments=["e"], model="m", framework="f",
                      mode="offline", dir=sys.argv[1])
        run.log_episodes(records)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    data = Path(__file__).parent / "data" / "episodes.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", script, str(_root()), str(data)], timeout=60, capture_output=True
    )
    assert child.returncode == -9, child.stderr
    (folder,) = _root().iterdir()
    doc = build([load_run(RunArchive(folder))])["runs"][0]
    assert doc["status"] == "crashed?"
    assert doc["summary"] is None  # it never finished: the page shows the computed one
    assert doc["computed_summary"]["avg_reward"] == pytest.approx(
        pr.metrics.from_episodes(episodes[:3])["avg_reward"]
    )
    assert doc["counts"]["records"] == 3


def test_online_and_synced_runs_show_their_platform_id(prime_env, episodes):
    online = pr.init(name="online", environments=["gsm8k"], model="m", framework="verifiers")
    online.log_episodes(episodes[:5])
    online.finish()
    offline = _offline_run(episodes[:3], name="later-synced")
    assert main(["sync", offline.id]) == 0

    runs = [load_run(RunArchive(Path(r.archive_path))) for r in (online, offline)]
    first, second = build(runs)["runs"]
    assert first["mode"] == "online" and first["platform"]["id"] == online.id
    assert first["counts"]["records"] == 5
    (synced_id,) = set(prime_env.evaluations) - {online.id}
    assert second["platform"]["id"] == synced_id and second["pending"] == "-"


def test_several_runs_line_up_by_example(episodes):
    base = _offline_run(episodes, name="base")
    better = [json.loads(json.dumps(e)) for e in episodes]
    for episode in better:
        episode["id"] += "-b"
        for trace in episode["traces"]:
            trace["id"] += "-b"
            trace["rewards"] = {"exact": {"score": 1.0, "weight": 1.0}}
    other = _offline_run(better[:12], name="other")
    data = build([load_run(RunArchive(Path(r.archive_path))) for r in (base, other)])
    assert [r["name"] for r in data["runs"]] == ["base", "other"]
    assert len(data["charts"]["reward"]["counts"]) == 2
    comparison = data["comparison"]
    verdicts = {data["examples"][row[0]]["key"]: row[1] for row in comparison["rows"]}
    assert verdicts["prfix:prfix-0005"] == "better"  # 0 before, 1 now
    assert verdicts["prfix:prfix-0004"] == "worse"  # 1.5 before, 1 now
    assert verdicts["prfix:prfix-0201"] == "missing"  # not in the second run
    assert sum(comparison["counts"][0].values()) == len(data["examples"])


def test_runs_of_the_same_name_are_told_apart_by_a_tag(episodes):
    first = _offline_run(episodes[:2], name="gsm8k-eval")
    second = _offline_run(episodes[:2], name="gsm8k-eval")
    other = _offline_run(episodes[:2], name="other")
    archives = [RunArchive(Path(r.archive_path)) for r in (first, second, other, first)]

    data = build([load_run(a) for a in archives])

    tags = [r["tag"] for r in data["runs"]]
    assert tags[2] is None  # a name no other run has stays as it is
    assert tags[1] == second.id[-8:]  # the random end of a local run id
    assert tags[0] == f"{first.id} #1" and tags[3] == f"{first.id} #2"  # given twice
    title = re.search(r"<title>(.*?)</title>", render(data), re.S).group(1)
    assert html.unescape(title) == (
        f"prime-runs report: gsm8k-eval ({first.id} #1) vs gsm8k-eval ({tags[1]}) vs other "
        f"vs gsm8k-eval ({first.id} #2)"
    )


def test_untrusted_text_cannot_close_the_data_block_and_reads_back_exactly():
    hostile = "</script><script>alert(1)</script> <!-- & \u2028\u2029 <img src=x onerror=alert(2)>"
    lone = "half a pair: \ud83d"  # json.loads accepts it; UTF-8 cannot hold it
    data = {"runs": [{"name": hostile}], "x": [hostile, float("nan"), lone]}
    page = render(data)
    page.encode("utf-8")  # writable as UTF-8
    block = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "&" not in block
    assert "\u2028" not in block and "\u2029" not in block
    assert _data_of(page) == {"runs": [{"name": hostile}], "x": [hostile, None, lone]}
    assert "<title>prime-runs report: &lt;/script&gt;" in page


def test_the_policy_allows_exactly_the_pages_own_script_and_style():
    page = render({"runs": []})
    policy = html.unescape(
        re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1]
    )
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    assert "unsafe-inline" not in policy and "http" not in policy
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    for kind, text in (("script-src", script), ("style-src", style)):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"{kind} 'sha256-{digest}'" in policy
    assert page.count("<script") == 2  # the data block and the one script: nothing external
    assert not re.search(r"(src|href)=\"https?:", page)


def test_the_scripts_never_use_innerhtml():
    for name in (*_html.SCRIPTS, "template.html"):
        text = _html.asset(name)
        for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in text, (name, sink)


def test_cli_writes_the_report_into_the_run_folder(episodes, capsys):
    run = _offline_run(episodes[:3])
    assert main(["report", run.id]) == 0
    written = Path(capsys.readouterr().out.strip())
    assert written == Path(run.archive_path) / "report.html"
    assert _data_of(written.read_text("utf-8"))["runs"][0]["id"] == run.id


def test_cli_report_of_several_runs_to_a_chosen_file(tmp_path, episodes, capsys):
    first, second = _offline_run(episodes[:2]), _offline_run(episodes[2:4])
    target = tmp_path / "both.html"
    assert main(["report", first.id, second.archive_path, "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    ids = [r["id"] for r in _data_of(target.read_text("utf-8"))["runs"]]
    assert ids == [first.id, second.id]


def test_cli_report_errors_are_clear(tmp_path, episodes, capsys):
    assert main(["report", "run-nope"]) == 2
    assert "no run 'run-nope'" in capsys.readouterr().err
    run = _offline_run(episodes[:1])
    assert main(["report", run.id, "-o", str(tmp_path / "no-such-dir" / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "cannot write the report to" in err and "-o" in err
    assert main(["report", run.id, "--embed-mb", "-1"]) == 2
    assert "--embed-mb" in capsys.readouterr().err


def test_show_points_to_the_report(episodes, capsys):
    run = _offline_run(episodes[:1])
    assert main(["show", run.id]) == 0
    assert f"prime-runs report {run.id}" in capsys.readouterr().out


def test_the_wheel_carries_the_page_assets(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = tmp_path.glob("*.whl")
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for asset in (*_html.SCRIPTS, "report.css", "template.html"):
        assert f"prime_runs/_report/{asset}" in names


def test_edge_records_render(tmp_path):
    run = _offline_run(load_jsonl("edge_episodes.jsonl") + load_jsonl("traces.jsonl")[:2])
    page = render(build([load_run(RunArchive(Path(run.archive_path)))]))
    doc = _data_of(page)["runs"][0]
    assert doc["counts"]["records"] == 6 and doc["counts"]["unscored"] == 1
    assert {g["type"] for g in doc["errors"]} >= {"EnvError", "SandboxError"}


def test_cli_open_hands_the_file_to_the_browser(tmp_path, episodes):
    run = _offline_run(episodes[:2])
    # Python's webbrowser runs $BROWSER with %s replaced by the file's URL.
    env = {**os.environ, "BROWSER": "sh -c 'echo \"$0\" > opened.txt' %s"}
    result = subprocess.run(
        [sys.executable, "-m", "prime_runs.cli", "report", run.id, "--open"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    written = Path(result.stdout.strip())
    assert (tmp_path / "opened.txt").read_text().strip() == written.resolve().as_uri()

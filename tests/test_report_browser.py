"""The report in a real browser: headless Chromium (Debian's ``chromium`` package, which
``make test`` installs) driven by Playwright opens the file from ``file://``.

It checks what a person would: the charts are drawn, the per-example table sorts and
filters, the episode browser shows a chosen episode's messages, nothing is logged to the
console, nothing is requested but the file itself, and hostile record content shows as text
without running. The tests skip only when the browser binary is absent.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _support import load_jsonl
from prime_runs._journal.archive import RunArchive
from prime_runs._report import write_report

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # we run as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / ".artifacts"
TOP_OF_PAGE = {"x": 0, "y": 0, "width": 1280, "height": 1240}
HOSTILE_ID = "hostile-episode"
LONG_LINES = 300
SCRIPT_TEXT = "<script>alert(1)</script>"
IMG_TEXT = "<img src=x onerror=\"window.__pwned=1;alert('img')\">"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no browser at {CHROMIUM}: install Debian's chromium (make test does) to run the "
    "report's browser tests",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class Opened:
    page: object
    url: str
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def assert_quiet(self) -> None:
        assert self.console == []
        assert self.requests == [self.url]  # the file itself, nothing else
        assert self.dialogs == []


@pytest.fixture
def open_page(browser) -> Iterator:
    pages = []

    def _open(path: Path) -> Opened:
        page = browser.new_page()
        pages.append(page)
        opened = Opened(page, path.resolve().as_uri())
        page.on(
            "console", lambda m: m.type in ("error", "warning") and opened.console.append(m.text)
        )
        page.on("pageerror", lambda e: opened.console.append(f"page error: {e}"))
        page.on("request", lambda r: opened.requests.append(r.url))
        page.on("dialog", lambda d: (opened.dialogs.append(d.message), d.dismiss()))
        page.goto(opened.url)
        page.wait_for_selector("#browser .episode-item")
        return opened

    yield _open
    for page in pages:
        page.close()


def _hostile_episode() -> dict:
    episode = copy.deepcopy(load_jsonl("episodes.jsonl")[-4])  # a one-trace episode
    episode["id"] = HOSTILE_ID
    episode["task"]["key"] = "hostile:<key>&"
    episode["task"]["data"]["name"] = "<b onmouseover=alert(3)>bold</b>"
    nodes = episode["traces"][0]["nodes"]
    nodes[1]["message"]["content"] = IMG_TEXT
    nodes[-1]["message"]["content"] = SCRIPT_TEXT
    episode["errors"] = [{"type": "<i>Err</i>", "message": "</script><script>alert(4)</script>"}]
    nodes[0]["message"]["content"] = "".join(f"rule {i}: be brief\n" for i in range(LONG_LINES))
    return episode


def _run(root: Path, name: str, episodes: list[dict]) -> RunArchive:
    import prime_runs as pr

    run = pr.init(
        name=name,
        environments=["best-of-n", "user-sim"],
        model="scripted/model",
        framework="verifiers",
        mode="offline",
        dir=root,
    )
    run.log_episodes(episodes)
    run.finish()
    return RunArchive(Path(run.archive_path))


@pytest.fixture
def report(tmp_path: Path, episodes: list[dict]) -> Path:
    archive = _run(tmp_path / "runs", "browser-run", [*episodes, _hostile_episode()])
    return write_report([archive], tmp_path / "report.html")


def _column(page, index: int) -> list[str]:
    return page.eval_on_selector_all(
        f"#examples table.data tbody tr td:nth-child({index})",
        "cells => cells.map(c => c.textContent)",
    )


def test_the_report_draws_its_charts_quietly(report, open_page):
    opened = open_page(report)
    page = opened.page
    assert page.title().startswith("prime-runs report: browser-run")
    charts = page.locator("svg.chart")
    assert charts.count() >= 6  # rewards, functions, tokens, duration, latency, turns
    for i in range(charts.count()):
        assert charts.nth(i).locator("rect.bar").count() > 0
        box = charts.nth(i).bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50
    assert "browser-run" in page.inner_text("#runs")
    opened.assert_quiet()


def test_the_example_table_sorts_and_filters(report, open_page):
    opened = open_page(report)
    page = opened.page
    headers = page.eval_on_selector_all("#examples th", "ths => ths.map(t => t.textContent)")
    mean = headers.index("Mean reward ± SE") + 1
    page.click("#examples th >> text=Mean reward")
    values = [float(v.split(" ± ")[0]) for v in _column(page, mean)]
    assert values == sorted(values) and values[0] < values[-1]
    page.click("#examples th >> text=Mean reward")
    assert [float(v.split(" ± ")[0]) for v in _column(page, mean)] == sorted(values, reverse=True)
    assert page.get_attribute("#examples th >> text=Mean reward", "aria-sort") == "descending"
    page.focus("#examples th >> text=Rollouts")
    page.keyboard.press("Enter")  # headers sort from the keyboard too
    assert page.get_attribute("#examples th >> text=Rollouts", "aria-sort") == "ascending"

    everything = len(_column(page, 1))
    page.fill("#examples input[type=search]", "greet")
    names = _column(page, 1)
    assert 0 < len(names) < everything and all("greet" in n for n in names)
    opened.assert_quiet()


def test_the_episode_browser_shows_a_chosen_episodes_messages(report, open_page, episodes):
    opened = open_page(report)
    page = opened.page
    chosen = next(e for e in episodes if e["task"]["data"]["name"] == "notes-tool")
    page.fill("#browser input[type=search]", chosen["id"])
    assert page.locator("#browser .episode-item").count() == 1
    page.click("#browser .episode-item")
    detail = page.locator("#episode-detail")
    assert chosen["id"] in detail.inner_text()
    trace = chosen["traces"][0]
    roles = detail.locator(".trace").first.locator(".message-head .badge")
    assert roles.all_inner_texts() == [n["message"]["role"] for n in trace["nodes"]]
    text = detail.inner_text()
    for node in trace["nodes"]:
        content = node["message"].get("content")
        if content:
            assert content.strip().splitlines()[0] in text
    call = next(
        n["message"]["tool_calls"][0] for n in trace["nodes"] if n["message"].get("tool_calls")
    )
    assert call["name"] in detail.locator(".tool-call").first.inner_text()
    assert detail.locator(".trace").count() == len(chosen["traces"])
    opened.assert_quiet()


def test_hostile_content_is_shown_as_text_and_never_runs(report, open_page):
    opened = open_page(report)
    page = opened.page
    page.fill("#browser input[type=search]", HOSTILE_ID)
    page.click("#browser .episode-item")
    detail = page.locator("#episode-detail")
    messages = detail.locator(".message pre.content").all_inner_texts()
    assert SCRIPT_TEXT in messages and IMG_TEXT in messages
    assert "</script><script>alert(4)</script>" in detail.inner_text()
    assert "<b onmouseover=alert(3)>bold</b>" in page.inner_text("#examples")
    page.hover("#examples td >> text=<b onmouseover=alert(3)>bold</b>")
    assert page.locator("#app img, #app b, #app i, #app script").count() == 0
    assert page.evaluate("window.__pwned") is None
    opened.assert_quiet()  # no dialog ever opened


def test_two_runs_side_by_side(tmp_path, open_page, episodes):
    better = copy.deepcopy(episodes)
    for episode in better:
        for trace in episode["traces"]:
            trace["rewards"] = {"exact": {"score": 1.0, "weight": 1.0}}
    first = _run(tmp_path / "runs", "first", episodes)
    second = _run(tmp_path / "runs", "second", better[:10])
    opened = open_page(write_report([first, second], tmp_path / "both.html"))
    page = opened.page
    assert page.locator("#overview .legend-item").first.inner_text() == "first"
    assert page.locator(".run-card").count() == 2
    comparison = page.inner_text("#comparison")
    assert "second against first" in comparison and "better" in comparison
    everything = page.locator("#examples tbody tr").count()
    page.select_option("#examples select", "worse")
    worse = page.locator("#examples tbody tr")
    assert 0 < worse.count() < everything
    assert all(text == "worse" for text in worse.locator("td:last-child").all_inner_texts())
    page.select_option("#browser select", "1")
    assert page.locator("#browser .episode-item").count() == 10
    opened.assert_quiet()


def test_two_runs_of_the_same_name_are_named_apart_everywhere(tmp_path, open_page, episodes):
    first = _run(tmp_path / "runs", "gsm8k-eval", episodes)
    second = _run(tmp_path / "runs", "gsm8k-eval", episodes[:10])
    opened = open_page(write_report([first, second], tmp_path / "same.html"))
    page = opened.page
    labels = [f"gsm8k-eval ({a.run_id[-8:]})" for a in (first, second)]

    for legend in page.locator("#overview .legend, #usage .legend").all():
        assert legend.locator(".legend-item").all_inner_texts() == labels
    cards = [t.strip() for t in page.locator(".run-card h3").all_inner_texts()]
    assert [card.startswith(label) for card, label in zip(cards, labels, strict=True)] == [
        True,
        True,
    ], cards
    assert page.inner_text("header .subtitle") == " vs ".join(labels)
    assert [h.strip() for h in page.locator("#errors h3").all_inner_texts()] == labels
    assert f"{labels[1]} against {labels[0]}" in page.inner_text("#comparison")
    headers = page.locator("#examples thead th").all_inner_texts()
    assert {f"Rollouts ({label})" for label in labels} <= {h.strip() for h in headers}
    options = page.locator("#browser select option").all_inner_texts()
    assert labels[0] in options and labels[1] in options
    opened.assert_quiet()


def test_a_count_of_one_is_in_the_singular(tmp_path, open_page):
    one = copy.deepcopy(load_jsonl("episodes.jsonl")[-4])  # a one-trace episode
    opened = open_page(write_report([_run(tmp_path / "runs", "one", [one])], tmp_path / "1.html"))
    page = opened.page

    card = page.inner_text(".run-card")
    assert "1 (1 trace)" in card and "over 1 scored episode)" in card, card
    assert page.inner_text("#examples .count") == "1 row"
    opened.assert_quiet()


def test_a_large_run_renders_a_page_of_rows_at_a_time(tmp_path, open_page, episodes):
    many = []
    for i in range(1200):
        episode = copy.deepcopy(episodes[i % len(episodes)])
        episode["id"] = f"ep-{i:05d}"
        episode["task"]["key"] = f"task-{i % 300}"
        many.append(episode)
    archive = _run(tmp_path / "runs", "large", many)
    opened = open_page(write_report([archive], tmp_path / "large.html", budget=400_000))
    page = opened.page
    assert page.locator("#browser .episode-item").count() == 100
    assert page.locator("#examples tbody tr").count() == 100
    page.click("#browser button.more")
    assert page.locator("#browser .episode-item").count() == 600
    page.check("#browser label:has-text('with messages only') input")
    embedded = page.locator("#browser .episode-item").count()
    assert 0 < embedded < 600
    page.uncheck("#browser label:has-text('with messages only') input")
    page.fill("#browser input[type=search]", "ep-01199")
    page.click("#browser .episode-item")
    assert "not embedded" in page.inner_text("#episode-detail")  # past the budget: rows only
    opened.assert_quiet()


def test_screenshot_of_the_demo_runs_report(tmp_path, open_page):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIME_")}
    env.update(PRIME_RUNS_DIR=str(tmp_path / "runs"), HOME=str(tmp_path))
    demo = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    path = re.search(r"^  report\s+(\S+)", demo.stdout, re.M)[1]
    opened = open_page(tmp_path / path)
    page = opened.page
    page.click("#browser .episode-item >> nth=14")
    page.wait_for_selector("#episode-detail .message")
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / "report-demo.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 20_000
    # The top of the page, as docs/img/report.png shows it.
    page.screenshot(path=str(ARTIFACTS / "report-demo-top.png"), full_page=True, clip=TOP_OF_PAGE)
    opened.assert_quiet()


def test_long_content_is_folded_until_asked(report, open_page):
    opened = open_page(report)
    page = opened.page
    page.fill("#browser input[type=search]", HOSTILE_ID)
    page.click("#browser .episode-item")
    system = page.locator("#episode-detail .message-system").first
    folded = system.locator("pre.content").inner_text()
    assert folded.startswith("rule 0: be brief") and "rule 299" not in folded
    button = system.locator("button.unfold")
    assert "Show all" in button.inner_text()
    button.click()
    assert system.locator("pre.content").inner_text().count("be brief") == LONG_LINES
    assert button.inner_text() == "Fold"
    opened.assert_quiet()


def test_tables_lead_into_the_episode_browser(report, open_page, episodes):
    opened = open_page(report)
    page = opened.page
    page.click("#examples td >> text=notes-tool")
    assert page.input_value("#browser input[type=search]") == "prfix:prfix-0004"
    names = page.locator("#browser .episode-name").all_inner_texts()
    assert names and set(names) == {"notes-tool"}
    page.click("#errors button.link >> nth=0")
    detail = page.inner_text("#episode-detail")
    assert "ProviderError" in detail and "failed" in detail
    opened.assert_quiet()


# -- issue 23: search in messages, input/target/output, export, standard errors, config ---


def _episodes_saying(episodes: list[dict], phrase: str) -> set[str]:
    return {
        e["id"]
        for e in episodes
        for t in e["traces"]
        for n in t.get("nodes", [])
        if phrase in str(n["message"].get("content") or "")
    }


def test_the_episode_search_finds_message_content(report, open_page, episodes):
    opened = open_page(report)
    page = opened.page
    phrase = "D'après la note"  # said by the assistant only: no id, name, stop or error has it
    expected = _episodes_saying(episodes, phrase)
    assert expected

    page.fill("#browser input[type=search]", phrase.lower())

    found = page.eval_on_selector_all(
        "#browser .episode-item", "items => items.map(i => i.dataset.episode)"
    )
    assert set(found) == expected
    opened.assert_quiet()


def _first_per_example(episodes: list[dict]) -> dict[str, dict]:
    first: dict[str, dict] = {}
    for episode in episodes:
        first.setdefault(episode["task"]["key"], episode)
    return first


def test_examples_show_input_target_output_and_standard_errors(report, open_page, episodes):
    opened = open_page(report)
    page = opened.page
    headers = page.eval_on_selector_all("#examples th", "ths => ths.map(t => t.textContent)")
    assert {"Input", "Target", "Output", "Mean reward ± SE"} <= set(headers)

    page.fill("#examples input[type=search]", "say exactly: hello world")  # an input's text
    (row,) = page.eval_on_selector_all(
        "#examples table.data tbody tr",
        "rows => rows.map(r => [...r.children].map(c => c.textContent))",
    )
    first = _first_per_example(episodes)["prfix:prfix-0001"]
    said = [n["message"] for n in first["traces"][0]["nodes"]]
    user = next(m["content"] for m in said if m["role"] == "user")
    reply = [m["content"] for m in said if m["role"] == "assistant"][-1]
    cells = dict(zip(headers, row, strict=True))
    assert cells["Input"] == user and cells["Target"] == first["task"]["data"]["answer"]
    assert cells["Output"] == reply
    mean, se = cells["Mean reward ± SE"].split(" ± ")
    assert 0 <= float(mean) <= 1 and float(se) > 0  # two rollouts with different rewards
    assert " ± " in page.inner_text("#overview table")  # reward functions and metrics
    assert "± standard error, over" in page.inner_text("#runs")
    opened.assert_quiet()


def _download(page, button: str) -> str:
    with page.expect_download() as info:
        page.click(f"#examples button.{button}")
    return Path(info.value.path()).read_text("utf-8")


def test_the_example_table_exports_what_it_shows_as_csv_and_jsonl(tmp_path, open_page, episodes):
    formula = copy.deepcopy(episodes[0])
    formula["id"], formula["task"]["key"] = "formula-episode", "formula:key"
    formula["task"]["data"]["name"] = '=HYPERLINK("http://example.invalid","x")'
    archive = _run(tmp_path / "runs", "export-run", [*episodes, formula])
    opened = open_page(write_report([archive], tmp_path / "report.html"))
    page = opened.page
    page.fill("#examples input[type=search]", "prfix-000")  # six examples of the run

    rows = [json.loads(line) for line in _download(page, "export-jsonl").splitlines()]
    table = page.eval_on_selector_all(
        "#examples table.data tbody tr td:first-child", "cells => cells.map(c => c.textContent)"
    )
    assert [r["example"] for r in rows] == table and len(rows) == 6
    first = rows[[r["key"] for r in rows].index("prfix:prfix-0001")]
    rewards = [
        e["traces"][0]["rewards"] for e in episodes if e["task"]["key"] == "prfix:prfix-0001"
    ]
    assert first["rollouts"] == len(rewards) and first["target"] == "hello world"
    assert first["input"] == "Say exactly: hello world"
    assert {"mean_reward", "mean_reward_se", "pass_at_1", "failed", "output"} <= set(first)

    page.fill("#examples input[type=search]", "")
    lines = _download(page, "export-csv").splitlines()
    header = lines[0].split(",")
    assert header[:7] == ["key", "example", "idx", "environment", "input", "target", "output"]
    assert len(lines) == 1 + len(_first_per_example([*episodes, formula]))
    (line,) = [line for line in lines if line.startswith("formula:key,")]
    assert "'=HYPERLINK" in line  # a spreadsheet shows it as text, never runs it
    opened.assert_quiet()


def test_the_header_shows_config_values_and_the_launch_file(tmp_path, open_page, episodes):
    import prime_runs as pr

    launch = tmp_path / "eval.toml"
    launch.write_text('model = "scripted/model"\n[sampling]\ntemperature = 0.0\n')
    run = pr.init(name="config-run", environments=["e"], config=str(launch), mode="offline",
                  dir=tmp_path / "runs")  # fmt: skip
    run.log_episodes(episodes[:2])
    run.finish()
    other = pr.init(name="values-run", environments=["e"], config={"temperature": 0.0, "k": 4},
                    mode="offline", dir=tmp_path / "runs")  # fmt: skip
    other.log_episodes(episodes[:2])
    other.finish()
    archives = [RunArchive(Path(r.archive_path)) for r in (run, other)]
    opened = open_page(write_report(archives, tmp_path / "report.html"))
    page = opened.page

    cards = page.locator("#runs .run-card")
    values = cards.nth(1).locator(".config-values li").all_inner_texts()
    assert values == ["temperature = 0.0", "k = 4"]
    launch_file = cards.nth(0).locator("details.config-file")
    assert "launch file eval.toml (toml, 54 bytes)" in launch_file.inner_text()
    launch_file.locator("summary").click()
    assert launch_file.locator("pre").inner_text() == launch.read_text().rstrip("\n")
    opened.assert_quiet()

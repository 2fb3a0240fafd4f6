"""The report of a training run in a real browser (headless Chromium from ``file://``, as
``test_report_browser`` opens the eval report): one chart per metric by step, smoothing and
log scale, the values under the pointer, episodes by step with on- and off-policy told
apart, the sample table, two runs overlaid, and a 100,000-step run that still opens in
about a second. Screenshots go to ``.artifacts/``."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

import prime_runs as pr
import test_report_browser as eval_report
from _training_loop import STEPS, train_offline
from prime_runs._journal.archive import RunArchive
from prime_runs._report import write_report

ARTIFACTS, CHROMIUM = eval_report.ARTIFACTS, eval_report.CHROMIUM
# The eval report's browser and page fixtures, shared.
browser, open_page = eval_report.browser, eval_report.open_page
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no browser at {CHROMIUM}: install Debian's chromium (make test does) to run the "
    "report's browser tests",
)
LOAD_BUDGET = 2.5  # seconds: "about a second" on a quiet machine, with room for a busy one
BIG_STEPS = 100_000


def _archive(run: pr.Run) -> RunArchive:
    return RunArchive(Path(str(run.archive_path)))


@pytest.fixture
def report(isolated_env: Path, tmp_path: Path, episodes: list[dict]) -> Path:
    return write_report([_archive(train_offline(episodes))], tmp_path / "train.html")


def _series_d(page, metric: str) -> list[str]:
    return page.eval_on_selector_all(
        f'#metrics figure[data-metric="{metric}"] path.series',
        "ps => ps.map(p => p.getAttribute('d'))",
    )


def _points(d: str) -> int:
    return d.count("L") + 1


def test_a_training_report_charts_every_metric_by_step(report, open_page):
    opened = open_page(report)
    page = opened.page
    nav = page.inner_text("header nav")
    assert "Metrics" in nav and "Sample table" in nav and "Examples" not in nav
    assert page.locator("#examples").count() == 0  # no per-example table for training
    titles = page.eval_on_selector_all("#metrics figure", "fs => fs.map(f => f.dataset.metric)")
    assert titles == ["loss", "reward/mean"]
    (loss,) = _series_d(page, "loss")
    assert _points(loss) == STEPS
    last = float(f"{2.0 * math.exp(-(STEPS - 1) / 8):.4g}")
    assert f"last {last} (step {STEPS - 1})" in page.inner_text(
        '#metrics figure[data-metric="loss"]'
    )
    assert page.locator("#steps path.series").count() == 3  # reward; all and off-policy episodes
    card = page.inner_text("#runs")
    assert "max_steps=30 · batch_size=8 · rollouts_per_example=2" in card
    assert "No values to plot" not in page.inner_text("#app")
    opened.assert_quiet()


def test_smoothing_and_log_scale_redraw_the_charts(report, open_page):
    opened = open_page(report)
    page = opened.page
    (raw,) = _series_d(page, "loss")
    page.check("#metrics .smooth-toggle")
    (smooth,) = _series_d(page, "loss")
    assert smooth != raw and _points(smooth) == _points(raw)
    assert page.locator('#metrics figure[data-metric="loss"] path.raw').count() == 1
    page.uncheck("#metrics .smooth-toggle")
    assert _series_d(page, "loss") == [raw]
    box = page.locator('#metrics figure[data-metric="loss"]')
    assert not box.locator(".log-toggle").is_checked()  # 2 to 0.05: linear helps more
    box.locator(".log-toggle").check()
    ticks = box.locator("text.tick").all_text_contents()
    assert {"0.1", "1"} <= set(ticks)  # powers of ten
    opened.assert_quiet()


def test_pointing_at_a_chart_reads_the_values_at_that_step(report, open_page):
    opened = open_page(report)
    page = opened.page
    chart = page.locator('#metrics figure[data-metric="loss"] svg')
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    left, right = box["width"] * 54 / 460, box["width"] * (460 - 14) / 460  # the plot area
    page.mouse.move(
        box["x"] + left + (right - left) * 10 / (STEPS - 1), box["y"] + box["height"] / 2
    )
    tip = page.locator('#metrics figure[data-metric="loss"] .tip')
    assert tip.is_visible()
    assert tip.inner_text() == f"step 10: {2.0 * math.exp(-10 / 8):.3f}"
    opened.assert_quiet()


def test_episodes_are_browsable_by_step_and_policy(report, open_page):
    opened = open_page(report)
    page = opened.page
    page.click("#samples tbody tr >> nth=1")  # step 10 of the sample table
    items = page.locator("#browser .episode-item")
    assert page.input_value("#browser input[aria-label=step]") == "10"
    assert items.count() == 2 and set(items.locator(".step").all_inner_texts()) == {"step 10"}
    assert sorted(items.locator(".badge").all_inner_texts()) == ["off-policy +1", "on-policy"]
    page.select_option("#browser select[aria-label=policy]", "off-policy")
    assert items.count() == 1
    items.first.click()
    detail = page.inner_text("#episode-detail")
    assert re.search(r"step\s+10 \(dispatch step", detail) and "off-policy (lag 1)" in detail
    page.select_option("#browser select[aria-label=policy]", "all")
    page.fill("#browser input[aria-label=step]", "3-5")
    assert items.count() == 6
    table = page.inner_text("#samples")
    assert "3 steps: 0 rows stored, 3 pending, 3 episodes without a row." in table
    opened.assert_quiet()


def test_two_training_runs_are_overlaid_on_the_same_charts(
    isolated_env, tmp_path, episodes, open_page
):
    slow = train_offline(episodes, "slow", speed=0.5)
    fast = train_offline(episodes, "fast", steps=20, speed=2.0)
    opened = open_page(write_report([_archive(slow), _archive(fast)], tmp_path / "both.html"))
    page = opened.page
    strokes = page.eval_on_selector_all(
        '#metrics figure[data-metric="loss"] path.series',
        "ps => ps.map(p => p.getAttribute('stroke'))",
    )
    assert strokes == ["#2563eb", "#ea580c"]  # one line per run, in the runs' colours
    assert [_points(d) for d in _series_d(page, "loss")] == [STEPS, 20]
    assert page.locator("#metrics .legend-item").all_inner_texts() == ["slow", "fast"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#metrics").screenshot(path=str(ARTIFACTS / "report-training-two-runs.png"))
    opened.assert_quiet()


def _long_run(episodes: list[dict], root: Path) -> pr.Run:
    run = pr.init(
        kind="train", name="long", model="m", team_id="t", mode="offline", dir=root,
        training=pr.TrainingSpec(max_steps=BIG_STEPS),
    )  # fmt: skip
    for step in range(BIG_STEPS):
        if step % 10_000 == 0:
            record = dict(episodes[0], id=f"long-{step}")
            run.log_episodes([dict(record, run={"work": {"type": "train", "step": step}})])
        x = step / BIG_STEPS
        run.log_metrics(
            {
                "loss": 2 * math.exp(-3 * x) + 0.1 * math.sin(step),
                "kl": 0.01 * x,
                "lr": 1e-5 * (1 - x) + 1e-9,
            },
            step=step,
        )
    run.finish()
    return run


def test_a_100000_step_run_opens_in_about_a_second(isolated_env, tmp_path, episodes, open_page):
    run = _long_run(episodes, tmp_path / "runs")
    started = time.perf_counter()
    path = write_report([_archive(run)], tmp_path / "long.html")
    written = time.perf_counter() - started

    opened = open_page(path)
    page = opened.page

    loaded = page.evaluate("performance.now()") / 1000  # navigation start to drawn
    print(f"100,000 steps: report written in {written:.2f} s, {path.stat().st_size / 1e6:.1f} MB, "
          f"drawn in {loaded:.2f} s")  # fmt: skip
    assert loaded < LOAD_BUDGET
    for d in _series_d(page, "loss") + _series_d(page, "kl"):
        assert _points(d) == 1000  # bucketed: the page holds 1,000 points a metric
    assert page.locator('#metrics figure[data-metric="loss"] path.band').count() == 1
    assert page.locator('#metrics figure[data-metric="lr"] .log-toggle').is_checked()  # 4 decades
    assert "last " in page.inner_text('#metrics figure[data-metric="loss"]')
    page.locator("#metrics").screenshot(path=str(ARTIFACTS / "report-training-100k.png"))
    opened.assert_quiet()


def test_screenshot_of_a_training_runs_report(report, open_page):
    opened = open_page(report)
    page = opened.page
    assert page.locator("#metrics svg.chart, #steps svg.chart").count() == 4
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-training.png"), full_page=True)
    page.screenshot(
        path=str(ARTIFACTS / "report-training-top.png"),
        clip={"x": 0, "y": 0, "width": 1280, "height": 1100},
    )
    assert (ARTIFACTS / "report-training.png").stat().st_size > 20_000
    opened.assert_quiet()

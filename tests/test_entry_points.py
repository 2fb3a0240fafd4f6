"""pr.init, configure_exporter on a user's provider, and raw spans produce the same archive."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

import _archives
import prime_runs as pr
from prime_runs import semconv

ATTRS = {
    semconv.RUN_NAME: "same",
    semconv.RUN_ENVIRONMENTS: ["prfix-v1"],
    semconv.RUN_MODEL: "scripted/model",
    semconv.RUN_FRAMEWORK: "verifiers",
    semconv.RUN_CONFIG: json.dumps({"rollouts": 2}),
}


def snapshot(run_dir: Path) -> dict:
    archive = _archives.Archive(run_dir)
    records = []
    for _, kind, data in archive.iter_records():
        record = json.loads(data)
        assert record["run"]["id"] == archive.run_id
        for member in record.get("traces", []):
            assert member["run"]["id"] == archive.run_id
        records.append((kind, json.dumps(record).replace(archive.run_id, "<run>")))
    desc = archive.description()
    status = archive.status()
    return {
        "records": records,
        "description": {
            k: desc.get(k) for k in ("name", "environments", "model", "framework", "config", "mode")
        },
        "status": status["status"],
        "summary": status["summary"],
    }


def via_init(root: Path, episodes: list[dict]) -> Path:
    run = pr.init(
        name="same",
        environments=["prfix-v1"],
        model="scripted/model",
        framework="verifiers",
        config={"rollouts": 2},
        mode="offline",
        dir=root,
    )
    run.log_episodes(episodes)
    run.finish()
    return Path(run.archive_path)


def via_configure_exporter(root: Path, episodes: list[dict]) -> Path:
    provider = TracerProvider()
    processor = pr.configure_exporter(provider, mode="offline", dir=root)
    assert pr.configure_exporter(provider, mode="offline", dir=root) is processor  # idempotent
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=ATTRS):
        pr.log_episodes(episodes)
    assert provider.force_flush()  # the close-out runs in the background
    (run_dir,) = [a.path for a in _archives.runs(root)]
    return run_dir


RAW_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    import prime_runs as pr

    trace.set_tracer_provider(TracerProvider())      # the application's own setup
    pr.configure_exporter(mode="offline", dir=sys.argv[1])
    tracer = trace.get_tracer("app")
    attrs = json.loads(sys.argv[2])
    with tracer.start_as_current_span("run", attributes=attrs):
        for line in sys.stdin:
            with tracer.start_as_current_span("episode", attributes={"prime.record": line}):
                pass
    """
)


def via_raw_spans(root: Path, episodes: list[dict]) -> Path:
    stdin = "".join(json.dumps(e) + "\n" for e in episodes)
    subprocess.run(
        [sys.executable, "-c", RAW_SCRIPT, str(root), json.dumps(ATTRS)],
        input=stdin,
        text=True,
        check=True,
        timeout=60,
    )
    (run_dir,) = [a.path for a in _archives.runs(root)]
    return run_dir


def test_three_entry_points_produce_the_same_archive(tmp_path, episodes):
    a = snapshot(via_init(tmp_path / "a", episodes))
    b = snapshot(via_configure_exporter(tmp_path / "b", episodes))
    c = snapshot(via_raw_spans(tmp_path / "c", episodes))
    assert a["status"] == "completed"
    assert len(a["records"]) == len(episodes)
    assert a == b
    assert a == c


def test_raw_run_span_with_error_status_is_failed(tmp_path):
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=tmp_path)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=ATTRS) as span:
        span.set_status(Status(StatusCode.ERROR, "eval broke"))
    assert provider.force_flush()
    (archive,) = _archives.runs(tmp_path)
    status = archive.status()
    assert status["status"] == "failed"
    assert status["error"] == "eval broke"


def test_raw_run_span_status_attribute_and_summary(tmp_path):
    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=tmp_path)
    tracer = provider.get_tracer("app")
    attrs = {
        **ATTRS,
        semconv.RUN_STATUS: "cancelled",
        semconv.RUN_SUMMARY: json.dumps({"avg_reward": 0.25}),
    }
    with tracer.start_as_current_span("run", attributes=attrs):
        pass
    assert provider.force_flush()
    (archive,) = _archives.runs(tmp_path)
    assert archive.status()["status"] == "cancelled"
    assert archive.status()["summary"] == {"avg_reward": 0.25}


def test_spans_outside_a_run_pass_through(tmp_path, span_capture):
    provider, exporter = span_capture
    pr.configure_exporter(provider, mode="offline", dir=tmp_path)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("http.request"):
        with tracer.start_as_current_span("episode", attributes={"prime.record": "{}"}):
            pass
    assert [s.name for s in exporter.get_finished_spans()] == ["episode", "http.request"]
    assert _archives.runs(tmp_path) == []


def test_a_bad_raw_record_is_contained(tmp_path, caplog):
    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=tmp_path)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=ATTRS):
        with tracer.start_as_current_span("episode", attributes={"prime.record": "{not json"}):
            pass
        ok = '{"id": "ok", "traces": []}'
        with tracer.start_as_current_span("episode", attributes={"prime.record": ok}):
            pass
    assert provider.force_flush()
    (archive,) = _archives.runs(tmp_path)
    assert [json.loads(d)["id"] for _, _, d in archive.iter_records()] == ["ok"]
    assert archive.status()["status"] == "completed"


def test_init_attaches_to_the_global_sdk_provider_and_never_replaces_it(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import prime_runs as pr

        mine = TracerProvider()
        exporter = InMemorySpanExporter()
        mine.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(mine)
        run = pr.init(name="g", environments=["e"], mode="offline", dir=sys.argv[1])
        run.log_episodes([{"id": "a", "traces": []}])
        run.finish()
        assert trace.get_tracer_provider() is mine
        print(sorted(s.name for s in exporter.get_finished_spans()))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.strip() == "['episode', 'run']"


def test_init_without_a_configured_provider_installs_none(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        import prime_runs as pr

        run = pr.init(name="g", environments=["e"], mode="offline", dir=sys.argv[1])
        run.finish()
        # The application can still install its own provider afterwards.
        mine = TracerProvider()
        trace.set_tracer_provider(mine)
        print(trace.get_tracer_provider() is mine)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.strip() == "True"


def test_raw_run_with_an_unknown_status_still_closes(tmp_path, caplog):
    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=tmp_path)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes={**ATTRS, semconv.RUN_STATUS: "done"}):
        pass
    assert provider.force_flush()
    (archive,) = _archives.runs(tmp_path)
    assert archive.status()["status"] == "completed"
    assert "'done' is not a run status" in caplog.text


def test_episode_spans_carry_a_readable_reward(span_capture, episodes):
    provider, exporter = span_capture
    run = pr.init(name="r", environments=["e"], mode="offline", tracer_provider=provider)
    run.log_episodes(episodes[16:17])  # a single-trace episode
    run.finish()
    span = next(s for s in exporter.get_finished_spans() if s.name == "episode")
    rewards = episodes[16]["traces"][0]["rewards"]
    expected = sum(r["score"] * r["weight"] for r in rewards.values() if r)
    assert span.attributes[semconv.RECORD_REWARD] == expected

"""The run processor finds the provider the spans land on, whichever was set up first (issue
32): a provider that wraps an SDK one (Logfire's proxy), a global provider installed after
``pr.init()`` (Langfuse's), none at all (the Agents SDK's instrumentation on the global
tracer), and a provider OpenTelemetry refused as the global one (said, with the fix).

Each case runs in a process of its own: the global provider can be set once per process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import _archives

CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 2}  # fmt: skip

PRELUDE = f"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
import prime_runs as pr
CHAT = {CHAT!r}
ROOT = sys.argv[1]


class Wrapping(trace.TracerProvider):
    # As Logfire's ProxyTracerProvider: an API provider forwarding to an SDK one.
    def __init__(self, provider):
        self.provider = provider

    def get_tracer(self, *args, **kwargs):
        return self.provider.get_tracer(*args, **kwargs)


def episode(tracer, key):
    with tracer.start_as_current_span("episode", attributes={{"prime.task.key": key}}):
        tracer.start_span("chat m", attributes=CHAT).end()
        pr.record_score("correct", 1.0)
"""


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _episodes(tmp_path: Path) -> list[dict[str, Any]]:
    found = _archives.only(tmp_path / "runs").records()
    return [record for record in found if "traces" in record]


def _calls(tmp_path: Path) -> list[int]:
    return [len(e["traces"][0]["calls"]) for e in _episodes(tmp_path)]


def test_configure_exporter_finds_the_sdk_provider_a_wrapping_global_one_holds(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, """
        inner = TracerProvider()
        trace.set_tracer_provider(Wrapping(inner))
        processor = pr.configure_exporter(mode="offline", dir=ROOT)
        assert pr.configure_exporter(Wrapping(inner)) is processor  # passed explicitly too
        tracer = trace.get_tracer("app")
        with tracer.start_as_current_span("run", attributes={"prime.run.environments": ["e"]}):
            episode(tracer, "a")
        inner.force_flush()
    """)  # fmt: skip
    assert "Overriding" not in done.stderr
    assert _calls(tmp_path) == [1]


def test_init_runs_on_the_sdk_provider_a_wrapping_global_one_holds(tmp_path: Path) -> None:
    _run(tmp_path, """
        trace.set_tracer_provider(Wrapping(TracerProvider()))
        run = pr.init(name="w", environments=["e"], mode="offline", dir=ROOT)
        with run:
            episode(trace.get_tracer("app"), "a")
    """)  # fmt: skip
    assert _calls(tmp_path) == [1]


def test_a_global_provider_installed_after_init_is_joined(tmp_path: Path) -> None:
    # pr.init() before Langfuse(): the tool installs its own provider as the global one.
    done = _run(tmp_path, """
        run = pr.init(name="late", environments=["e"], mode="offline", dir=ROOT)
        theirs = TracerProvider()
        trace.set_tracer_provider(theirs)
        with run:
            for key in ("a", "b"):
                episode(trace.get_tracer("app"), key)
        assert trace.get_tracer_provider() is theirs
    """)  # fmt: skip
    assert _calls(tmp_path) == [1, 1], done.stderr


def test_with_no_provider_at_all_the_runs_own_becomes_the_global_one(tmp_path: Path) -> None:
    # An instrumentation that took its tracer from the global provider before any was set
    # (the Agents SDK's), and a tool that attaches to an existing SDK provider (Langfuse's).
    _run(tmp_path, """
        early = trace.get_tracer("instrumentation")
        run = pr.init(name="none", environments=["e"], mode="offline", dir=ROOT)
        with run:
            provider = trace.get_tracer_provider()
            assert isinstance(provider, TracerProvider)
            episode(early, "a")  # record_score finds a recording span
        print(json.dumps(run.errors))
    """)  # fmt: skip
    assert _calls(tmp_path) == [1]


def test_a_provider_refused_as_the_global_one_is_named_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "othertool.py").write_text(textwrap.dedent("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        def configure():
            trace.set_tracer_provider(TracerProvider())
    """))  # fmt: skip
    done = _run(tmp_path, """
        sys.path.insert(0, ".")
        pr.configure_exporter(mode="offline", dir=ROOT)
        import othertool
        othertool.configure()
        othertool.configure()
    """)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.startswith("prime-runs:")]
    (line,) = lines
    assert "othertool set up a TracerProvider of its own" in line
    assert "provider.add_span_processor(pr.RunProcessor())" in line


def test_a_tools_batching_processor_on_the_runs_global_provider_is_flushed_at_exit(
    tmp_path: Path,
) -> None:
    # MLflow's unified mode adds a batching OTLP processor to the global SDK provider.
    done = _run(tmp_path, """
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult

        class Printing(SpanExporter):
            def export(self, spans):
                print(*(s.name for s in spans), flush=True)
                return SpanExportResult.SUCCESS

        run = pr.init(name="flush", environments=["e"], mode="offline", dir=ROOT)
        with run:
            trace.get_tracer_provider().add_span_processor(
                BatchSpanProcessor(Printing(), schedule_delay_millis=600_000)
            )
            episode(trace.get_tracer("app"), "a")
    """)  # fmt: skip
    assert done.stdout.split() == ["chat", "m", "episode", "run"]

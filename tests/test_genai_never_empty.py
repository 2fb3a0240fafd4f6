"""An episode is never stored empty or wrong in silence (issue 32): no span under it, spans
of another tool's namespaces only, calls written onto the episode span itself or after it
ended (LiteLLM's pattern); an OpenInference ``AGENT`` span's ``agent.name`` names the trace;
a processor added after the run span started (MLflow's, lazily) is shown the starts it
missed. Hand-built spans on a real provider with the run processor; the offline archive."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

import prime_runs as pr
from _genai_support import RUN_ATTRS, chat_attrs, episodes, provider, text

CHAT = chat_attrs("m", [text("user", "2+2?")], [text("assistant", "4")], (3, 1))


def test_an_openinference_agent_spans_agent_name_names_the_trace(isolated_env: Path) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agents")
    agent = {"openinference.span.kind": "AGENT", "agent.name": "adder"}
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "oi-model",
           "llm.output_messages.0.message.role": "assistant",
           "llm.output_messages.0.message.content": "4"}  # fmt: skip
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            with tracer.start_as_current_span("adder", attributes=agent):
                tracer.start_span("response", attributes=llm).end()
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert trace["agent"]["name"] == "adder"
    assert len(trace["calls"]) == 1


def test_an_episode_of_another_tools_spans_says_which_namespaces_it_saw(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("app")
    langfuse = {"langfuse.observation.type": "generation", "langfuse.observation.model.name": "m"}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        for _ in range(3):
            with tracer.start_as_current_span("episode"):
                tracer.start_span("OpenAI-generation", attributes=langfuse).end()
                tracer.start_span("mlflow", attributes={"mlflow.spanType": "LLM"}).end()
    tracer_provider.force_flush()
    assert [len(r["traces"][0]["calls"]) for r in episodes(isolated_env)] == [0, 0, 0]
    reports = [r.getMessage() for r in caplog.records if "nothing mapped" in r.getMessage()]
    assert len(reports) == 2  # the first, then the count at the run's end
    assert "langfuse.observation.*, mlflow.*" in reports[0]
    assert "Langfuse's own spans carry no GenAI attributes" in reports[0]
    assert "3 cases of 'nothing mapped'" in reports[1]


def test_an_episode_with_no_span_under_it_says_its_calls_reached_no_run(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            pr.record_score("correct", 1.0)
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert record["traces"][0]["rewards"]["correct"]["score"] == 1.0
    assert "nothing mapped: no span ended under it" in caplog.text


def test_calls_written_onto_the_episode_span_itself_are_reported(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode") as episode:
            episode.set_attributes(CHAT)  # what LiteLLM's callback does to the current span
            episode.set_attributes(CHAT)
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    assert len(record["traces"][0]["calls"]) == 1  # the last write: all that is left
    assert "calls written on the episode span" in caplog.text


def test_attributes_written_on_an_ended_episode_span_are_reported_once(
    isolated_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        for _ in range(2):
            with tracer.start_as_current_span("episode") as episode:
                context = otel_context.get_current()

            def callback(context: otel_context.Context = context) -> None:
                # A background logging thread, in the context the call was made in.
                token = otel_context.attach(context)
                try:
                    otel_trace.get_current_span().set_attributes(CHAT)
                finally:
                    otel_context.detach(token)

            worker = threading.Thread(target=callback)
            worker.start()
            worker.join(timeout=10)
            assert not episode.is_recording()
    tracer_provider.force_flush()
    found = [r.getMessage() for r in caplog.records if "after it ended" in r.getMessage()]
    (report,) = found
    assert "openinference-instrumentation-litellm" in report


class _SeesRootsOnly(SpanProcessor):
    """As MLflow's processors: a span of a trace whose root it never saw start fails."""

    def __init__(self) -> None:
        self.traces: set[int] = set()
        self.started: list[str] = []

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        if span.parent is None:
            self.traces.add(span.context.trace_id)
        elif span.context.trace_id not in self.traces:
            raise KeyError(None)
        self.started.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        pass


def test_a_processor_added_after_the_run_started_is_shown_the_starts_it_missed(
    isolated_env: Path,
) -> None:
    users = TracerProvider()
    run = pr.init(name="late", environments=["e"], mode="offline", tracer_provider=users)
    late = _SeesRootsOnly()
    tracer = users.get_tracer("app")
    with run:
        with tracer.start_as_current_span("episode"):
            users.add_span_processor(late)  # lazily, on the tool's first traced call
            tracer.start_span("chat m", attributes=CHAT).end()
        with tracer.start_as_current_span("episode"):
            tracer.start_span("chat m", attributes=CHAT).end()
    assert late.started == ["run", "episode", "chat m", "episode", "chat m"]
    assert [len(r["traces"][0]["calls"]) for r in episodes(isolated_env)] == [1, 1]


def test_an_unnamed_agent_span_around_a_named_one_makes_no_empty_trace(
    isolated_env: Path,
) -> None:
    # The Agents SDK's workflow span (an AGENT span with no name) around the agent's.
    tracer_provider = provider()
    tracer = tracer_provider.get_tracer("agents")
    workflow = {"openinference.span.kind": "AGENT"}
    agent = {"openinference.span.kind": "AGENT", "agent.name": "adder"}
    with tracer.start_as_current_span("run", attributes=RUN_ATTRS):
        with tracer.start_as_current_span("episode"):
            with tracer.start_as_current_span("Agent workflow", attributes=workflow):
                with tracer.start_as_current_span("adder", attributes=agent):
                    tracer.start_span("chat m", attributes=CHAT).end()
            pr.record_score("correct", 1.0)
    tracer_provider.force_flush()
    (record,) = episodes(isolated_env)
    (trace,) = record["traces"]
    assert trace["agent"]["name"] == "adder"
    assert trace["rewards"]["correct"]["score"] == 1.0

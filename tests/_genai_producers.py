"""A program instrumented by a third-party OpenAI instrumentation, run in a subprocess (the
instrumentations patch the ``openai`` module globally) against a scripted model server and
the stand-in platform: one episode, a streamed tool-call turn, a tool, a streamed answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _otel import platform_id
from prime_runs.testing import StandInPlatform

TESTS = Path(__file__).parent

SCRIPT = """
import json, sys
from opentelemetry.sdk.trace import TracerProvider
import openai
import prime_runs as pr
from _genai_model import ScriptedModel
from INSTRUMENTATION import OpenAIInstrumentor

provider = TracerProvider()
pr.configure_exporter(provider)
OpenAIInstrumentor().instrument(tracer_provider=provider)
tracer = provider.get_tracer("agent")
run_attrs = {"prime.run.name": "genai-producer", "prime.run.environments": ["genai-env"]}


def streamed(**request):
    text, calls, reason = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **request):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reason = choice.finish_reason or reason
            for delta in choice.delta.tool_calls or ():
                call = calls.setdefault(delta.index, {"id": delta.id, "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                call["function"]["name"] += delta.function.name or ""
                call["function"]["arguments"] += delta.function.arguments or ""
    return text, list(calls.values())


with ScriptedModel() as model:
    client = openai.OpenAI(base_url=model.base_url, api_key="sk-scripted")
    with tracer.start_as_current_span("run", attributes=run_attrs) as run:
        with tracer.start_as_current_span("episode", attributes={"prime.task.key": "math:1"}):
            messages = [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "What is 2+2?"}]
            tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
            options = {"model": "requested-model", "stream_options": {"include_usage": True}}
            _, calls = streamed(messages=messages, tools=tools, **options)
            messages.append({"role": "assistant", "tool_calls": calls})
            messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": "4"})
            answer, _ = streamed(messages=messages, **options)
            pr.record_score("correct", 1.0 if answer == "It is 4." else 0.0)
        run_id = run.attributes["prime.run.id"]
provider.force_flush()
print(json.dumps({"run_id": run_id}))
"""


def run_script(
    prime_env: StandInPlatform, tmp_path: Path, script: str, extra: dict[str, str]
) -> str:
    """Run ``script`` as its own process against the stand-in, with ``extra`` in its
    environment (and no OpenTelemetry or traceloop setting of ours); its run id."""
    path = tmp_path / "agent.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELOOP_"))}
    env.update(prime_env.env())
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The run span names the archive folder until the evaluation is created in the
    # background, then the evaluation: either way, the evaluation's id.
    return platform_id(json.loads(done.stdout.strip().splitlines()[-1])["run_id"])


def run_producer(
    prime_env: StandInPlatform, tmp_path: Path, instrumentation: str, extra: dict[str, str]
) -> list[dict[str, Any]]:
    """Run the program with ``instrumentation``'s ``OpenAIInstrumentor``; the run's stored
    trace documents."""
    script = SCRIPT.replace("INSTRUMENTATION", instrumentation)
    run_id = run_script(prime_env, tmp_path, script, extra)
    assert prime_env.evaluations[run_id]["finalize_count"] == 1
    return [doc for doc in prime_env.traces.values() if doc["run"]["id"] == run_id]

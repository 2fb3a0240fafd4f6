"""Each recipe of docs/integrations.md, as written and with the two setups swapped, against
the real package, the scripted model server and the stand-in platform: four episodes stored
whole (both model calls, the tool call and its result, the agent, the score), nothing said
on stderr by prime-runs, and the other tool still receiving its spans."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _collector import OtlpReceiver
from _model import ScriptedModel
from conftest import run_recipe, section
from prime_runs.testing import StandInPlatform

INIT = "run = pr.init("


@dataclass(frozen=True)
class Recipe:
    other: str  # the other tool's setup line, swapped with pr.init()'s
    name: str  # the run's name
    exported: bool = True  # its backend is the OTLP receiver
    agent: str = "agent"  # the agent's name in the record
    call_ids: bool = True  # the tool message carries its call's id


RECIPES = {
    "Langfuse": Recipe("langfuse = Langfuse(", "adder-langfuse"),
    "Logfire": Recipe("logfire.configure(", "adder-logfire"),
    "MLflow": Recipe("mlflow.openai.autolog(", "adder-mlflow"),
    "OpenAI Agents SDK (with OpenInference)": Recipe(
        "OpenAIAgentsInstrumentor().instrument(", "adder-agents", exported=False, agent="adder"
    ),
    # OpenInference's LiteLLM instrumentation does not record a tool message's call id.
    "LiteLLM": Recipe(
        "LiteLLMInstrumentor().instrument(", "adder-litellm", exported=False, call_ids=False
    ),
}


def swapped(script: str, other: str) -> str:
    lines = script.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(INIT))
    second = next(i for i, line in enumerate(lines) if line.startswith(other))
    lines[first], lines[second] = lines[second], lines[first]
    return "\n".join(lines) + "\n"


def tool_env(tool: str, receiver: OtlpReceiver) -> dict[str, str]:
    url = receiver.url
    return {
        "Langfuse": {"LANGFUSE_PUBLIC_KEY": "pk-lf-test", "LANGFUSE_SECRET_KEY": "sk-lf-test",
                     "LANGFUSE_HOST": url},
        "Logfire": {"LOGFIRE_TOKEN": "pylf_v1_us_test", "LOGFIRE_BASE_URL": url,
                    "LOGFIRE_SEND_TO_LOGFIRE": "true", "LOGFIRE_CONSOLE": "false"},
        "MLflow": {"MLFLOW_TRACKING_URI": url,
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{url}/v1/traces",
                   "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
        "LiteLLM": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    }.get(tool, {})  # fmt: skip


def check_episode(doc: dict[str, Any], recipe: Recipe) -> None:
    assert doc["agent"]["name"] == recipe.agent
    assert len(doc["calls"]) == 2, doc["calls"]
    messages = [node["message"] for node in doc["nodes"]]
    (call,) = next(m["tool_calls"] for m in messages if m.get("tool_calls"))
    assert call["name"] == "add"
    (result,) = [m for m in messages if m["role"] == "tool"]
    assert result["tool_call_id"] == (call["id"] if recipe.call_ids else None)
    a, b = doc["task"]["key"].split("+")
    assert result["content"] == str(int(a) + int(b))
    assert messages[-1] == {"role": "assistant", "content": f"It is {int(a) + int(b)}."}
    assert doc["rewards"]["correct"]["score"] == 1.0


@pytest.mark.parametrize("order", ["as written", "swapped"])
@pytest.mark.parametrize("tool", list(RECIPES))
def test_recipe(
    tool: str,
    order: str,
    tmp_path: Path,
    model: ScriptedModel,
    receiver: OtlpReceiver,
    prime_platform: StandInPlatform,
) -> None:
    recipe = RECIPES[tool]
    script = section(tool)
    assert INIT in script and recipe.other in script
    if order == "swapped":
        script = swapped(script, recipe.other)
    env = {**prime_platform.env(), **tool_env(tool, receiver)}
    env.update({
        "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-scripted",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    })  # fmt: skip
    done = run_recipe(tmp_path, script, env)
    said = [line for line in done.stderr.splitlines() if "prime-runs" in line]
    assert said == [], done.stderr[-4000:]
    ((run_id, evaluation),) = prime_platform.evaluations.items()
    assert evaluation["name"] == recipe.name
    assert evaluation["finalize_count"] == 1
    docs = [d for d in prime_platform.traces.values() if d["run"]["id"] == run_id]
    assert sorted(d["task"]["key"] for d in docs) == ["2+2", "3+4", "5+6", "7+8"]
    for doc in docs:
        check_episode(doc, recipe)
    if recipe.exported:  # the other tool still received its spans
        assert receiver.span_names, receiver.paths

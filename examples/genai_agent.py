"""An agent instrumented with OpenTelemetry's GenAI semantic conventions becomes an evaluation.

    python examples/genai_agent.py

No hand-built records: the agent opens a ``run`` span and one ``episode`` span per task,
its model calls are ``chat`` spans (here made by hand, exactly as
``opentelemetry-instrumentation-openai-v2`` makes them with content capture on, so the
example runs offline with no model), its tool runs are ``execute_tool`` spans, and the
grader attaches a score with ``pr.record_score()``. Each episode span becomes one episode
record (docs/genai.md); the archive is printed at the end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from opentelemetry import trace

import prime_runs as pr

TASKS = [("What is 2+2?", 2, 2, "4"), ("What is 3+5?", 3, 5, "8"), ("What is 7+1?", 7, 1, "9")]
MODEL = "scripted/model"


def parts(role: str, text: str) -> dict[str, object]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def chat(tracer: trace.Tracer, inputs: list, output: dict, usage: tuple[int, int]) -> None:
    """One model call, with the attributes the OpenAI instrumentation sets."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,
        "gen_ai.response.finish_reasons": [output["finish_reason"]],
        "gen_ai.usage.input_tokens": usage[0],
        "gen_ai.usage.output_tokens": usage[1],
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps([output]),
    }
    with tracer.start_as_current_span(f"chat {MODEL}", attributes=attributes):
        pass  # the request would be made here


def solve(tracer: trace.Tracer, index: int, question: str, a: int, b: int, answer: str) -> None:
    task = {"prime.task.key": f"sums:{index}", "prime.task.idx": index, "prime.task.answer": answer}
    with tracer.start_as_current_span("episode", attributes={**task, "prime.env.id": "sums"}):
        history = [parts("user", question)]
        call = {
            "type": "tool_call",
            "id": f"call_{index}",
            "name": "add",
            "arguments": {"a": a, "b": b},
        }
        asked = {"role": "assistant", "parts": [call], "finish_reason": "tool_calls"}
        chat(tracer, history, asked, (40, 12))
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "add",
            "gen_ai.tool.call.id": f"call_{index}",
            "gen_ai.tool.call.result": str(a + b),
        }
        with tracer.start_as_current_span("execute_tool add", attributes=tool):
            result = str(a + b)
        reply = {"type": "tool_call_response", "id": f"call_{index}", "response": result}
        history += [asked, {"role": "tool", "parts": [reply]}]
        final = {**parts("assistant", f"It is {result}."), "finish_reason": "stop"}
        chat(tracer, history, final, (60, 5))
        correct = result == answer
        pr.record_score("correct", 1.0 if correct else 0.0, label="pass" if correct else "fail")


def main() -> None:
    processor = pr.configure_exporter(mode="offline")  # the archive: PRIME_RUNS_DIR or ./prime-runs
    tracer = trace.get_tracer("genai-agent")
    run_attributes = {"prime.run.name": "genai-agent", "prime.run.environments": ["sums"]}
    with tracer.start_as_current_span("run", attributes=run_attributes) as run_span:
        run_id = str(run_span.attributes["prime.run.id"])  # type: ignore[attr-defined]
        for index, (question, a, b, answer) in enumerate(TASKS):
            solve(tracer, index, question, a, b, answer)
    processor.force_flush()  # wait for the run's close-out

    archive = Path(os.environ.get("PRIME_RUNS_DIR") or "prime-runs") / run_id
    status = json.loads((archive / "status.json").read_text())
    print(f"run {run_id}: {status['status']}, {status['logged']} episodes logged")
    print(f"summary  avg_reward {status['summary']['avg_reward']:.3f}")
    for segment in sorted((archive / "records").glob("*.jsonl")):
        for line in segment.read_text().splitlines():
            episode = json.loads(line)
            (agent,) = episode["traces"]
            tokens = [
                (c["usage"]["prompt_tokens"], c["usage"]["completion_tokens"])
                for c in agent["calls"]
            ]
            print(
                f"episode {episode['task']['key']}: reward {agent['rewards']['correct']['score']}"
            )
            print(
                f"  calls   {len(agent['calls'])} to {agent['calls'][0]['model']}, tokens {tokens}"
            )
            for node in agent["nodes"]:
                message = node["message"]
                shown = message["content"] or json.dumps(message.get("tool_calls"))
                print(f"  {message['role']:<9} {shown}")
    print(f"archive  {archive}")


if __name__ == "__main__":
    main()

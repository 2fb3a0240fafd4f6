"""A scripted OpenAI-compatible chat server on 127.0.0.1 for the integration recipes.

Per conversation: a request whose last message is the user's gets a call of the ``add`` tool
with the two numbers of the question; one whose last message is a tool result gets the
answer ``"It is <result>."``. Streamed when the request asks for it. Fixed usage figures.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "scripted-model-1"
TOOL_USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
ANSWER_USAGE = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def reply(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str, dict[str, int]]:
    """The assistant message, finish reason and usage for a conversation."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        answer = f"It is {_text(last.get('content')).strip()}."
        return {"role": "assistant", "content": answer}, "stop", ANSWER_USAGE
    numbers = [int(n) for n in re.findall(r"-?\d+", _text(last.get("content")))][:2]
    a, b = [*numbers, 0, 0][:2]
    turn = sum(1 for m in messages if m.get("role") == "user")
    call = {
        "id": f"call_{a}_{b}_{turn}",
        "type": "function",
        "function": {"name": "add", "arguments": json.dumps({"a": a, "b": b})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", TOOL_USAGE


def _chunks(message: dict[str, Any], reason: str, usage: dict[str, int]) -> list[dict[str, Any]]:
    base = {"id": "cmpl-s", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    if message.get("tool_calls"):
        (call,) = message["tool_calls"]
        head = {"index": 0, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}  # fmt: skip
        rest = {"index": 0, "function": {"arguments": call["function"]["arguments"]}}
        deltas = [{"role": "assistant", "content": "", "tool_calls": [head]},
                  {"tool_calls": [rest]}]  # fmt: skip
    else:
        deltas = [{"role": "assistant", "content": message["content"]}]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    chunks.append({**base, "choices": [], "usage": usage})
    return chunks


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedModel

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            self.server.requests.append(body)
        message, reason, usage = reply(body.get("messages") or [])
        if body.get("stream"):
            chunks = _chunks(message, reason, usage)
            text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            self._send("text/event-stream", text)
            return
        choice = {"index": 0, "finish_reason": reason, "message": message}
        completion = {"id": "cmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
                      "choices": [choice], "usage": usage}  # fmt: skip
        self._send("application/json", json.dumps(completion))

    def _send(self, kind: str, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ScriptedModel(ThreadingHTTPServer):
    """``with ScriptedModel() as model: OpenAI(base_url=model.base_url, ...)``."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

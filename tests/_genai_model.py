"""A scripted OpenAI-compatible chat server on 127.0.0.1 for the GenAI tests.

The first request gets a tool call, every later one a text answer, each streamed when the
request asks for it (a streamed tool call opens with an empty text delta, as real servers
send). Usage figures are fixed so tests can compare.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "scripted-model-1"
TOOL_USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
ANSWER_USAGE = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
}
ANSWER = "It is 4."


def _completion(message: dict[str, Any], reason: str, usage: dict[str, int]) -> dict[str, Any]:
    choice = {"index": 0, "finish_reason": reason, "message": message}
    return {"id": "cmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [choice], "usage": usage}  # fmt: skip


def _tool_chunks() -> list[dict[str, Any]]:
    base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    head = {"index": 0, "id": TOOL_CALL["id"], "type": "function"}
    head["function"] = {"name": TOOL_CALL["function"]["name"], "arguments": ""}
    rest = {"index": 0, "function": {"arguments": TOOL_CALL["function"]["arguments"]}}
    deltas = [{"role": "assistant", "content": "", "tool_calls": [head]}, {"tool_calls": [rest]}]
    return [
        *({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas),
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": TOOL_USAGE},
    ]


def _chunks() -> list[dict[str, Any]]:
    base = {"id": "cmpl-2", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    delta = {"role": "assistant", "content": ANSWER}
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": ANSWER_USAGE},
    ]


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedModel

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append(body)
        if len(self.server.requests) == 1 and body.get("stream"):
            events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in _tool_chunks())
            self._send("text/event-stream", events + "data: [DONE]\n\n")
        elif len(self.server.requests) == 1:
            message = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
            self._send(
                "application/json", json.dumps(_completion(message, "tool_calls", TOOL_USAGE))
            )
        elif body.get("stream"):
            events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in _chunks())
            self._send("text/event-stream", events + "data: [DONE]\n\n")
        else:
            message = {"role": "assistant", "content": ANSWER}
            self._send("application/json", json.dumps(_completion(message, "stop", ANSWER_USAGE)))

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

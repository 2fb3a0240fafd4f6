"""A canned OpenAI-compatible chat-completions server on 127.0.0.1 (standard library only).

Replies are a pure function of the last user message, so every rollout of a task gets
the same reward:

* contains ``fail``                -> HTTP 500 (a provider error);
* ``... exactly: <phrase>``        -> a reply quoting the whole phrase;
* ``... first word of: <phrase>``  -> a reply with the phrase's first word only;
* anything else                    -> a reply that quotes nothing.

Both ``"stream": false`` (one JSON body) and ``"stream": true`` (SSE chunks, then a usage
chunk, then ``[DONE]``) are served. ``GET /v1/models`` lists the one model.

Use ``with FakeModel() as model:`` (``model.base_url`` ends in ``/v1``; ``model.requests``
records each completion request's ``stream`` flag and model), or run
``python fake_model.py [PORT]`` to serve in the foreground (it prints the port).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

MODEL_ID = "scripted/e2e-model"


@dataclass(frozen=True)
class Request:
    """One chat-completions request as the server saw it."""

    stream: bool
    model: str
    status: int


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))


def reply_for(messages: list[dict[str, Any]]) -> str | None:
    """The canned reply to a conversation, or None for a provider error."""
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    last = users[-1] if users else ""
    if "fail" in last:
        return None
    if match := re.search(r"first word of: (.+)", last):
        return f"{match.group(1).split()[0]}?"
    if match := re.search(r"exactly: (.+)", last):
        return f"Sure: {match.group(1).strip()}"
    return "I cannot help with that."


def _completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    messages = body.get("messages", [])
    prompt_tokens = sum(len(_text(m.get("content"))) // 4 + 4 for m in messages)
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"chatcmpl-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _chunks(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The SSE chunks of one completion: content, finish, usage (what include_usage asks)."""
    base = {"id": raw["id"], "created": raw["created"], "model": raw["model"]}
    choice = raw["choices"][0]
    delta = {"role": "assistant", "content": choice["message"]["content"]}
    kind = "chat.completion.chunk"
    return [
        {**base, "object": kind, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {
            **base,
            "object": kind,
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
        },
        {**base, "object": kind, "choices": [], "usage": raw["usage"]},
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the tests read `requests`, not logs

    def _send_json(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            model = {"id": MODEL_ID, "object": "model", "owned_by": "e2e"}
            return self._send_json(200, {"object": "list", "data": [model]})
        self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})
        stream = bool(body.get("stream"))
        content = reply_for(body.get("messages", []))
        status = 500 if content is None else 200
        self.server.record(Request(stream=stream, model=str(body.get("model")), status=status))
        if content is None:
            error = {"message": "scripted upstream failure", "type": "server_error"}
            return self._send_json(500, {"error": error})
        raw = _completion(body, content)
        if not stream:
            return self._send_json(200, raw)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # No Content-Length: the stream ends when the connection closes.
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in _chunks(raw):
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)


class FakeModel:
    """The canned server on a background thread; a context manager."""

    def __init__(self, port: int = 0) -> None:
        self._server = _Server(port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-model", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[Request]:
        """The completion requests served so far, in arrival order."""
        with self._server._lock:
            return list(self._server.requests)

    def start(self) -> FakeModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    server = _Server(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(server.server_address[1], flush=True)
    server.serve_forever()

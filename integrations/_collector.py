"""An OTLP/HTTP trace receiver on 127.0.0.1: where the other tool (Langfuse, Logfire, MLflow)
exports its spans in the recipes, so a test can check that it still receives them."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class _Handler(BaseHTTPRequestHandler):
    server: OtlpReceiver

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding") == "gzip":
            data = gzip.decompress(data)
        names: list[str] = []
        if self.path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest()
            request.ParseFromString(data)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    names += [span.name for span in scope.spans]
        with self.server.lock:
            self.server.paths.append(self.path)
            self.server.span_names += names
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # a tool probing its backend gets an empty answer
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class OtlpReceiver(ThreadingHTTPServer):
    """Counts the spans posted to ``<url>/.../v1/traces`` by name."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.paths: list[str] = []
        self.span_names: list[str] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

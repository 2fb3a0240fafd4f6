"""The HTTP layer: a threading HTTP/1.1 keep-alive server that can stop promptly."""

from __future__ import annotations

import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prime_runs.testing._dispatch import Dispatcher
from prime_runs.testing._reply import Reply


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY a keep-alive client can
    # wait for a delayed ACK on every request.
    disable_nagle_algorithm = True
    server_version = "prime-runs-standin"
    sys_version = ""
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and benchmarks must stay quiet

    def _serve(self) -> None:
        if self.server.stopping.is_set():
            self._drop()
            return
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self._write(Reply(400, {"detail": "malformed request body framing"}))
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.server.dispatcher.handle(self.command, self.path, headers, body)
        if reply is None:
            self._drop()
        else:
            self._write(reply)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"x", 16)
            if size == 0:
                while self.rfile.readline().strip():
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _write(self, reply: Reply) -> None:
        payload = reply.encode()
        self.send_response(reply.status)
        if payload:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if payload:
            self.wfile.write(payload)

    def _drop(self) -> None:
        """Close the connection without an answer (an ambiguous failure for the client)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    """Tracks open connections so ``close_connections`` can end idle keep-alives."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], dispatcher: Dispatcher, stopping: threading.Event
    ) -> None:
        self.dispatcher = dispatcher
        self.stopping = stopping
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can block on DNS.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.discard(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer is not the test's failure

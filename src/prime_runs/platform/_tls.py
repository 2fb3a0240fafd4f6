"""One TLS context for every HTTP client the SDK opens, built once per CA setting.

httpx builds a context for each client it makes, and building one loads the whole CA
bundle: about 45 ms of CPU here. A run opens two clients (the platform API, Prime Traces)
and a training run one more per object upload, so an online ``init()`` spent most of its
time there. The context is built as httpx builds its default one (``SSL_CERT_FILE``, else
``SSL_CERT_DIR``, else its bundled CAs), by httpx's own public function, and kept for as
long as those variables keep their values. An ``SSLContext`` is safe to share between
threads and clients; each connection keeps its own state.

The build holds a lock that ``fork()`` waits for (:func:`prime_runs._forking.held_across_fork`):
OpenSSL takes its own locks while it loads the bundle, and a child forked meanwhile would
hang in OpenSSL's exit-time cleanup on a lock no thread of its own holds.
"""

from __future__ import annotations

import functools
import os
import ssl
import threading

import httpx

from prime_runs._forking import held_across_fork

__all__ = ["context"]

_building = held_across_fork(threading.Lock())


def context() -> ssl.SSLContext:
    """The verifying context for the CA setting the environment names now."""
    with _building:
        return _built(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _built(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    # The arguments are the cache's key: httpx reads the same two variables itself.
    del cafile, capath
    return httpx.create_ssl_context()

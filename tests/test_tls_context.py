"""The SDK's HTTP clients share one TLS context: building one loads the whole CA bundle
(about 45 ms), which httpx would do for every client, two per run."""

from __future__ import annotations

import ssl

import certifi
import pytest

import prime_runs as pr
from prime_runs.platform import _tls


def test_runs_build_the_tls_context_once_not_per_client(
    prime_env: pr.testing.StandInPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[object] = []
    real = ssl.create_default_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(args or kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    for i in range(3):
        run = pr.init(name=f"tls{i}", environments=["gsm8k"], model="m", framework="f")
        run.log_episodes({"id": f"e{i}", "traces": []})
        run.finish()
    # At most the one shared context (none if an earlier test built it); per client, six.
    assert len(built) <= 1
    assert len(prime_env.evaluations) == 3


def test_the_context_follows_ssl_cert_file_as_httpx_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    default = _tls.context()
    assert _tls.context() is default
    assert default.verify_mode == ssl.CERT_REQUIRED and default.check_hostname
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    own = _tls.context()
    assert own is not default and own.cert_store_stats()["x509_ca"] > 0
    monkeypatch.delenv("SSL_CERT_FILE")
    assert _tls.context() is default

"""Run ids are input: a forged id from a carrier, the environment, ``init(id=)``, a command
line argument, an archive file or a platform answer is refused with ``ConfigurationError``
(or, from a platform, ``APIError``) naming it, and nothing is written outside the archive
root. Every id the SDK and the platform hand out keeps working."""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import _archives
import prime_runs as pr
from prime_runs.cli import main
from prime_runs.errors import APIError, ConfigurationError

FORGED = {
    "parent-parent": "../../x",
    "dotdot": "..",
    "dot": ".",
    "absolute": "/ABS",  # replaced by an absolute path under tmp_path
    "nul": "run\x00x",
    "long": "r" * 300,
    "unicode": "rün-ид",
    "slash": "a/b",
    "backslash": "a\\b",
    "space": "a b",
}
# W3C baggage trims a value's surrounding whitespace; an argument keeps it.
PADDED = {"newline": "run-1\n", "padded": " run-1"}

LEGITIMATE = [
    "run-20250101-120000-1a2b3c4d",  # the SDK's local ids
    f"disabled-{'0' * 16}",
    "ev_standin_0001",  # the stand-in's and a platform's shapes
    "cm4x1y2z3000008l0abcdefgh",
    "a555e3c8-d1b8-4309-a5b5-fb33d032dc97",  # a uuid, fixed for xdist
    "eval.v2_final-3",
    "A" * 128,
]


def _forged(name: str, tmp_path: Path) -> str:
    value = FORGED[name]
    return str(tmp_path / "abs" / "path") if value == "/ABS" else value


def _snapshot(tmp_path: Path, root: Path) -> set[Path]:
    """Every path under tmp_path but the archive root's and HOME's contents."""
    skip = (root, tmp_path / "home")
    return {p for p in tmp_path.rglob("*") if not any(p == s or s in p.parents for s in skip)}


@pytest.fixture
def root(isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "cwd" / "deep"  # not beside the root: `../x` differs from each
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return isolated_env


def _owner(root: Path) -> pr.Run:
    return pr.init(name="owner", mode="offline", dir=root)


def _with_id(carrier: dict[str, str], run_id: str) -> dict[str, str]:
    """The carrier with its baggage's run id replaced, percent-encoded as W3C baggage is."""
    entries = [e for e in carrier["baggage"].split(",") if not e.startswith("prime.run.id=")]
    baggage = ",".join([f"prime.run.id={quote(run_id, safe='')}", *entries])
    return {**carrier, "baggage": baggage}


def _assert_refused(error: pytest.ExceptionInfo[ConfigurationError], value: str) -> None:
    message = str(error.value)
    assert "is not a run id" in message
    shown = repr(value)
    assert shown[:20] in message  # the value itself, as a repr
    assert len(message) < 600  # a 300-character id is cut, not quoted whole


@pytest.mark.parametrize("name", sorted(FORGED))
def test_join_refuses_a_forged_carrier_and_writes_nothing_outside(
    name: str, root: Path, tmp_path: Path
) -> None:
    owner = _owner(root)
    carrier = owner.context()
    before = _snapshot(tmp_path, root)
    runs_before = sorted(p.name for p in root.iterdir())
    forged = _forged(name, tmp_path)

    with pytest.raises(ConfigurationError) as error:
        pr.join(_with_id(carrier, forged), on_error="warn")
    _assert_refused(error, forged)
    assert "run.context()" in str(error.value)
    with pytest.raises(ConfigurationError):  # the older spelling of the same join
        pr.init(join=_with_id(carrier, forged), on_error="warn")

    assert _snapshot(tmp_path, root) == before
    assert sorted(p.name for p in root.iterdir()) == runs_before
    owner.finish()


@pytest.mark.parametrize("name", ["parent-parent", "dotdot", "absolute", "nul", "long"])
def test_a_forged_environment_carrier_is_refused_naming_the_variable(
    name: str, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = _owner(root)
    forged = _forged(name, tmp_path)
    env = _with_id({"baggage": owner.context()["baggage"]}, forged)
    monkeypatch.setenv("TRACEPARENT", owner.context(env=True)["TRACEPARENT"])
    monkeypatch.setenv("BAGGAGE", env["baggage"])
    before = _snapshot(tmp_path, root)

    for call in (lambda: pr.join(), lambda: pr.init(name="worker", mode="offline")):
        with pytest.raises(ConfigurationError) as error:
            call()
        _assert_refused(error, forged)
        assert "BAGGAGE environment variable" in str(error.value)
    assert _snapshot(tmp_path, root) == before
    monkeypatch.delenv("TRACEPARENT")
    owner.finish()


@pytest.mark.parametrize("name", sorted({**FORGED, **PADDED}))
def test_init_refuses_a_forged_id(name: str, root: Path, tmp_path: Path) -> None:
    forged = PADDED[name] if name in PADDED else _forged(name, tmp_path)
    before = _snapshot(tmp_path, root)
    for mode in ("offline", "disabled"):
        with pytest.raises(ConfigurationError) as error:
            pr.init(id=forged, mode=mode, environments=["gsm8k"])
        _assert_refused(error, forged)
        assert "id=" in str(error.value)
    assert _snapshot(tmp_path, root) == before


@pytest.mark.parametrize("run_id", LEGITIMATE)
def test_every_legitimate_id_still_joins(run_id: str, root: Path) -> None:
    owner = _owner(root)
    carrier = _with_id(owner.context(), run_id)

    with pr.join(carrier) as worker:
        assert worker.id == run_id
        worker.log_episodes({"id": "ep-1", "env": {"id": "gsm8k"}, "traces": [{"id": "t-1"}]})
    assert (root / run_id / "run.json").is_file()
    assert pr.init(id=run_id, mode="disabled").id == run_id
    owner.finish()


def test_spans_under_a_forged_remote_parent_are_not_tracked_and_said_once(
    root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A service whose instrumentation extracts a request's headers: its spans reach the
    run processor with the forged baggage; they join nothing and the hook never raises."""
    owner = _owner(root)
    provider = TracerProvider()
    pr.configure_exporter(provider, mode="offline", dir=str(root))
    tracer = provider.get_tracer("service")
    propagator = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
    before = _snapshot(tmp_path, root)
    runs_before = sorted(p.name for p in root.iterdir())

    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        for forged in ("../../x", "..", str(tmp_path / "abs"), "a\x00b"):
            # Another process's run span (this process never saw it): only baggage names it.
            traceparent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
            headers = _with_id({**owner.context(), "traceparent": traceparent}, forged)
            ctx = propagator.extract(headers)
            with tracer.start_as_current_span("handle_request", context=ctx):
                with tracer.start_as_current_span("step"):
                    pass
    provider.shutdown()

    assert _snapshot(tmp_path, root) == before
    assert sorted(p.name for p in root.iterdir()) == runs_before
    said = [r for r in caplog.records if "is not a run id" in r.getMessage()]
    assert len(said) == 1 and "'../../x'" in said[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]
    owner.finish()


# -- the command line -------------------------------------------------------------------


def test_cli_run_arguments_never_reach_outside_the_root(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_API_KEY", "k-test")  # sync looks its RUNs up only with a key
    outside = tmp_path / "outside"
    _archives.Archive.create(tmp_path, "outside", {"name": "not-under-the-root", "mode": "offline"})
    inside = pr.init(name="inside", mode="offline", dir=root)
    inside.finish()
    capsys.readouterr()

    # `../outside` is not a folder from here (cwd), and as an id it would leave the root.
    for argv in (["show", "../outside"], ["report", "../outside"], ["sync", "../outside"]):
        assert main([*argv, "--dir", str(root)]) == 2, argv
        captured = capsys.readouterr()
        assert "not-under-the-root" not in captured.out
    assert not (outside / "report.html").exists()
    assert main(["show", "..", "--dir", str(root)]) == 2  # a folder, and not a run's
    capsys.readouterr()
    for ref in ("a\x00b", "rün", "r" * 300):
        assert main(["show", ref, "--dir", str(root)]) == 2
        err = capsys.readouterr().err
        assert "is not a run id" in err and repr(ref)[:20] in err, ref
        assert "Traceback" not in err
    # A folder named by its path, and an id, still work.
    assert main(["show", str(outside)]) == 0
    assert "not-under-the-root" in capsys.readouterr().out
    assert main(["show", inside.id, "--dir", str(root)]) == 0


# -- archive files edited by hand ---------------------------------------------------------


def _finished_offline_run(root: Path) -> pr.Run:
    run = pr.init(name="hand-edited", environments=["gsm8k"], mode="offline", dir=root)
    run.log_episodes({"id": "ep-1", "env": {"id": "gsm8k"}, "traces": [{"id": "t-1"}]})
    run.finish()
    return run


@pytest.mark.parametrize("where", ["sync.json", "run.json"])
@pytest.mark.parametrize("forged", ["../../x", "/abs/path", "a?b#c", "x" * 300])
def test_sync_refuses_a_platform_id_edited_by_hand(
    where: str, forged: str, prime_env, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(os.environ["PRIME_RUNS_DIR"])
    run = _finished_offline_run(root)
    archive = _archives.Archive(root / run.id)
    if where == "sync.json":
        archive.write_sync_state({"platform": {"id": forged}})
    else:
        archive.write_description(dict(archive.description(), platform={"id": forged}))
    capsys.readouterr()

    assert main(["sync", run.id]) == 1

    out = capsys.readouterr().out
    assert "ConfigurationError" in out and where in out and "is not a run id" in out
    assert repr(forged)[:20] in out
    assert prime_env.requests == []  # no request was sent with it in its path


def test_training_sync_refuses_a_platform_id_edited_by_hand(
    prime_env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The training register's own advice is to add ``"platform": {"id": ...}`` to
    sync.json by hand: what is added there is checked."""
    run = pr.init(
        kind="train",
        name="rl-offline",
        model="Qwen/Qwen3-4B",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=2, batch_size=8),
        mode="offline",
    )
    run.log_metrics({"loss": 1.0}, step=0)
    run.finish()
    _archives.Archive(Path(str(run.archive_path))).write_sync_state({"platform": {"id": "../../x"}})
    capsys.readouterr()

    assert main(["sync", run.id]) == 1

    out = capsys.readouterr().out
    assert "sync.json" in out and "'../../x' is not a run id" in out
    assert prime_env.requests == []


# -- ids the platform answers --------------------------------------------------------------


class _ForgingPlatform(BaseHTTPRequestHandler):
    """Creates an evaluation and answers a forged evaluation id."""

    forged = "../../x"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") == "/api/v1/evaluations":
            body = json.dumps({"evaluation_id": self.forged, "name": "x"}).encode()
            self.send_response(200)
        else:
            body = b"{}"
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def forging_platform() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ForgingPlatform)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_forged_evaluation_id_from_the_platform_is_not_used(
    forging_platform: str, root: Path, tmp_path: Path
) -> None:
    before = _snapshot(tmp_path, root)
    common = dict(
        mode="online",
        api_key="k-test",
        base_url=forging_platform,
        environments=[{"id": "env-1"}],
        dir=root,
    )

    with pytest.raises(APIError, match="not a run id"):
        pr.init(on_error="raise", **common)
    run = pr.init(on_error="warn", **common)  # falls back to offline, as for any API error
    assert run.mode == "offline"
    run.finish()

    assert _snapshot(tmp_path, root) == before
    assert [p.name for p in root.iterdir()] == [run.id]

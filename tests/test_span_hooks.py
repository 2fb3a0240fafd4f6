"""Span hooks do not hang the caller: a raw ``run`` span's close-out runs in the background,
and the provider's ``force_flush()``/``shutdown()``, process exit and a forked child behave.

Real components: the stand-in platform over HTTP with stalled routes, real providers and
processors, real subprocesses and ``os.fork``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prime_runs as pr
import prime_runs._runs.closeouts as _closeouts
from _otel import archive_of, evaluation_of, platform_id
from _support import run_script, start_script
from prime_runs import semconv
from prime_runs._journal.archive import RunArchive
from prime_runs.processor import SHUTDOWN_REASON
from prime_runs.run import CRASH_REASON
from prime_runs.testing import StandInPlatform

RUN_ATTRS = {semconv.RUN_NAME: "raw-hooks", semconv.RUN_ENVIRONMENTS: ["gsm8k"]}


def episode(tag: str) -> dict[str, Any]:
    return {
        "id": f"ep-{tag}",
        "env": {"id": "gsm8k"},
        "ok": True,
        "errors": [],
        "traces": [{"id": f"tr-{tag}", "ok": True, "errors": [], "timing": {"start": time.time()}}],
    }


def _archive(run_id: str) -> RunArchive:
    return archive_of(run_id)


def _raw_run(provider: TracerProvider, episodes: int) -> tuple[Any, str]:
    """Open a raw ``run`` span with ``episodes`` record spans under it; return it, open."""
    tracer = provider.get_tracer("app")
    span = tracer.start_span("run", attributes=RUN_ATTRS)
    run_id = str(span.attributes[semconv.RUN_ID])
    context = trace.set_span_in_context(span)
    for i in range(episodes):
        payload = json.dumps(episode(str(i)))
        tracer.start_span("episode", context, attributes={semconv.RECORD: payload}).end()
    return span, run_id


# -- ending the span returns; force_flush() and shutdown() wait ----------------------


@pytest.mark.parametrize("wait_with", ["force_flush", "shutdown"])
def test_ending_a_raw_run_span_returns_before_the_close_out_and_the_provider_waits(
    prime_env: StandInPlatform, wait_with: str
) -> None:
    provider = TracerProvider()
    pr.configure_exporter(provider)
    prime_env.stall("eval_finalize", 3.0)  # every finalize request waits 3 s
    span, run_id = _raw_run(provider, 3)

    span.end()
    # end() returned while the finalize is still to come (the old hook finished the run
    # on this thread, so the platform had it finalized by now).
    assert evaluation_of(prime_env, run_id)["finalize_count"] == 0
    assert _archive(run_id).status()["status"] == "running"

    if wait_with == "force_flush":
        assert provider.force_flush(timeout_millis=30_000) is True
    else:
        provider.shutdown()
    evaluation = evaluation_of(prime_env, run_id)
    assert evaluation["finalize_count"] == 1 and evaluation["error_message"] is None
    assert set(prime_env.episode_writes) == {"ep-0", "ep-1", "ep-2"}
    status = _archive(run_id).status()
    assert (status["status"], status["closed"]) == ("completed", True)


def test_force_flush_gives_up_at_its_timeout_and_the_close_out_goes_on(
    prime_env: StandInPlatform,
) -> None:
    provider = TracerProvider()
    processor = pr.configure_exporter(provider)
    prime_env.stall("eval_finalize", 60.0)  # until unstall()
    span, run_id = _raw_run(provider, 1)
    span.end()
    try:
        assert provider.force_flush(timeout_millis=200) is False
        assert _closeouts.pending(processor)  # still under way, still tracked
        assert evaluation_of(prime_env, run_id)["finalize_count"] == 0
    finally:
        prime_env.unstall()
    assert processor.force_flush(timeout_millis=30_000) is True
    assert _closeouts.pending(processor) == []
    assert evaluation_of(prime_env, run_id)["finalize_count"] == 1


def test_init_runs_still_finish_on_the_callers_thread(prime_env: StandInPlatform) -> None:
    provider = TracerProvider()
    pr.configure_exporter(provider)
    run = pr.init(name="sync", environments=["gsm8k"], tracer_provider=provider)
    run.log_episodes(episode("a"))
    run.finish()
    assert prime_env.evaluations[run.id]["finalize_count"] == 1  # no flush needed
    assert _closeouts.pending() == []


def test_a_close_out_never_waits_for_itself() -> None:
    # Say a logging handler flushes the provider while the close-out reports something.
    owner, inner = object(), []

    class Run:
        run_id = "run-self-wait"

    def finish() -> None:
        inner.append(_closeouts.wait(time.monotonic() + 5.0, owner))

    _closeouts.start(owner, Run(), finish)  # type: ignore[arg-type]
    assert _closeouts.wait(time.monotonic() + 30.0, owner) is True
    assert inner == [True]


# -- a provider shut down with a run still open -----------------------------------------


def test_provider_shutdown_closes_an_open_run_as_crashed_and_ends_its_span(
    prime_env: StandInPlatform,
) -> None:
    provider = TracerProvider()
    pr.configure_exporter(provider)
    exporter = InMemorySpanExporter()  # the user's, added after the run processor
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _span, run_id = _raw_run(provider, 2)

    provider.shutdown()

    evaluation = evaluation_of(prime_env, run_id)
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"] == f"crashed: {SHUTDOWN_REASON}"
    assert set(prime_env.episode_writes) == {"ep-0", "ep-1"}  # drained before closing
    status = _archive(run_id).status()
    assert (status["status"], status["error"]) == ("crashed", SHUTDOWN_REASON)
    (run_span,) = [s for s in exporter.get_finished_spans() if s.name == "run"]
    assert run_span.attributes[semconv.RUN_STATUS] == "crashed"
    assert run_span.attributes[semconv.RUN_ID] == platform_id(run_id)
    assert not run_span.status.is_ok


# -- process exit ----------------------------------------------------------------------

EXIT_SCRIPT = r"""
import atexit, json, sys, time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import prime_runs as pr

exporter = InMemorySpanExporter()
# Registered before the provider's own exit hook, so it runs after it (last in, first out).
atexit.register(lambda: print(json.dumps(
    [[s.name, dict(s.attributes)] for s in exporter.get_finished_spans()]), flush=True))
provider = TracerProvider()                          # the application's setup, first
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
pr.configure_exporter(provider)
tracer = trace.get_tracer("app")
span = tracer.start_span("run", attributes={"prime.run.name": "exit",
                                            "prime.run.environments": ["gsm8k"]})
print(json.dumps({"id": span.attributes["prime.run.id"]}), flush=True)
ctx = trace.set_span_in_context(span)
record = {"id": "ep-x", "env": {"id": "gsm8k"}, "ok": True, "errors": [],
          "traces": [{"id": "tr-x", "ok": True, "errors": [], "timing": {"start": time.time()}}]}
tracer.start_span("episode", ctx, attributes={"prime.record": json.dumps(record)}).end()
if sys.argv[1] == "end":
    span.end()          # and exit at once: the close-out is still under way
"""


def _exit_script(tmp_path: Path, mode: str) -> tuple[str, list[list[Any]]]:
    proc = run_script(tmp_path, EXIT_SCRIPT, mode)
    assert proc.returncode == 0, proc.stderr
    first, *rest = proc.stdout.splitlines()
    return json.loads(first)["id"], json.loads(rest[-1])


def test_exit_right_after_a_raw_run_span_ends_waits_for_its_close_out(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.stall("eval_finalize", 3.0)
    run_id, spans = _exit_script(tmp_path, "end")
    evaluation = evaluation_of(prime_env, run_id)
    assert evaluation["finalize_count"] == 1 and evaluation["error_message"] is None
    assert prime_env.episode_writes == {"ep-x": 1}
    status = _archive(run_id).status()
    assert (status["status"], status["closed"]) == ("completed", True)
    assert sorted(name for name, _ in spans) == ["episode", "run"]


def test_exit_with_a_raw_run_span_open_crashes_it_and_the_users_exporter_gets_the_span(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    # The user's processor was added first, so the provider shuts it down first: the
    # exit hook ends the span before any provider shuts down.
    run_id, spans = _exit_script(tmp_path, "open")
    evaluation = evaluation_of(prime_env, run_id)
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"] == f"crashed: {CRASH_REASON}"
    assert prime_env.episode_writes == {"ep-x": 1}
    status = _archive(run_id).status()
    assert (status["status"], status["closed"]) == ("crashed", True)
    (run_attrs,) = [attrs for name, attrs in spans if name == "run"]
    assert run_attrs[semconv.RUN_STATUS] == "crashed"
    assert run_attrs[semconv.RUN_ID] == platform_id(run_id)


ATEXIT_END_SCRIPT = r"""
import atexit, json
import prime_runs as pr
import prime_runs._runs.exithooks
from opentelemetry.sdk.trace import TracerProvider

prime_runs._runs.exithooks.EXIT_TIMEOUT = 0.5  # the exit hook alone would give up on the close-out
provider = TracerProvider(shutdown_on_exit=False)
pr.configure_exporter(provider)
span = provider.get_tracer("app").start_span(
    "run", attributes={"prime.run.name": "atexit", "prime.run.environments": ["gsm8k"]})
print(json.dumps({"id": span.attributes["prime.run.id"]}), flush=True)
atexit.register(span.end)   # runs before the exit hook, after Python waited for threads
"""


def test_a_run_span_ended_by_an_exit_handler_is_still_closed_out(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    # Past the interpreter's wait for threads, a background close-out would be cut off at
    # exit; it runs on the exit handler's thread instead.
    prime_env.stall("eval_finalize", 2.0)
    proc = run_script(tmp_path, ATEXIT_END_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout.splitlines()[0])["id"]
    assert evaluation_of(prime_env, run_id)["finalize_count"] == 1
    status = _archive(run_id).status()
    assert (status["status"], status["closed"]) == ("completed", True)


SIGTERM_SCRIPT = r"""
import json, sys
from opentelemetry.sdk.trace import TracerProvider
import prime_runs as pr

provider = TracerProvider()
pr.configure_exporter(provider)
tracer = provider.get_tracer("app")
def attrs(name):
    return {"prime.run.name": name, "prime.run.environments": ["gsm8k"]}

ended = tracer.start_span("run", attributes=attrs("ended"))
still_open = tracer.start_span("run", attributes=attrs("open"))
run = pr.init(name="handled", environments=["gsm8k"], handle_signals=True,
              tracer_provider=provider)
ended.end()             # its close-out is under way when SIGTERM arrives
print(json.dumps({"ended": ended.attributes["prime.run.id"],
                  "open": still_open.attributes["prime.run.id"], "init": run.id}), flush=True)
sys.stdin.readline()
"""


def test_sigterm_waits_for_close_outs_and_cancels_open_raw_runs(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.stall("eval_finalize", 2.0)
    proc = start_script(tmp_path, SIGTERM_SCRIPT)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = proc.stdout.readline()
        assert first, proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM  # the default action, after the close-outs
    ids = json.loads(first)
    ended = _archive(ids["ended"]).status()
    assert (ended["status"], ended["closed"]) == ("completed", True)
    assert evaluation_of(prime_env, ids["ended"])["finalize_count"] == 1
    for key in ("open", "init"):
        assert _archive(ids[key]).status()["status"] == "cancelled"
        assert evaluation_of(prime_env, ids[key])["status"] == "CANCELLED"


# -- fork --------------------------------------------------------------------------------

FORK_SCRIPT = r"""
import json, os, sys, time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
import prime_runs as pr
import prime_runs._runs.closeouts as _closeouts

provider = TracerProvider()
pr.configure_exporter(provider)
tracer = provider.get_tracer("app")
span = tracer.start_span("run", attributes={"prime.run.name": "fork",
                                            "prime.run.environments": ["gsm8k"]})
run_id = span.attributes["prime.run.id"]
span.end()              # the close-out starts; its finalize is stalled
pid = os.fork()
if pid == 0:
    flushed = provider.force_flush(timeout_millis=60_000)
    sys.exit(0 if flushed and not _closeouts.pending() else 3)   # atexit runs here
_, status = os.waitpid(pid, 0)
print(json.dumps({"id": run_id, "child": os.waitstatus_to_exitcode(status),
                  "parent_pending": len(_closeouts.pending())}), flush=True)
sys.stdin.readline()    # the test releases the stall, then the parent exits
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_wait_for_the_parents_close_out(
    prime_env: StandInPlatform, tmp_path: Path
) -> None:
    prime_env.stall("eval_finalize", 60.0)  # until unstall()
    proc = start_script(tmp_path, FORK_SCRIPT)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        said = json.loads(proc.stdout.readline() or "{}")
        # The child flushed and exited while the parent's close-out was still stalled.
        assert said.get("child") == 0, proc.stderr.read() if not said else said
        assert said["parent_pending"] == 1
        assert evaluation_of(prime_env, said["id"])["finalize_count"] == 0
        prime_env.unstall()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        prime_env.unstall()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    evaluation = evaluation_of(prime_env, said["id"])
    assert evaluation["finalize_count"] == 1 and evaluation["error_message"] is None
    assert _archive(said["id"]).status()["status"] == "completed"

"""Closing runs from span hooks: background close-outs, and runs closed while still open.

**Background close-outs.** Ending a ``run`` span opened with a plain tracer must not
hold the producer's thread for the drain and close-out (seconds; longer against a slow
platform). ``RunProcessor`` hands that ``finish()`` to ``start``, which runs it on a
thread of its own and tracks it until it ends:

- the provider's ``force_flush(timeout_millis)`` and ``shutdown()`` wait for their
  processor's close-outs within their deadlines (``wait``);
- the threads are not daemons, so the interpreter waits for them at exit (before the
  exit hooks run) and the run is never abandoned half-closed; each is bounded by its
  ``finish()`` deadline. The exit hook waits for what is left within its own budget
  (a multiprocessing worker runs it first; so does a handled signal);
- a forked child forgets the parent's close-outs: their threads are not in the child,
  and the parent closes those runs.

**Runs still open** when their provider shuts down or the process exits are finished
with ``close_open``, which then ends the run span, so the provider's processors (the
user's exporters) receive it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Status, StatusCode

import prime_runs._forking as _forking
from prime_runs import semconv
from prime_runs.status import RunStatus

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")


class _CloseOut:
    """One run's finish under way on a background thread."""

    def __init__(self, owner: object, state: RunState) -> None:
        self.owner = owner
        self.state = state
        self.done = threading.Event()
        self.thread: threading.Thread | None = None  # the thread running it


# Reentrant: a signal handler closing runs may interrupt this thread while it holds it.
_lock = threading.RLock()
_pending: list[_CloseOut] = []


def start(owner: object, state: RunState, finish: Callable[[], object]) -> None:
    """Run ``finish`` (``state``'s close-out) on a tracked, non-daemon thread.

    ``owner`` (the processor) is what ``wait(owner=...)`` selects by. Never raises. At
    interpreter exit (or if no thread can be started) it runs on the caller's thread.
    """
    closeout = _CloseOut(owner, state)
    with _lock:
        _pending.append(closeout)
    if not threading.main_thread().is_alive():
        # The interpreter is exiting and has already waited for its threads (the span
        # ended in an exit handler): nobody would wait for a new one, so finish here.
        _work(closeout, finish)
        return
    thread = threading.Thread(
        target=_work,
        args=(closeout, finish),
        name=f"prime-runs-finish-{state.run_id}",
        daemon=False,  # the interpreter must wait for it; the finish deadline bounds it
    )
    try:
        thread.start()
    except RuntimeError:
        _work(closeout, finish)


def _work(closeout: _CloseOut, finish: Callable[[], object]) -> None:
    closeout.thread = threading.current_thread()
    try:
        finish()
    except Exception:  # finish() contains its own failures; this is a last resort
        logger.warning("prime-runs: closing run %s failed", closeout.state.run_id, exc_info=True)
    finally:
        with _lock:
            if closeout in _pending:
                _pending.remove(closeout)
        closeout.done.set()


def pending(owner: object | None = None) -> list[RunState]:
    """The runs whose close-out is under way (``owner``'s only, unless None)."""
    with _lock:
        return [c.state for c in _pending if owner is None or c.owner is owner]


def wait(deadline: float, owner: object | None = None) -> bool:
    """Wait for the close-outs under way (``owner``'s only, unless None) until they end
    or ``deadline`` (``time.monotonic()``). True when every one of them has ended."""
    me = threading.current_thread()
    with _lock:
        # A close-out never waits for itself (say, an exporter flushing the provider).
        waiting = [
            c for c in _pending if (owner is None or c.owner is owner) and c.thread is not me
        ]
    for closeout in waiting:
        closeout.done.wait(max(0.0, deadline - time.monotonic()))
    return all(c.done.is_set() for c in waiting)


def _forget_after_fork() -> None:
    global _lock, _pending
    _lock = threading.RLock()  # the parent's may have been held by another thread
    _pending = []


_forking.in_child(_forget_after_fork)


# -- runs still open ---------------------------------------------------------------


CRASH_REASON = "process exited without finishing the run"


def close_open(state: RunState, status: RunStatus, reason: str | None, timeout: float) -> bool:
    """Finish a run whose span is still open, within ``timeout``, then end its span.

    The finish comes first: a processor seeing the span end finds the run already
    finishing and starts no close-out of its own. Returns False if the run was
    already finishing (then nothing is done). Never raises.
    """
    try:
        if not state.finish(status, None, reason, timeout):
            return False
    except Exception:
        logger.warning("prime-runs: closing run %s failed", state.run_id, exc_info=True)
    end_span(state.span, status, reason)
    return True


def end_span(span: Any, status: RunStatus, reason: str | None) -> None:
    """End a run span with its terminal status, unless it already ended. Never raises."""
    try:
        if span is None or not span.is_recording():
            return  # ended already (or not a span we can end)
        span.set_attribute(semconv.RUN_STATUS, status.value)
        if status is RunStatus.COMPLETED:
            span.set_status(Status(StatusCode.OK))
        elif status in (RunStatus.FAILED, RunStatus.CRASHED):
            span.set_status(Status(StatusCode.ERROR, reason))
        if reason:
            span.set_attribute(semconv.RUN_ERROR, reason)
        span.end()
    except Exception:  # a user's processor must not break the close
        logger.debug("prime-runs: ending the run span failed", exc_info=True)

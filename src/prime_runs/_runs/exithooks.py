"""Process-level hooks: exit without finish, fork, and (opt-in) termination signals.

One set of hooks per process, installed once (``os.register_at_fork`` cannot be
undone). Runs and run states are tracked weakly so a dropped handle is not kept
alive by us.

- **Exit without finish** (atexit, and multiprocessing's own exit path, which
  skips atexit): an owned run is closed out as CRASHED and its span ended (before
  any provider shuts down, so every exporter gets it); a forked child's or a
  joined worker's run is only drained; close-outs of raw run spans still under way
  are waited for. Everything shares one bounded budget, ``EXIT_TIMEOUT``, but a run
  given ``init(finish_timeout=)`` is closed within that instead (0.1.4's keyword); what
  is not sent by then stays in the journal for ``prime-runs sync``.
- **Fork**: the child drops the parent's queues, threads, locks and
  connections (``RunState.after_fork``); the journal opens files of its own
  on first write. The parent keeps the lifecycle.
- **Signals** (``handle_signals=True``): SIGTERM closes live runs as CANCELLED,
  then the handler the application had installed runs, or the default action.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
import weakref
from types import FrameType
from typing import TYPE_CHECKING, Any

import prime_runs._forking as _forking
import prime_runs._runs.closeouts as _closeouts

if TYPE_CHECKING:
    from prime_runs._runs.state import RunState
    from prime_runs.run import Run
    from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")

EXIT_TIMEOUT = 10.0  # seconds all exit-time draining and close-outs may take together
# multiprocessing runs finalizers of higher priority first; ours go early so the
# journal's sinks drain before other libraries tear down what they need.
_MP_EXIT_PRIORITY = 100

# Reentrant: the signal handler takes it and may interrupt the main thread holding it.
_lock = threading.RLock()
# Each handle with its engine: the handle is what is closed, the engine what it closes.
# The engine is held weakly too: a raw run span's engine holds its handle (``state.handle``),
# and a strong value would keep that key, so the pair, alive after the run ended.
_runs: weakref.WeakKeyDictionary[Run, weakref.ref[RunState]] = weakref.WeakKeyDictionary()
_states: weakref.WeakSet[RunState] = weakref.WeakSet()
_installed = False
_signal_handlers: dict[int, _ChainedHandler] = {}


class _Token:
    """A weakly referenceable key for multiprocessing's after-fork registry."""


_MP_TOKEN = _Token()


# -- tracking ----------------------------------------------------------------------


def track(run: Run, state: RunState) -> None:
    """Watch a run handle and its engine: closed out at exit, reset in forked children."""
    with _lock:
        _runs[run] = weakref.ref(state)
    track_state(state)


def track_state(state: RunState) -> None:
    """Watch a run's engine (also one with no handle: raw spans, joined spans)."""
    with _lock:
        _states.add(state)
    _install()


def untrack(run: Run) -> None:
    with _lock:
        _runs.pop(run, None)


def live_runs() -> list[Run]:
    with _lock:
        return list(_runs)


def _live_states() -> list[RunState]:
    with _lock:
        return list(_states)


# -- installation ------------------------------------------------------------------


def register_exit_hook() -> None:
    """(Re-)register the exit hook so it runs before handlers registered earlier.

    atexit runs handlers last-in first-out; an OpenTelemetry provider created
    before this call shuts down after our hook, so episode spans still flow.
    """
    atexit.unregister(_at_exit)
    atexit.register(_at_exit)


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    register_exit_hook()
    _forking.in_child(_after_fork_in_child)
    if _in_multiprocessing_child():
        # A spawn or forkserver worker: its process ends in os._exit, past atexit.
        _arm_multiprocessing_exit()


def _in_multiprocessing_child() -> bool:
    mp = sys.modules.get("multiprocessing")
    return mp is not None and mp.parent_process() is not None


def _arm_multiprocessing_exit(_token: object = None) -> None:
    """Run the exit hook from multiprocessing's exit path (``util._exit_function``).

    A multiprocessing child ends in ``os._exit`` after its target returns, so
    atexit handlers never run there; multiprocessing's finalizers do.
    """
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util.Finalize(None, _at_exit, exitpriority=_MP_EXIT_PRIORITY)


# -- exit --------------------------------------------------------------------------


def _at_exit() -> None:
    close_all(EXIT_TIMEOUT)


def close_all(budget: float, status: RunStatus | None = None, reason: str | None = None) -> None:
    """Close every live run within one shared ``budget`` (seconds). Never raises.

    ``status=None`` is the exit path: an owned, unfinished run is closed out as
    CRASHED. Otherwise owned runs finish with ``status``. Either way a forked
    child's or a joined worker's run is only drained, never closed.
    """
    deadline = time.monotonic() + budget
    handled: set[int] = set()
    with _lock:
        handles = list(_runs.items())
    for run, engine in handles:
        state = engine()
        if state is None:
            continue  # not while the handle lives (it holds its engine): for the checker
        handled.add(id(state))
        left = max(0.0, deadline - time.monotonic())
        try:
            if status is None:
                run.crash(left)
            else:
                run.finish(None, status, reason, timeout=left)
        except Exception:
            logger.warning("prime-runs: closing run %s failed", run.id, exc_info=True)
    closing = {id(s) for s in _closeouts.pending()}  # waited for below
    for state in _live_states():
        # States without a handle (raw run spans, joined spans).
        if id(state) in handled or id(state) in closing or state.finishing:
            continue
        _close_state(state, status, reason, max(0.0, deadline - time.monotonic()))
    # Close-outs of raw run spans that ended moments ago; at a normal exit the
    # interpreter has already waited for them (their threads are not daemons).
    _closeouts.wait(deadline)


def _close_state(
    state: RunState, status: RunStatus | None, reason: str | None, left: float
) -> None:
    """Close an owned run (its span too, before any provider shuts down, so every
    exporter still gets it); only drain a forked child's or a joined worker's."""
    try:
        if state.owner and not state.forked:
            from prime_runs.status import RunStatus

            final = RunStatus.CRASHED if status is None else status
            why = _closeouts.CRASH_REASON if status is None else reason
            _closeouts.close_open(state, final, why, left)
        else:
            state.finish(state.status, None, None, left)
    except Exception:
        logger.warning("prime-runs: closing run %s failed", state.run_id, exc_info=True)


# -- fork --------------------------------------------------------------------------


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # the parent's may have been held by another thread
    for state in list(_states):
        try:
            state.after_fork()
        except Exception:  # never break the child's fork()
            logger.debug("prime-runs: resetting a run after fork failed", exc_info=True)
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        # If this child is a multiprocessing worker, its bootstrap clears inherited
        # finalizers and then runs the after-fork registry: arm the exit hook there.
        util.register_after_fork(_MP_TOKEN, _arm_multiprocessing_exit)


# -- signals -----------------------------------------------------------------------


class _ChainedHandler:
    """Closes live runs as CANCELLED, then hands the signal on to ``previous``."""

    def __init__(self, signum: int, previous: Any) -> None:
        self.signum = signum
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        from prime_runs.status import RunStatus

        close_all(EXIT_TIMEOUT, RunStatus.CANCELLED, f"received {signal.Signals(signum).name}")
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL, or a handler installed outside Python (None): the default action,
        # so the process still ends the way its supervisor expects.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def install_signal_handlers(signals: tuple[int, ...] = (signal.SIGTERM,)) -> list[int]:
    """Close live runs as CANCELLED on these signals, then chain the previous handler.

    Returns the signals now handled. Must run in the main thread (a warning
    otherwise). A signal the application ignores (``SIG_IGN``) is left alone: the
    process lives on, so its runs are not over. Installing twice is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        logger.warning(
            "prime-runs: handle_signals=True only works from the main thread; "
            "signals are not handled"
        )
        return []
    handled = []
    for signum in signals:
        previous = signal.getsignal(signum)
        if isinstance(previous, _ChainedHandler):
            handled.append(signum)
            continue
        if previous == signal.SIG_IGN:
            continue
        handler = _ChainedHandler(signum, previous)
        signal.signal(signum, handler)
        with _lock:
            _signal_handlers[signum] = handler
        handled.append(signum)
    return handled

"""Process-level hooks: exit without finish, fork, and (opt-in) SIGTERM.

One set of hooks per process, installed once. Runs are tracked weakly so a
dropped handle is not kept alive by us.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run import Run

logger = logging.getLogger("prime_runs")

EXIT_TIMEOUT = 10.0  # seconds the exit hook may spend draining and closing out

_lock = threading.Lock()
_runs: weakref.WeakSet[Run] = weakref.WeakSet()
_installed = False
_signals_installed = False


def track(run: Run) -> None:
    with _lock:
        _runs.add(run)
    _install()


def untrack(run: Run) -> None:
    with _lock:
        _runs.discard(run)


def live_runs() -> list[Run]:
    with _lock:
        return list(_runs)


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
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _at_exit() -> None:
    for run in live_runs():
        try:
            run.crash(EXIT_TIMEOUT)
        except Exception:
            logger.warning("prime-runs: closing run %s at exit failed", run.id, exc_info=True)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread
    for run in list(_runs):
        state = run._state
        if state is not None:
            state.after_fork()


def install_signal_handlers(signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
    """Close live runs as CANCELLED on these signals, then chain the previous handler."""
    global _signals_installed
    if _signals_installed or threading.current_thread() is not threading.main_thread():
        return
    _signals_installed = True
    for signum in signals:
        previous = signal.getsignal(signum)

        def handler(num: int, frame: Any, _previous: Any = previous) -> None:
            from .status import RunStatus

            for run in live_runs():
                try:
                    run.finish(
                        None,
                        RunStatus.CANCELLED,
                        f"signal {signal.Signals(num).name}",
                        timeout=EXIT_TIMEOUT,
                    )
                except Exception:
                    logger.warning("prime-runs: closing run %s failed", run.id, exc_info=True)
            if callable(_previous):
                _previous(num, frame)
            elif _previous == signal.SIG_DFL:
                signal.signal(num, signal.SIG_DFL)
                os.kill(os.getpid(), num)

        signal.signal(signum, handler)

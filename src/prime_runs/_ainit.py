"""``pr.ainit()``: ``init()`` off the event loop, awaited or entered with ``async with``.

``pr.init()`` blocks its caller while the platform registers the run (at most
``register_timeout``); on an event loop that stalls every task. ``ainit()`` runs the same
call on a thread of its own (``_runs/aio``), in the caller's context (so it joins the run
the current context carries, as ``init()`` would), with the same arguments, errors and
bound.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import prime_runs._runs.exithooks as _exit
from prime_runs._runs.aio import off_loop
from prime_runs._runs.options import check_arguments
from prime_runs.api import init
from prime_runs.run import Run
from prime_runs.status import RunStatus


class Starting(Coroutine[Any, Any, Run]):
    """What ``ainit()`` returns: a coroutine (``await`` it, or hand it to
    ``asyncio.create_task``) for the ``Run``, and an async context manager (the run is this
    task's context inside; leaving finishes it off the loop, as ``with run:``)."""

    def __init__(self, start: Callable[[], Run], handle_signals: bool) -> None:
        self._opening = self._open(start, handle_signals)
        self._run: Run | None = None

    async def _open(self, start: Callable[[], Run], handle_signals: bool) -> Run:
        # A run started for a task cancelled meanwhile is closed, not left to crash at exit.
        run = await off_loop(start, dropped=_cancelled)
        if handle_signals:
            _exit.install_signal_handlers()  # signals are handled on the main thread only
        return run

    def __await__(self) -> Generator[Any, None, Run]:
        return self._opening.__await__()

    def send(self, value: Any) -> Any:
        return self._opening.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if val is None and tb is None:
            return self._opening.throw(typ)
        return self._opening.throw(typ, val, tb)

    def close(self) -> None:
        self._opening.close()

    async def __aenter__(self) -> Run:
        self._run = await self._opening
        return await self._run.__aenter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._run is not None:
            await self._run.__aexit__(exc_type, exc, tb)


def _cancelled(run: Run) -> None:
    run.finish(status=RunStatus.CANCELLED, error="interrupted")


def ainit(*args: Any, **kwargs: Any) -> Starting:
    """``init()`` without blocking the event loop: the same arguments, errors and
    ``register_timeout``. ``run = await pr.ainit(...)``, or
    ``async with pr.ainit(...) as run:`` (an exception leaving the block fails the run,
    ``asyncio.CancelledError`` cancels it, as ``with run:`` does). See ``docs/concepts.md``."""
    handle_signals = kwargs.pop("handle_signals", False)
    check_arguments({"handle_signals": handle_signals})  # as init() would, at once
    return Starting(functools.partial(init, *args, **kwargs), handle_signals)


# help() and editors show init()'s keywords (typeshed declares no __signature__ on functions).
ainit.__signature__ = inspect.signature(init).replace(  # type: ignore[attr-defined]
    return_annotation=Starting
)

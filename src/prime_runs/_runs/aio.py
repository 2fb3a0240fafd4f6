"""The async face of a run and its blocks: ``await run.aflush()``, ``await run.afinish()``,
``with run:`` and ``async with run:`` (a block finishes the run as it ends).

Each runs its sync counterpart on a thread of its own (``off_loop``), so the event loop
never waits on the platform, with the same guarantees: the same statuses, timeouts, return
values and errors, and the same idempotence. Not the loop's default executor: a finish
must not queue behind the application's own blocking work there, nor be cut short by the
executor's shutdown when ``asyncio.run()`` returns. The thread is not a daemon, so the
interpreter lets a finish whose caller was cancelled complete (within its timeout) before
the exit hooks run. The log calls stay synchronous: they never wait on the network.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context

import prime_runs._providers as _providers
from prime_runs._runs.handling import exit_outcome
from prime_runs.status import RunStatus

if TYPE_CHECKING:
    import asyncio
    from contextvars import Token

    from prime_runs._runs.state import RunState

T = TypeVar("T")
Face = TypeVar("Face", bound="AsyncFace")
logger = logging.getLogger("prime_runs")


async def off_loop(call: Callable[[], T], *, dropped: Callable[[T], object] | None = None) -> T:
    """``call()`` on a thread of its own, in a copy of the caller's context (its
    OpenTelemetry context included); its result or exception, awaited. Cancelling the
    awaiting task does not stop the call: it runs to its end, and a result nobody awaits any
    more goes to ``dropped``, on a thread of its own."""
    import asyncio  # loaded by whoever awaits this; importing prime_runs does not need it

    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    handoff = _Handoff(dropped)
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(call))
        except BaseException as exc:  # handed to the awaiting task
            outcome = (False, exc)
        if not handoff.deliver(outcome):
            return  # the awaiting task was cancelled first: ``dropped`` has the result
        try:
            loop.call_soon_threadsafe(_settle, future, outcome, handoff)
        except RuntimeError:  # the loop closed meanwhile
            handoff.drop(outcome)

    threading.Thread(target=work, name="prime-runs-async").start()
    try:
        return await future
    except asyncio.CancelledError:
        handoff.abandon()
        raise


class _Handoff:
    """Who gets a result: the awaiting task, or ``dropped`` once that task gave up."""

    def __init__(self, dropped: Callable[[Any], object] | None) -> None:
        self._dropped = dropped
        self._lock = threading.Lock()
        self._abandoned = False
        self._delivered = False

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = not self._delivered

    def deliver(self, outcome: tuple[bool, Any]) -> bool:
        """On the worker thread: whether the awaiting task still waits for ``outcome``."""
        with self._lock:
            if not self._abandoned:
                self._delivered = True
                return True
        self.drop(outcome)
        return False

    def drop(self, outcome: tuple[bool, Any]) -> None:
        ok, value = outcome
        if ok and self._dropped is not None:
            threading.Thread(target=self._dropped, args=(value,), name="prime-runs-async").start()


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any], handoff: _Handoff) -> None:
    if future.done():  # the awaiting task was cancelled after the outcome was handed over
        handoff.drop(outcome)
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class AsyncFace:
    """``Run``'s async methods, each its sync method off the event loop, and its blocks
    (``with run:``, ``async with run:``), which finish it as the block ends."""

    if TYPE_CHECKING:

        def flush(self, timeout: float | None = 30.0) -> bool: ...

        def finish(
            self,
            summary: Mapping[str, Any] | None = None,
            status: RunStatus | str = RunStatus.COMPLETED,
            error: str | BaseException | None = None,
            *,
            timeout: float | None = None,
        ) -> None: ...

        _state: RunState | None
        _ctx: otel_context.Context
        _tokens: list[Token[otel_context.Context]]

    async def aflush(self, timeout: float | None = 30.0) -> bool:
        """``flush()`` without blocking the event loop: the same wait, the same return value
        (whether every record logged so far is stored by every sink) and errors."""
        return await off_loop(functools.partial(self.flush, timeout))

    async def afinish(
        self,
        summary: Mapping[str, Any] | None = None,
        status: RunStatus | str = RunStatus.COMPLETED,
        error: str | BaseException | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """``finish()`` without blocking the event loop: the same drain, close-out, timeout
        and errors; idempotent (the first call's status wins, sync or async). Cancelling
        the await does not stop it: the run still closes, within ``timeout``."""
        await off_loop(functools.partial(self.finish, summary, status, error, timeout=timeout))

    async def __aenter__(self: Face) -> Face:
        return self.__enter__()  # the run becomes this task's context; nothing waits

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._leave()  # on the task that entered: its context, not the finishing thread's
        await off_loop(functools.partial(self._end_block, exc))

    def __enter__(self: Face) -> Face:
        if self._state is not None:
            # Spans made inside must reach a run processor: join a provider another tool
            # set up since init(), or make init()'s own the global one (``_providers``).
            _providers.enter_run()
        self._tokens.append(otel_context.attach(self._ctx))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._leave()
        self._end_block(exc)

    def _leave(self) -> None:
        if self._tokens:
            try:
                otel_context.detach(self._tokens.pop())
            except Exception:
                pass

    def _end_block(self, exc: BaseException | None) -> None:
        """Leaving ``with run:`` (or ``async with``): finished as ``exc`` says."""
        try:
            self.finish(None, *exit_outcome(exc))
        except Exception:
            if exc is None:
                raise
            # The original exception propagates; a teardown failure never replaces it.
            logger.warning("prime-runs: closing the run failed", exc_info=True)

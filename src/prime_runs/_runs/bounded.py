"""``init()``'s wait for the platform, bounded by ``register_timeout`` (15 s by default).

The registration request runs on a thread of its own (``Attempt``) and ``init()`` waits for
it at most that long. Within it, ``init()`` returns the registered run, or raises, exactly as
when it waited on its own thread. Past it, the run goes on under a local id, and
``registering.begin`` applies the outcome when it comes: the path a raw ``run`` span's run
always takes (records are journaled and held for the sinks, then sent stamped with the
platform's id). The intent written to the archive at that moment, with the time the request
was sent, lets ``prime-runs sync`` find the registration again if the process dies before
the platform answers, rather than register the run twice.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from prime_runs._runs.state import RunState
from prime_runs.errors import describe

logger = logging.getLogger("prime_runs")

T = TypeVar("T")


class Attempt(Generic[T]):
    """``work`` (a registration request) on a daemon thread; thread-safe."""

    def __init__(self, work: Callable[[], T]) -> None:
        self.sent_at = datetime.now(timezone.utc)  # an intent written later says when
        self._done = threading.Event()
        self._result: list[T] = []  # work()'s return, once it returned (T may be None)
        self._error: BaseException | None = None
        threading.Thread(
            target=self._run, args=(work,), name="prime-runs-register", daemon=True
        ).start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            self._result.append(work())
        except BaseException as exc:  # handed to whoever waits for it
            self._error = exc
        finally:
            self._done.set()

    def within(self, seconds: float) -> bool:
        """Wait at most ``seconds`` (``inf``: no bound); whether the outcome came."""
        return self._done.wait(None if math.isinf(seconds) else seconds)

    def result(self) -> T:
        """The registration, once it comes; raises what the request raised."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result[0]


def note_intent(state: RunState, attempt: Attempt[Any]) -> None:
    """In sync.json, that a registration was sent at ``attempt.sent_at`` and has not been
    answered (``register_once`` and ``training_register`` read it)."""
    if state.archive is None:
        return
    try:
        sync = state.archive.sync_state()
        sync["intent"] = {"at": attempt.sent_at.isoformat()}
        state.archive.write_sync_state(sync)
    except OSError as exc:
        state.report(f"could not record in the archive that the run is being registered: {exc}")


def forget_intent(state: RunState) -> None:
    """The registration certainly did not land: a later sync may register the run afresh."""
    if state.archive is None:
        return
    try:
        sync = state.archive.sync_state()
        sync.pop("intent", None)
        state.archive.write_sync_state(sync)
    except OSError as exc:
        state.report(f"could not record in the archive that the run was not registered: {exc}")


def record_platform(state: RunState, where: dict[str, Any]) -> None:
    """In sync.json and run.json, the run's ``{"id", "url", "name"}`` on the platform, so
    `prime-runs sync` delivers what is left to it."""
    if state.archive is None:
        return
    try:
        sync = state.archive.sync_state()
        sync["platform"] = where
        sync.pop("intent", None)
        state.archive.write_sync_state(sync)
        description = state.archive.description()
        description["platform"] = {"id": where["id"], "url": where.get("url")}
        state.archive.write_description(description)
    except OSError as exc:
        state.report(f"could not record the run's registration in the archive: {exc}")


def landed(state: RunState, attempt: Attempt[T]) -> T:
    """The attempt's registration, on ``registering``'s thread. A failure is also kept in
    ``run.errors`` (raised at the next flush or finish under ``on_error="raise"``): once
    ``init()`` returned, that is where the caller learns of it."""
    try:
        return attempt.result()
    except Exception as exc:
        message = f"could not register the run on the platform: {describe(exc)}"
        state.report(message, exc, warn=False)  # registering warns once, as for a raw span
        raise


def warn_late(state: RunState, waited: float) -> None:
    logger.warning(
        "prime-runs: the platform has not registered run %r after %g s (register_timeout); "
        "it goes on under the local id %s and is registered when the platform answers: "
        "records logged meanwhile are kept and sent, stamped with the platform's id, once "
        "it is (run.id and run.url change then)",
        state.identity.name,
        waited,
        state.run_id,
    )


def say_registered(local_id: str, run_id: str, url: str | None) -> None:
    logger.info("prime-runs: run %s is registered on the platform as %s: %s", local_id, run_id, url)

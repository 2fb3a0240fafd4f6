"""A run registered off the thread that opened it: a raw ``run`` span's, or an ``init()``
run the platform did not register within ``register_timeout`` (15 s by default).

OpenTelemetry's ``on_start`` must not wait on the network, nor ``init()`` past its bound.
``init()``'s request runs on a thread of its own (``Attempt``) and ``init()`` waits for it at
most that long: within it, ``init()`` returns the registered run, or raises, exactly as when
it waited on its own thread. Past it (and always for a raw ``run`` span), the run opens
under a local id, with its journal; records logged meanwhile are journaled and held for the
sinks. A short-lived thread (``begin``) applies the outcome when it comes: it attaches the
sinks, which stamp the earlier records with the platform's id as they send them. If the
platform refuses, the run goes on offline, as ``init()`` would have. ``finish()`` waits for
the outcome within its deadline (``finish_sequence.Pending``).

An intent in the archive comes first (with the time the request was sent), so a crash
before the platform answers never leads to a second run: ``prime-runs sync`` looks the
evaluation up, or for a training run stops and says how to go on, rather than register the
run twice (``_runs/register_once``).

The thread is the same for every kind of run (``_runs/opening``): what differs is how the
run is created and what it is given once it is (``Registered``), its ``Kind``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from prime_runs import semconv
from prime_runs._records.item import Sink
from prime_runs._runs.finish_sequence import Pending
from prime_runs._runs.state import Closer, Identity, RunState
from prime_runs.errors import describe

logger = logging.getLogger("prime_runs")

T = TypeVar("T")

# -- init()'s bounded wait ---------------------------------------------------------


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
    answered (``register_once`` reads it)."""
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
    """The attempt's registration, on ``begin``'s thread. A failure is also kept in
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


# -- the registration thread -------------------------------------------------------


@dataclass
class Registered:
    """What a run is given once the platform registered it."""

    identity: Identity
    closer: Closer
    sinks: Sequence[Sink]
    release: Callable[[], None]  # its clients, when finish() stopped waiting for it
    # More wiring once the sinks are attached (a training run's metrics), given the local id.
    then: list[Callable[[str], None]] = field(default_factory=list)


def begin(
    state: RunState,
    register: Callable[[], Registered],
    on_offline: Callable[[], None] | None = None,
) -> None:
    """Register ``state``'s run on a short-lived thread: ``register`` creates it (raising
    when the platform refuses; ``on_offline`` then lets go of what waited for it)."""
    state.registering = Pending()
    worker = threading.Thread(
        target=_work,
        args=(state, register, on_offline),
        name="prime-runs-register",
        daemon=True,  # finish() and the exit hooks wait for it, within their deadlines
    )
    worker.start()


def _work(
    state: RunState, register: Callable[[], Registered], on_offline: Callable[[], None] | None
) -> None:
    pending = state.registering
    assert pending is not None
    local_id = state.run_id
    try:
        registered = register()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        if pending.apply(lambda: _offline(state, reason, on_offline)):
            logger.warning(
                "prime-runs: could not register the run on the platform (%s); it runs "
                "offline instead and `prime-runs sync` can upload it later",
                reason,
            )
        return
    if pending.apply(lambda: _online(state, registered, local_id)):
        return
    # finish() stopped waiting: the archive names the run, sync delivers and closes it.
    for sink in registered.sinks:
        sink.close()
    registered.release()


def _offline(state: RunState, reason: str, on_offline: Callable[[], None] | None) -> None:
    state.went_offline(reason)
    if on_offline is not None:
        on_offline()
    # Before finish() hears of it: a sync right after the run ended sees an offline run.
    _write_offline(state)


def _write_offline(state: RunState) -> None:
    if state.archive is None:
        return
    try:
        state.archive.write_description(state.description)
    except OSError as exc:
        state.report(f"could not record in the archive that the run went offline: {exc}")


def _online(state: RunState, registered: Registered, local_id: str) -> None:
    identity = registered.identity
    state.registered(identity, registered.closer, registered.sinks, local_id)
    for then in registered.then:
        then(local_id)
    span = state.span  # the platform's id (and URL) on the run span, unless it has ended
    if span is not None and span.is_recording():
        span.set_attribute(semconv.RUN_ID, identity.run_id)
        if identity.url:
            span.set_attribute(semconv.RUN_URL, identity.url)

"""A run registered off the thread that opened it: a raw ``run`` span's, or an ``init()``
run the platform did not register within ``register_timeout`` (``_runs/bounded``).

OpenTelemetry's ``on_start`` must not wait on the network, nor ``init()`` past its bound.
The run opens at once under a local id, with its journal; records logged meanwhile are
journaled and held for the sinks. A short-lived thread registers the run (an intent in the
archive first, so a crash mid-create never leads to a second evaluation), then attaches the
sinks, which stamp the earlier records with the platform's id as they send them. If the
platform refuses, the run goes on offline, as ``init()`` would have. ``finish()`` waits for
the outcome within its deadline (``_latch.Pending``).

The thread (``begin``) is the same for every kind of run: what differs is how the run is
created and what it is given once it is (``Registered``). An evaluation's is in
``_runs/eval_open``, a training run's in ``_runs/training_open``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prime_runs import semconv
from prime_runs._records.item import Sink
from prime_runs._runs.latch import Pending
from prime_runs._runs.state import Closer, Identity, RunState

logger = logging.getLogger("prime_runs")


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

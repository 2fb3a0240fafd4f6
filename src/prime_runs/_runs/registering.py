"""A raw ``run`` span's run, registered off the thread that started the span.

OpenTelemetry's ``on_start`` must not wait on the network. The run opens at once under a
local id, with its journal; records logged meanwhile are journaled and held for the sinks.
A short-lived thread creates the evaluation as ``prime-runs sync`` registers an offline
run (an intent in the archive first, so a crash mid-create never leads to a second
evaluation), then attaches the sinks, which stamp the earlier records with the platform's
id as they send them. If the platform refuses, the run goes on offline, as ``init()``
would have. ``finish()`` waits for the outcome within its deadline (``_latch.Pending``).

The thread (``begin``) is the same for every kind of run: what differs is how the run is
created and what it is given once it is (``Registered``). A training run's is in
``_runs/training_open``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import prime_runs._runs.opening as _open
import prime_runs._runs.register_once as register_once
from prime_runs import semconv
from prime_runs._runs.latch import Pending
from prime_runs._runs.state import Closer, Identity, RunState
from prime_runs.errors import ConfigurationError
from prime_runs.exporters._sinks import build_sinks
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.environments import dataset_name
from prime_runs.platform.evaluations import default_name
from prime_runs.platform.lifecycle import OnlineLifecycle, Registration
from prime_runs.settings import ONLINE, Settings

logger = logging.getLogger("prime_runs")

SINK_NAMES = (("traces", "traces"), ("eval_samples", "samples"))


@dataclass
class Registered:
    """What a run is given once the platform registered it."""

    identity: Identity
    closer: Closer
    sinks: list[Any]
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


def open_raw(opts: _open.RunOptions) -> RunState | None:
    """Open a raw run span's evaluation without waiting on the network; ``None`` when
    disabled."""
    settings, config, environments = _open.resolve(opts)
    if settings.mode != ONLINE or opts.id:  # offline, disabled, or attached: no request
        return _open.open_state(opts)
    if not environments:
        raise ConfigurationError(
            "an online eval run needs at least one environment: set the run span's "
            "prime.run.environments attribute (a list of names)"
        )
    root = _open.archive_root(opts.dir)
    local_id = _open.local_run_id()
    description = _open.describe(opts, config, environments, ONLINE)
    description["name"] = opts.name or default_name(dataset_name(environments), opts.framework)
    state = RunState(
        Identity(local_id, description["name"], ONLINE, local=True),
        description=description,
        config=config,
        archive=_open.online_archive(opts, root, local_id, description),
        on_error=opts.on_error,
    )
    state.delivery.expect(
        [name for name, flag in SINK_NAMES if getattr(opts, flag)],
    )
    begin(state, lambda: _register(state, opts, settings, environments))
    return state


def _register(
    state: RunState, opts: _open.RunOptions, settings: Settings, environments: list[Any]
) -> Registered:
    client = PlatformClient(settings)
    lifecycle = OnlineLifecycle(settings, client=client)
    try:
        registration = _create(state, opts, lifecycle, client, environments)
    except BaseException:
        client.close()
        raise
    identity = Identity(registration.id, registration.name, ONLINE, url=registration.url)
    sinks = build_sinks(
        settings,
        registration.id,
        _open.upload_context_of(opts),
        traces=opts.traces,
        samples=opts.samples,
    )
    closer = _open.closer(lifecycle, registration, state.config, attached=False)
    return Registered(identity, closer, sinks, lifecycle.shutdown)


def _create(
    state: RunState,
    opts: _open.RunOptions,
    lifecycle: OnlineLifecycle,
    client: PlatformClient,
    environments: list[Any],
) -> Registration:
    name = str(state.description["name"])
    if state.archive is not None:
        # An intent first (see register_once): a crash mid-create is reconciled by sync.
        found = register_once.register(state.archive, lifecycle.settings, client, claimed=set())
        url = found.get("url")
        return Registration(str(found["id"]), name, url if isinstance(url, str) else None)
    return _open.register_eval(lifecycle, opts, state.config, environments)


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

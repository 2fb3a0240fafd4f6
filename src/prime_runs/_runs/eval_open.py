"""Opening an evaluation run: ``init()``'s, registered within ``register_timeout`` or past
it (``_runs/registering``), or offline; and a raw ``run`` span's, registered off the thread that
started the span (``_runs/registering``). A training run opens in ``_runs/training_open``."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import prime_runs._runs.register_once as register_once
from prime_runs._journal.archive import RunArchive
from prime_runs._runs.accounting import RAISE
from prime_runs._runs.opening import (
    RunOptions,
    archive_root,
    closer,
    describe,
    environments_hint,
    local_run_id,
    online_archive,
    register_eval,
    resolve,
    upload_context_of,
    wire_sinks,
)
from prime_runs._runs.registering import (
    Attempt,
    Registered,
    begin,
    landed,
    note_intent,
    record_platform,
    say_registered,
    warn_late,
)
from prime_runs._runs.state import Identity, RunState
from prime_runs.errors import ConfigurationError, EnvironmentResolutionError, PrimeRunsError
from prime_runs.exporters._sinks import build_sinks
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.environments import dataset_name
from prime_runs.platform.evaluations import default_name
from prime_runs.platform.lifecycle import OnlineLifecycle, Registration
from prime_runs.settings import DIR_ENV, DISABLED, OFFLINE, ONLINE, Settings, register_timeout

logger = logging.getLogger("prime_runs")

SINK_NAMES = (("traces", "traces"), ("eval_samples", "samples"))


def open_state(opts: RunOptions) -> RunState | None:
    """Open a run as ``init()`` asked; ``None`` for a disabled run."""
    settings, config, environments = resolve(opts)
    if settings.mode == DISABLED:
        return None
    root = archive_root(opts.dir)
    if settings.mode == ONLINE:
        state = _open_online(opts, settings, config, environments, root)
        if state is not None:
            return state
    return _open_offline(opts, config, environments, root)


def _open_offline(
    opts: RunOptions,
    config: dict[str, Any],
    environments: list[Any],
    root: Path,
    *,
    fallback_reason: str | None = None,
) -> RunState:
    run_id = local_run_id()
    name = opts.name or default_name(dataset_name(environments), opts.framework)
    description = describe(opts, config, environments, OFFLINE)
    description["name"] = name
    if fallback_reason:
        description["offline_because"] = fallback_reason
    try:
        archive = RunArchive.create(root, run_id, description)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the run archive under {str(root)!r} ({exc.strerror}); pass dir= or "
            f"set {DIR_ENV} to a writable folder"
        ) from exc
    if not environments:  # the platform registers an eval only under an environment
        logger.warning(
            "prime-runs: offline run %s names no environment, which the platform needs to "
            "register it: %s, or upload it later with `prime-runs sync --environment NAME %s`",
            run_id,
            environments_hint(opts),
            run_id,
        )
    return RunState(
        Identity(run_id, name, OFFLINE),
        description=description,
        config=config,
        archive=archive,
        on_error=opts.on_error,
    )


def _open_online(
    opts: RunOptions,
    settings: Settings,
    config: dict[str, Any],
    environments: list[Any],
    root: Path,
) -> RunState | None:
    if not environments and not opts.id:
        raise ConfigurationError(
            f"an online eval run needs at least one environment: {environments_hint(opts)}"
        )
    waited = register_timeout(opts.register_timeout)  # a bad setting raises before a request
    client = PlatformClient(settings)
    lifecycle = OnlineLifecycle(settings, client=client)
    attempt = None
    if not opts.id:  # attaching sends no request
        # Named here, not by the create: a late registration is looked up by its name.
        name = opts.name or default_name(dataset_name(environments), opts.framework)
        opts = named = dataclasses.replace(opts, name=name)
        attempt = Attempt(lambda: register_eval(lifecycle, named, config, environments))
        if not attempt.within(waited):
            args = (opts, settings, config, environments, root)
            return _open_late(*args, lifecycle, attempt, waited)
    try:
        registration = attempt.result() if attempt else lifecycle.attach(str(opts.id))
    except (ConfigurationError, EnvironmentResolutionError):
        client.close()
        raise
    except PrimeRunsError as exc:
        client.close()
        if opts.on_error == RAISE:
            raise
        reason = f"{type(exc).__name__}: {exc}"
        logger.warning(
            "prime-runs: could not register the run on the platform (%s); it runs offline "
            "instead and `prime-runs sync` can upload it later",
            reason,
        )
        return _open_offline(opts, config, environments, root, fallback_reason=reason)

    attached = bool(opts.id)
    description = describe(opts, config, environments, ONLINE)
    description["name"] = registration.name
    description["platform"] = {"id": registration.id, "url": registration.url}
    description["attached"] = attached
    state = RunState(
        Identity(registration.id, registration.name, ONLINE, url=registration.url),
        description=description,
        config=config,
        archive=online_archive(opts, root, registration.id, description),
        on_error=opts.on_error,
        closer=closer(lifecycle, registration, config, attached),
    )
    wire_sinks(state, settings, registration, opts, context=upload_context_of(opts))
    return state


def _local_state(
    opts: RunOptions, config: dict[str, Any], environments: list[Any], root: Path
) -> RunState:
    """An online run not registered yet: a local id, its journal, and its records held for
    the sinks it will have."""
    local_id = local_run_id()
    description = describe(opts, config, environments, ONLINE)
    description["name"] = opts.name or default_name(dataset_name(environments), opts.framework)
    state = RunState(
        Identity(local_id, description["name"], ONLINE, local=True),
        description=description,
        config=config,
        archive=online_archive(opts, root, local_id, description),
        on_error=opts.on_error,
    )
    state.delivery.expect([name for name, flag in SINK_NAMES if getattr(opts, flag)])
    return state


def _open_late(
    opts: RunOptions,
    settings: Settings,
    config: dict[str, Any],
    environments: list[Any],
    root: Path,
    lifecycle: OnlineLifecycle,
    attempt: Attempt[Registration],
    waited: float,
) -> RunState:
    """``init()`` waited ``register_timeout`` for the create: the run goes on locally, and
    is registered by the request still under way when the platform answers."""
    state = _local_state(opts, config, environments, root)
    note_intent(state, attempt)
    local_id = state.run_id

    def register() -> Registered:
        try:
            registration = landed(state, attempt)
        except BaseException:
            lifecycle.client.close()
            raise
        where = {"id": registration.id, "url": registration.url, "name": registration.name}
        record_platform(state, where)
        say_registered(local_id, registration.id, registration.url)
        return _registered(state, opts, settings, lifecycle, registration)

    begin(state, register)
    warn_late(state, waited)
    return state


def _registered(
    state: RunState,
    opts: RunOptions,
    settings: Settings,
    lifecycle: OnlineLifecycle,
    registration: Registration,
) -> Registered:
    """What a run registered off its thread is given: its identity, sinks and close-out."""
    identity = Identity(registration.id, registration.name, ONLINE, url=registration.url)
    sinks = build_sinks(
        settings,
        registration.id,
        upload_context_of(opts),
        traces=opts.traces,
        samples=opts.samples,
    )
    close = closer(lifecycle, registration, state.config, attached=False)
    return Registered(identity, close, sinks, lifecycle.shutdown)


# -- a raw `run` span's evaluation -------------------------------------------------------


def open_raw(opts: RunOptions) -> RunState | None:
    """Open a raw run span's evaluation without waiting on the network; ``None`` when
    disabled."""
    settings, config, environments = resolve(opts)
    if settings.mode != ONLINE or opts.id:  # offline, disabled, or attached: no request
        return open_state(opts)
    if not environments:
        raise ConfigurationError(
            "an online eval run needs at least one environment: set the run span's "
            "prime.run.environments attribute (a list of names)"
        )
    state = _local_state(opts, config, environments, archive_root(opts.dir))
    begin(state, lambda: _register_raw(state, opts, settings, environments))
    return state


def _register_raw(
    state: RunState, opts: RunOptions, settings: Settings, environments: list[Any]
) -> Registered:
    client = PlatformClient(settings)
    lifecycle = OnlineLifecycle(settings, client=client)
    try:
        registration = _create(state, opts, lifecycle, client, environments)
    except BaseException:
        client.close()
        raise
    return _registered(state, opts, settings, lifecycle, registration)


def _create(
    state: RunState,
    opts: RunOptions,
    lifecycle: OnlineLifecycle,
    client: PlatformClient,
    environments: list[Any],
) -> Registration:
    name = str(state.description["name"])
    if state.archive is not None:
        # An intent first (see register_once): a crash mid-create is reconciled by sync.
        settings = lifecycle.settings
        found = register_once.register_evaluation(state.archive, settings, client, claimed=set())
        url = found.get("url")
        return Registration(str(found["id"]), name, url if isinstance(url, str) else None)
    return register_eval(lifecycle, opts, state.config, environments)

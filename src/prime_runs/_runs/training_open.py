"""Opening a training run: register it (or attach with ``id=``), wire its sinks, and the
close-out that finalizes it or sets its status (contract Appendix A). ``init()`` registers
before it returns, unless the platform takes longer than ``register_timeout``
(``_runs/registering``); then, and for a raw ``run`` span's training run, the run is registered
off the thread that opened it, through ``registering.begin`` as an evaluation is."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import prime_runs._runs.finishing as _finishing
import prime_runs._runs.register_once as register_once
from prime_runs._delivery.provenance import upload_context
from prime_runs._journal.archive import RunArchive
from prime_runs._records.item import Sink
from prime_runs._runs.eval_open import open_raw, open_state
from prime_runs._runs.opening import (
    RunOptions,
    archive_root,
    closing,
    describe,
    local_run_id,
    online_archive,
    resolve,
)
from prime_runs._runs.registering import (
    Attempt,
    Registered,
    begin,
    forget_intent,
    landed,
    note_intent,
    record_platform,
    say_registered,
    warn_late,
)
from prime_runs._runs.state import Closer, Identity, RunState
from prime_runs._runs.training import TrainingSide, check_kind, side_of
from prime_runs.errors import ConfigurationError, PrimeRunsError
from prime_runs.exporters._sinks import build_sinks
from prime_runs.exporters.metrics import SINK_NAME
from prime_runs.exporters.train_samples import SINK_NAME as SAMPLES_SINK
from prime_runs.exporters.train_samples import TrainSamplesSink, parquet_available
from prime_runs.platform._http import is_ambiguous
from prime_runs.platform.training import (
    NEEDS_MODEL,
    TRAIN,
    TrainingPlatform,
    TrainingRegistration,
    TrainingSpec,
    register_body,
)
from prime_runs.settings import DISABLED, OFFLINE, ONLINE, Settings, register_timeout
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")


def open_run(opts: RunOptions) -> RunState | None:
    """Open the run ``init()`` asked for: a training run (``kind="train"``) or an
    evaluation; ``None`` for a disabled run."""
    check_kind(opts.kind, opts.training)
    return open_training(opts) if opts.kind == TRAIN else open_state(opts)


def open_training(opts: RunOptions) -> RunState | None:
    """Open a training run as ``init()`` asked; ``None`` for a disabled run. Errors of
    registration propagate (contract §12.5): a training loop must not run unregistered."""
    spec = check_kind(opts.kind, opts.training) or TrainingSpec()
    settings, config, environments = resolve(opts)
    if settings.mode == DISABLED:
        return None
    root = archive_root(opts.dir)
    if settings.mode == OFFLINE:
        return _open_offline(opts, spec, config, environments, root, settings.team_id)
    waited = register_timeout(opts.register_timeout)  # a bad setting raises before a request
    platform = TrainingPlatform(settings)
    try:
        if opts.id:  # attaching sends no request
            registration = platform.attach(opts.id, opts.name)
        else:
            body = _register_body(opts, settings, spec, config, environments)
            attempt = Attempt(lambda: platform.register(body))
            if not attempt.within(waited):
                args = (opts, settings, spec, config, environments)
                return _open_late(*args, platform, attempt, waited)
            registration = attempt.result()
    except BaseException:
        platform.shutdown()
        raise
    description = _describe(opts, spec, config, environments, settings.mode, settings.team_id)
    description["name"] = registration.name
    description["platform"] = {"id": registration.id, "url": registration.url}
    description["attached"] = bool(opts.id)
    archive = online_archive(opts, root, registration.id, description)
    identity = Identity(registration.id, registration.name, settings.mode, registration.url, TRAIN)
    state = RunState(
        identity,
        description=description,
        config=config,
        archive=archive,
        on_error=opts.on_error,
        closer=_closer(platform, registration),
    )
    state.training = TrainingSide(state, platform, archive)
    state.delivery.attach(_sinks(settings, opts, platform, registration.id))
    return state


def _sinks(
    settings: Settings,
    opts: RunOptions,
    platform: TrainingPlatform,
    run_id: str,
) -> list[Sink]:
    """The run's record sinks: Prime Traces, and the per-step sample table (each noting
    its batches in the run's archive, ``Delivery.attach``)."""
    context = upload_context(
        run_type=TRAIN, framework=opts.framework, model=opts.model, resource=opts.resource
    )
    sinks: list[Sink] = [*build_sinks(settings, run_id, context, traces=opts.traces, samples=False)]
    if opts.samples and parquet_available():
        sinks.append(TrainSamplesSink(platform, run_id))
    elif opts.samples:
        logger.info(
            "prime-runs: the training sample table is off: pyarrow is not installed "
            "(pip install 'prime-runs[train]'); episodes reach Prime Traces only"
        )
    return sinks


def _record_sinks(opts: RunOptions, *, offline: bool = False) -> list[str]:
    """The names of the sinks ``_sinks`` gives the run (offline: those sync will use)."""
    names = ["traces"] if opts.traces else []
    if opts.samples and (offline or parquet_available()):
        names.append(SAMPLES_SINK)
    return names


# -- a raw `run` span's training run ---------------------------------------------------


def open_raw_run(opts: RunOptions) -> RunState | None:
    """Open a raw ``run`` span's run without waiting on the network: a training run
    (``prime.run.type = "train"``) or an evaluation; ``None`` when disabled."""
    training = check_kind(opts.kind, opts.training)
    if opts.kind != TRAIN:
        return open_raw(opts)
    return _open_raw_training(opts, training or TrainingSpec())


def _open_raw_training(opts: RunOptions, spec: TrainingSpec) -> RunState | None:
    """As ``open_training``, but registered off the caller's thread (``registering``):
    rows and records logged meanwhile are journaled and held for the sinks."""
    settings, config, environments = resolve(opts)
    if settings.mode != ONLINE or opts.id:  # offline, disabled or attached: no request
        return open_training(opts)
    # What the platform requires is checked now: a span that cannot register is not tracked.
    _register_body(opts, settings, spec, config, environments)
    state, side = _local_state(opts, spec, config, environments, settings)

    def register() -> Registered:
        platform = TrainingPlatform(settings)
        try:
            registration = _create_raw(state, platform, opts, settings, spec, environments)
        except BaseException:
            platform.shutdown()
            raise
        return _registered(state, side, opts, settings, platform, registration)

    begin(state, register, side.went_offline)
    return state


def _local_state(
    opts: RunOptions,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
    settings: Settings,
) -> tuple[RunState, TrainingSide]:
    """An online training run not registered yet: a local id, its journal, and its rows
    and records held for the sinks it will have."""
    local_id = local_run_id()
    description = _describe(opts, spec, config, environments, ONLINE, settings.team_id)
    description["name"] = name = opts.name or f"train-{local_id}"
    archive = online_archive(opts, archive_root(opts.dir), local_id, description)
    state = RunState(
        Identity(local_id, name, ONLINE, None, TRAIN, local=True),
        description=description,
        config=config,
        archive=archive,
        on_error=opts.on_error,
    )
    side = TrainingSide(state, None, archive, expect=True)
    state.training = side
    state.delivery.expect(_record_sinks(opts))
    return state, side


def _open_late(
    opts: RunOptions,
    settings: Settings,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
    platform: TrainingPlatform,
    attempt: Attempt[TrainingRegistration],
    waited: float,
) -> RunState:
    """``init()`` waited ``register_timeout`` for the register request: the run goes on
    locally, and is registered by the request still under way when the platform answers."""
    state, side = _local_state(opts, spec, config, environments, settings)
    note_intent(state, attempt)  # a crash before the answer: sync asks, never resends
    local_id = state.run_id

    def register() -> Registered:
        try:
            registration = landed(state, attempt)
        except BaseException as exc:
            platform.shutdown()
            if isinstance(exc, PrimeRunsError) and not is_ambiguous(exc):
                forget_intent(state)  # certainly not registered: sync may register
            raise
        where = {"id": registration.id, "url": registration.url, "name": registration.name}
        record_platform(state, where)
        say_registered(local_id, registration.id, registration.url)
        return _registered(state, side, opts, settings, platform, registration)

    begin(state, register, side.went_offline)
    warn_late(state, waited)
    return state


def _registered(
    state: RunState,
    side: TrainingSide,
    opts: RunOptions,
    settings: Settings,
    platform: TrainingPlatform,
    registration: TrainingRegistration,
) -> Registered:
    """What a training run registered off its thread is given: identity, sinks, rows."""
    try:
        sinks = _sinks(settings, opts, platform, registration.id)
    except BaseException:
        platform.shutdown()
        raise
    run_id = registration.id
    identity = Identity(run_id, registration.name, ONLINE, registration.url, TRAIN)

    def rows(local_id: str) -> None:
        side.registered(platform, run_id, local_id)

    closer = _closer(platform, registration)
    return Registered(identity, closer, sinks, platform.shutdown, [rows])


def _create_raw(
    state: RunState,
    platform: TrainingPlatform,
    opts: RunOptions,
    settings: Settings,
    spec: TrainingSpec,
    environments: list[Any],
) -> TrainingRegistration:
    """A raw span's training run registered, on ``registering.begin``'s thread."""
    if state.archive is None:  # no journal: nothing to record an intent in
        return _register(platform, opts, settings, spec, state.config, environments)
    # An intent first (register_once): a crash mid-request never registers twice.
    found = register_once.register_training(state.archive, settings, platform)
    run_id = str(found["id"])
    name = found.get("name") or state.identity.name
    return TrainingRegistration(run_id, str(name), platform.url_for(run_id))


def _register(
    platform: TrainingPlatform,
    opts: RunOptions,
    settings: Settings,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
) -> TrainingRegistration:
    if opts.id:
        return platform.attach(opts.id, opts.name)
    return platform.register(_register_body(opts, settings, spec, config, environments))


def _register_body(
    opts: RunOptions,
    settings: Settings,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
) -> dict[str, Any]:
    """The register request as ``init()`` (or a raw span) describes the run; raises
    ``ConfigurationError`` for what the platform requires and is missing."""
    return register_body(
        model=opts.model,
        team_id=settings.team_id,
        spec=spec,
        environments=environments,
        name=opts.name,
        config=config,
    )


def _describe(
    opts: RunOptions,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
    mode: str,
    team_id: str | None,
) -> dict[str, Any]:
    description = describe(opts, config, environments, mode)
    description["kind"] = TRAIN
    description["team_id"] = team_id  # `prime-runs sync` registers an offline run under it
    description["training"] = dataclasses.asdict(spec)
    # An offline run's table is sent by `prime-runs sync`, which may run where pyarrow is.
    description["sinks"] = [*_record_sinks(opts, offline=mode == OFFLINE), SINK_NAME]
    return description


def check_offline(opts: RunOptions, team_id: str | None, run_id: str) -> None:
    """What `prime-runs sync` will need to register an offline run, checked now: no model
    is the ``ConfigurationError`` the run would get online; no team is a warning naming
    where sync takes one from (it may be known only where sync runs)."""
    if not opts.model:
        raise ConfigurationError(NEEDS_MODEL)
    if not team_id:
        logger.warning(
            "prime-runs: offline training run %s has no team, and `prime-runs sync` registers "
            "a training run under one: pass team_id= or set PRIME_TEAM_ID, or give it to sync "
            "(`prime-runs sync --team-id TEAM %s`)",
            run_id,
            run_id,
        )


def _open_offline(
    opts: RunOptions,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
    root: Path,
    team_id: str | None,
) -> RunState:
    run_id = local_run_id()
    check_offline(opts, team_id, run_id)
    description = _describe(opts, spec, config, environments, OFFLINE, team_id)
    description["name"] = name = opts.name or f"train-{run_id}"
    try:
        archive = RunArchive.create(root, run_id, description)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the run archive under {str(root)!r} ({exc.strerror}); pass dir="
        ) from exc
    state = RunState(
        Identity(run_id, name, OFFLINE, None, TRAIN),
        description=description,
        config=config,
        archive=archive,
        on_error=opts.on_error,
    )
    state.training = TrainingSide(state, None, archive)
    return state


def _closer(platform: TrainingPlatform, registration: TrainingRegistration) -> Closer:
    """Delivers the metrics rows left, then finalizes or sets the run's status. Its own
    body, not ``opening.closer``'s: the RFT API takes a training run's rows, not a summary."""

    def close(
        state: RunState,
        status: RunStatus,
        summary: dict[str, Any],
        reason: str | None,
        deadline: float,
    ) -> None:
        side = side_of(state)
        if side is not None:
            # Rows first: the platform closes the run's curves at finalize.
            side.finish(_finishing.send_by(deadline, time.monotonic()) - _finishing.CLOSE_MARGIN)
        state.ensure_whole()  # rows or records still owed: left open for `prime-runs sync`
        platform.close(registration.id, status, reason, deadline)

    return closing(close, platform.shutdown)

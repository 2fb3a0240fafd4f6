"""Opening a training run: register it (or attach with ``id=``), wire its sinks, and the
close-out that finalizes it or sets its status (contract Appendix A)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prime_runs._delivery.provenance import upload_context
from prime_runs._journal.archive import RunArchive
from prime_runs._runs.finishing import CLOSE_MARGIN
from prime_runs._runs.opening import (
    RunOptions,
    archive_root,
    describe,
    local_run_id,
    online_archive,
    resolve,
)
from prime_runs._runs.state import Identity, RunState
from prime_runs._runs.training import TrainingSide, check_kind
from prime_runs.errors import ConfigurationError
from prime_runs.exporters._sinks import build_sinks
from prime_runs.exporters.metrics import SINK_NAME
from prime_runs.exporters.train_samples import SINK_NAME as SAMPLES_SINK
from prime_runs.exporters.train_samples import TrainSamplesSink, parquet_available
from prime_runs.platform.training import (
    TRAIN,
    TrainingPlatform,
    TrainingRegistration,
    TrainingSpec,
    register_body,
)
from prime_runs.settings import DISABLED, OFFLINE, Settings
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")


def open_training(opts: RunOptions) -> RunState | None:
    """Open a training run as ``init()`` asked; ``None`` for a disabled run. Errors of
    registration propagate (contract §12.5): a training loop must not run unregistered."""
    check_kind(opts.kind, opts.training)
    spec = opts.training or TrainingSpec()
    settings, config, environments = resolve(opts)
    if settings.mode == DISABLED:
        return None
    root = archive_root(opts.dir)
    if settings.mode == OFFLINE:
        return _open_offline(opts, spec, config, environments, root, settings.team_id)
    platform = TrainingPlatform(settings)
    try:
        registration = _register(platform, opts, settings, spec, config, environments)
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
    state.training = TrainingSide(state, platform, archive)  # type: ignore[attr-defined]
    context = upload_context(
        run_type=TRAIN, framework=opts.framework, model=opts.model, resource=opts.resource
    )
    sinks = build_sinks(settings, registration.id, context, traces=opts.traces, samples=False)
    if opts.samples and parquet_available():
        sinks.append(TrainSamplesSink(platform, registration.id))
    elif opts.samples:
        logger.info(
            "prime-runs: the training sample table is off: pyarrow is not installed "
            "(pip install 'prime-runs[train]'); episodes reach Prime Traces only"
        )
    state.delivery.attach(sinks)
    return state


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
    body = register_body(
        model=opts.model,
        team_id=settings.team_id,
        spec=spec,
        environments=environments,
        name=opts.name,
        config=config,
    )
    return platform.register(body)


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
    sinks = ["traces"] if opts.traces else []
    # An offline run's table is sent by `prime-runs sync`, which may run where pyarrow is.
    if opts.samples and (mode == OFFLINE or parquet_available()):
        sinks.append(SAMPLES_SINK)
    description["sinks"] = [*sinks, SINK_NAME]
    return description


def _open_offline(
    opts: RunOptions,
    spec: TrainingSpec,
    config: dict[str, Any],
    environments: list[Any],
    root: Path,
    team_id: str | None,
) -> RunState:
    run_id = local_run_id()
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
    state.training = TrainingSide(state, None, archive)  # type: ignore[attr-defined]
    return state


def _closer(
    platform: TrainingPlatform, registration: TrainingRegistration
) -> Callable[[RunState, RunStatus, dict[str, Any], str | None, float], None]:
    """Delivers the metrics rows left, then finalizes or sets the run's status."""

    def close(
        state: RunState,
        status: RunStatus,
        summary: dict[str, Any],
        reason: str | None,
        deadline: float,
    ) -> None:
        try:
            side = getattr(state, "training", None)
            if isinstance(side, TrainingSide):
                # Rows first: the platform closes the run's curves at finalize. Keep part
                # of the budget for the close-out itself.
                left = deadline - time.monotonic()
                side.finish(deadline - min(5.0, max(0.0, left) / 3) - CLOSE_MARGIN)
            platform.close(registration.id, status, reason, deadline)
        finally:
            platform.shutdown()

    return close

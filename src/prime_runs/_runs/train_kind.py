"""A training run's kind (``_runs/opening`` opens it): registered with ``POST
/rft/external-runs`` (or attached to a launcher's with ``id=``), given its metrics side,
the Prime Traces sink and the per-step sample table, and closed with a finalize or a status
``PUT`` (contract Appendix A). Errors of registration propagate (contract §12.5): a
training loop must not run unregistered."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import prime_runs._runs.finishing as _finishing
import prime_runs._runs.register_once as register_once
from prime_runs._delivery.provenance import upload_context
from prime_runs._journal.archive import RunArchive
from prime_runs._records.item import Sink
from prime_runs._runs.options import (
    Resolved,
    closing,
    describe,
    local_run_id,
    offline_archive,
    online_archive,
)
from prime_runs._runs.registering import Registered, forget_intent
from prime_runs._runs.state import Closer, Identity, RunState
from prime_runs._runs.training import TrainingSide, side_of
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
from prime_runs.settings import OFFLINE, ONLINE
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")


@dataclass(repr=False, eq=False)
class TrainKind(Resolved):
    """The ``Kind`` of a training run, for one opening."""

    spec: TrainingSpec = field(default_factory=TrainingSpec)
    _platform: TrainingPlatform | None = field(default=None, init=False)  # connect()'s
    _side: TrainingSide | None = field(default=None, init=False)  # local(), while registering

    @property
    def platform(self) -> TrainingPlatform:
        assert self._platform is not None, "connect() first"
        return self._platform

    @property
    def on_offline(self) -> Callable[[], None] | None:
        return None if self._side is None else self._side.went_offline

    def _state(
        self, identity: Identity, description: dict[str, Any], closer: Closer | None = None
    ) -> RunState:
        run_id = identity.run_id
        if identity.mode == OFFLINE:
            archive: RunArchive | None = offline_archive(self.root, run_id, description)
        else:
            archive = online_archive(self.opts, self.root, run_id, description)
        return RunState(
            identity,
            description=description,
            config=self.config,
            archive=archive,
            on_error=self.opts.on_error,
            closer=closer,
        )

    def offline(self) -> RunState:
        run_id = local_run_id()
        self._check_offline(run_id)
        description = self._describe(OFFLINE)
        description["name"] = name = self.opts.name or f"train-{run_id}"
        state = self._state(Identity(run_id, name, OFFLINE, None, TRAIN), description)
        state.training = TrainingSide(state, None, state.archive)
        return state

    def _check_offline(self, run_id: str) -> None:
        """What `prime-runs sync` will need to register an offline run, checked now: no model
        is the ``ConfigurationError`` the run would get online; no team is a warning naming
        where sync takes one from (it may be known only where sync runs)."""
        if not self.opts.model:
            raise ConfigurationError(NEEDS_MODEL)
        if not self.settings.team_id:
            logger.warning(
                "prime-runs: offline training run %s has no team, and `prime-runs sync` "
                "registers a training run under one: pass team_id= or set PRIME_TEAM_ID, or "
                "give it to sync (`prime-runs sync --team-id TEAM %s`)",
                run_id,
                run_id,
            )

    def check_online(self) -> None:
        if not self.opts.id:
            self._body()  # raises for what the platform requires and is missing

    def connect(self) -> None:
        self._platform = TrainingPlatform(self.settings)

    def release(self) -> None:
        self.platform.shutdown()

    def attach(self) -> TrainingRegistration:
        return self.platform.attach(str(self.opts.id), self.opts.name)

    def request(self) -> Callable[[], TrainingRegistration]:
        body = self._body()
        return lambda: self.platform.register(body)

    def failed(self, exc: BaseException) -> RunState:
        raise exc

    def online(self, registration: TrainingRegistration) -> RunState:
        description = self._describe(self.settings.mode)
        description["name"] = registration.name
        description["platform"] = {"id": registration.id, "url": registration.url}
        description["attached"] = bool(self.opts.id)
        identity = Identity(
            registration.id, registration.name, self.settings.mode, registration.url, TRAIN
        )
        state = self._state(identity, description, self._closer(registration))
        state.training = TrainingSide(state, self.platform, state.archive)
        state.delivery.attach(self._sinks(registration.id))
        return state

    def local(self) -> RunState:
        """An online training run not registered yet: a local id, its journal, and its rows
        and records held for the sinks it will have."""
        local_id = local_run_id()
        description = self._describe(ONLINE)
        description["name"] = name = self.opts.name or f"train-{local_id}"
        state = self._state(Identity(local_id, name, ONLINE, None, TRAIN, local=True), description)
        self._side = state.training = TrainingSide(state, None, state.archive, expect=True)
        state.delivery.expect(self._record_sinks())
        return state

    def registered(self, state: RunState, registration: TrainingRegistration) -> Registered:
        """What a training run registered off its thread is given: identity, sinks, rows."""
        side = self._side
        assert side is not None, "local() first"
        platform = self.platform
        try:
            sinks = self._sinks(registration.id)
        except BaseException:
            platform.shutdown()
            raise
        run_id = registration.id
        identity = Identity(run_id, registration.name, ONLINE, registration.url, TRAIN)

        def rows(local_id: str) -> None:
            side.registered(platform, run_id, local_id)

        closer = self._closer(registration)
        return Registered(identity, closer, sinks, platform.shutdown, [rows])

    def not_registered(self, state: RunState, exc: BaseException) -> None:
        if isinstance(exc, PrimeRunsError) and not is_ambiguous(exc):
            forget_intent(state)  # certainly not registered: sync may register

    def create(self, state: RunState) -> TrainingRegistration:
        """A raw span's training run, on ``registering.begin``'s thread."""
        if state.archive is None:  # no journal: nothing to record an intent in
            return self.platform.register(self._body())
        # An intent first (register_once): a crash mid-request never registers twice.
        found = register_once.register_training(state.archive, self.settings, self.platform)
        run_id = str(found["id"])
        name = found.get("name") or state.identity.name
        return TrainingRegistration(run_id, str(name), self.platform.url_for(run_id))

    def _sinks(self, run_id: str) -> list[Sink]:
        """The run's record sinks: Prime Traces, and the per-step sample table (each noting
        its batches in the run's archive, ``Delivery.attach``)."""
        opts = self.opts
        context = upload_context(
            run_type=TRAIN, framework=opts.framework, model=opts.model, resource=opts.resource
        )
        sinks: list[Sink] = [
            *build_sinks(self.settings, run_id, context, traces=opts.traces, samples=False)
        ]
        if opts.samples and parquet_available():
            sinks.append(TrainSamplesSink(self.platform, run_id))
        elif opts.samples:
            logger.info(
                "prime-runs: the training sample table is off: pyarrow is not installed "
                "(pip install 'prime-runs[train]'); episodes reach Prime Traces only"
            )
        return sinks

    def _record_sinks(self, *, offline: bool = False) -> list[str]:
        """The names of the sinks ``_sinks`` gives the run (offline: those sync will use)."""
        names = ["traces"] if self.opts.traces else []
        if self.opts.samples and (offline or parquet_available()):
            names.append(SAMPLES_SINK)
        return names

    def _body(self) -> dict[str, Any]:
        """The register request as ``init()`` (or a raw span) describes the run; raises
        ``ConfigurationError`` for what the platform requires and is missing."""
        return register_body(
            model=self.opts.model,
            team_id=self.settings.team_id,
            spec=self.spec,
            environments=self.environments,
            name=self.opts.name,
            config=self.config,
        )

    def _describe(self, mode: str) -> dict[str, Any]:
        description = describe(self.opts, self.config, self.environments, mode)
        description["kind"] = TRAIN
        description["team_id"] = self.settings.team_id  # sync registers an offline run under it
        description["training"] = dataclasses.asdict(self.spec)
        # An offline run's table is sent by `prime-runs sync`, which may run where pyarrow is.
        description["sinks"] = [*self._record_sinks(offline=mode == OFFLINE), SINK_NAME]
        return description

    def _closer(self, registration: TrainingRegistration) -> Closer:
        """Delivers the metrics rows left, then finalizes or sets the run's status. Its own
        body, not the evaluation's: the RFT API takes a training run's rows, not a summary."""
        platform = self.platform

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
                budget = _finishing.send_by(deadline, time.monotonic()) - _finishing.CLOSE_MARGIN
                side.finish(budget)
            state.ensure_whole()  # rows or records still owed: left open for `prime-runs sync`
            platform.close(registration.id, status, reason, deadline)

        return closing(close, platform.shutdown)

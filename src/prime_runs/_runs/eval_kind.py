"""An evaluation run's kind (``_runs/opening`` opens it): created with ``POST
/evaluations`` (or attached to a launcher's with ``id=``), given the Prime Traces and v0
sample sinks, and closed with a finalize or a terminal status. A registration the platform
refuses leaves the run offline, for ``prime-runs sync``, unless ``on_error="raise"``."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import prime_runs._runs.coverage as _coverage
import prime_runs._runs.register_once as register_once
from prime_runs._delivery.provenance import upload_context
from prime_runs._runs.accounting import RAISE
from prime_runs._runs.options import (
    Resolved,
    RunOptions,
    closing,
    describe,
    environments_hint,
    local_run_id,
    offline_archive,
    online_archive,
)
from prime_runs._runs.registering import Registered
from prime_runs._runs.state import Closer, Identity, RunState
from prime_runs.errors import ConfigurationError, EnvironmentResolutionError, PrimeRunsError
from prime_runs.exporters._sinks import build_sinks
from prime_runs.platform.environments import dataset_name
from prime_runs.platform.evaluations import default_name
from prime_runs.platform.lifecycle import OnlineLifecycle, Registration, RunDescription
from prime_runs.settings import OFFLINE, ONLINE, Settings
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")

SINK_NAMES = (("traces", "traces"), ("eval_samples", "samples"))


class EvalKind(Resolved):
    """The ``Kind`` of an evaluation run, for one opening."""

    on_offline: Callable[[], None] | None = None
    _lifecycle: OnlineLifecycle | None = None  # connect() makes it

    @property
    def lifecycle(self) -> OnlineLifecycle:
        assert self._lifecycle is not None, "connect() first"
        return self._lifecycle

    @functools.cached_property
    def name(self) -> str:
        """The run's name, drawn once (a default one is random): the local archive, the
        create and a late registration's look-up all use the same."""
        default = default_name(dataset_name(self.environments), self.opts.framework)
        return self.opts.name or default

    def offline(self, reason: str | None = None) -> RunState:
        opts = self.opts
        run_id = local_run_id()
        description = describe(opts, self.config, self.environments, OFFLINE)
        description["name"] = name = self.name
        if reason:
            description["offline_because"] = reason
        archive = offline_archive(self.root, run_id, description)
        if not self.environments:  # the platform registers an eval only under an environment
            logger.warning(
                "prime-runs: offline run %s names no environment, which the platform needs "
                "to register it: %s, or upload it later with `prime-runs sync --environment "
                "NAME %s`",
                run_id,
                environments_hint(opts),
                run_id,
            )
        return RunState(
            Identity(run_id, name, OFFLINE),
            description=description,
            config=self.config,
            archive=archive,
            on_error=opts.on_error,
        )

    def check_online(self) -> None:
        if not self.environments and not self.opts.id:
            raise ConfigurationError(
                "an online eval run needs at least one environment: " + environments_hint(self.opts)
            )

    def connect(self) -> None:
        self._lifecycle = OnlineLifecycle(self.settings)

    def release(self) -> None:
        self.lifecycle.shutdown()

    def attach(self) -> Registration:
        return self.lifecycle.attach(str(self.opts.id))

    def request(self) -> Callable[[], Registration]:
        return lambda: self._register(self.lifecycle)

    def _register(self, lifecycle: OnlineLifecycle) -> Registration:
        """Create the run's evaluation as ``opts`` describes it (``init()`` and raw spans)."""
        opts = self.opts
        return lifecycle.register(
            RunDescription(
                name=self.name,
                environments=self.environments,
                model=opts.model,
                framework=opts.framework,
                description=opts.description,
                tags=list(opts.tags),
                team_id=opts.team_id,
                config=self.config,
            )
        )

    def failed(self, exc: BaseException) -> RunState:
        """A create the platform refused: the run goes on offline, unless the caller asked
        to be told (``on_error="raise"``) or the error is the caller's to mend."""
        mine = isinstance(exc, (ConfigurationError, EnvironmentResolutionError))
        if mine or not isinstance(exc, PrimeRunsError) or self.opts.on_error == RAISE:
            raise exc
        reason = f"{type(exc).__name__}: {exc}"
        logger.warning(
            "prime-runs: could not register the run on the platform (%s); it runs offline "
            "instead and `prime-runs sync` can upload it later",
            reason,
        )
        return self.offline(reason)

    def online(self, registration: Registration) -> RunState:
        opts = self.opts
        attached = bool(opts.id)
        description = describe(opts, self.config, self.environments, ONLINE)
        description["name"] = registration.name
        description["platform"] = {"id": registration.id, "url": registration.url}
        description["attached"] = attached
        state = RunState(
            Identity(registration.id, registration.name, ONLINE, url=registration.url),
            description=description,
            config=self.config,
            archive=online_archive(opts, self.root, registration.id, description),
            on_error=opts.on_error,
            closer=closer(self.lifecycle, registration, self.config, attached),
        )
        wire_sinks(state, self.settings, registration, opts, context=upload_context_of(opts))
        return state

    def local(self) -> RunState:
        opts = self.opts
        local_id = local_run_id()
        description = describe(opts, self.config, self.environments, ONLINE)
        description["name"] = self.name
        state = RunState(
            Identity(local_id, description["name"], ONLINE, local=True),
            description=description,
            config=self.config,
            archive=online_archive(opts, self.root, local_id, description),
            on_error=opts.on_error,
        )
        state.delivery.expect([name for name, flag in SINK_NAMES if getattr(opts, flag)])
        return state

    def registered(self, state: RunState, registration: Registration) -> Registered:
        """What a run registered off its thread is given: its identity, sinks and close-out."""
        identity = Identity(registration.id, registration.name, ONLINE, url=registration.url)
        opts = self.opts
        sinks = build_sinks(
            self.settings,
            registration.id,
            upload_context_of(opts),
            traces=opts.traces,
            samples=opts.samples,
        )
        close = closer(self.lifecycle, registration, state.config, attached=False)
        return Registered(identity, close, sinks, self.lifecycle.shutdown)

    def not_registered(self, state: RunState, exc: BaseException) -> None:
        """Nothing to undo: a later sync looks the evaluation up by its intent and name."""

    def create(self, state: RunState) -> Registration:
        """A raw span's evaluation, on ``registering.begin``'s thread."""
        if state.archive is None:
            return self._register(self.lifecycle)
        # An intent first (see register_once): a crash mid-create is reconciled by sync.
        client = self.lifecycle.client
        found = register_once.register_evaluation(
            state.archive, self.settings, client, claimed=set()
        )
        url = found.get("url")
        return Registration(str(found["id"]), self.name, url if isinstance(url, str) else None)


def closer(
    lifecycle: OnlineLifecycle, registration: Registration, config: dict[str, Any], attached: bool
) -> Closer:
    """Closes the evaluation on the platform (finalize, or a terminal status)."""

    def close(
        state: RunState,
        status: RunStatus,
        summary: dict[str, Any],
        reason: str | None,
        deadline: float,
    ) -> None:
        state.ensure_whole()  # records still owed: left open for `prime-runs sync`
        # Workers on other disks: the summary merges what the platform stored.
        summary = _coverage.closing_summary(
            state, lifecycle.client, registration.id, summary, deadline
        )
        lifecycle.close(
            registration,
            status=status,
            summary=summary,
            reason=reason,
            config=config,
            attached=attached,
            deadline=deadline,
        )

    return closing(close, lifecycle.shutdown)


def upload_context_of(opts: RunOptions) -> dict[str, str]:
    return upload_context(
        run_type="eval", framework=opts.framework, model=opts.model, resource=opts.resource
    )


def wire_sinks(
    state: RunState,
    settings: Settings,
    registration: Registration,
    opts: RunOptions | None,
    *,
    context: Mapping[str, str],
) -> None:
    """Attach the online sinks (Prime Traces, v0 samples) to a run."""
    assert settings.api_key is not None
    sinks = build_sinks(
        settings,
        registration.id,
        context,
        traces=opts is None or opts.traces,
        samples=opts is None or opts.samples,
    )
    state.delivery.attach(sinks)

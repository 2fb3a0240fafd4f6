"""An online eval run's lifecycle on the platform: register (resolve environments, then
create the evaluation), attach to one a launcher created, and close it out.

Functions raise typed errors from :mod:`prime_runs.errors`; whether a failure is a
warning or an exception for the producer is the caller's decision.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import prime_runs.platform.evaluations as evaluations
from prime_runs.errors import PrimeRunsError
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.environments import dataset_name, resolve_environments
from prime_runs.settings import Settings
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")


@dataclass(frozen=True)
class RunDescription:
    """What a run is, as the producer described it. ``config`` is the captured config
    (see :func:`prime_runs._runs.config.capture_config`)."""

    name: str | None
    environments: Sequence[object]
    model: str | None
    framework: str | None
    description: str | None
    tags: Sequence[str] = field(default_factory=list)
    team_id: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Registration:
    """The platform's evaluation for a run: its id (the run id), name and dashboard URL."""

    id: str
    name: str
    url: str | None


def clean_summary(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy without non-finite floats, or integers too large for a float (``10**400``),
    at any depth (lists included); a nested mapping emptied by the cleaning is dropped.
    The caller's object is not modified."""
    cleaned = _clean(dict(summary or {}))
    return cleaned if isinstance(cleaned, dict) else {}


_DROP = object()
_FLOAT_MAX = int(sys.float_info.max)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return _DROP
    if isinstance(value, int) and abs(value) > _FLOAT_MAX:
        return _DROP  # the platform stores metrics as floats: this one has no value there
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            item = _clean(item)
            if item is not _DROP:
                out[key] = item
        return _DROP if value and not out else out
    if isinstance(value, (list, tuple)):
        return [item for item in map(_clean, value) if item is not _DROP]
    return value


class OnlineLifecycle:
    """Registers and closes eval runs on the platform API. Owns its client unless given one."""

    def __init__(self, settings: Settings, *, client: PlatformClient | None = None) -> None:
        self.settings = settings
        self._owns_client = client is None
        self.client = client if client is not None else PlatformClient(settings)

    def register(self, desc: RunDescription, *, deadline: float | None = None) -> Registration:
        """Resolve the environments, then create the evaluation. Nothing is created when an
        environment does not resolve. On failure the client is released and the error
        (``ConfigurationError``, ``EnvironmentResolutionError``, ``APIError``) propagates."""
        try:
            team_id = desc.team_id or self.settings.team_id
            environments = resolve_environments(
                self.client, desc.environments, team_id, deadline=deadline
            )
            created = evaluations.create(
                self.client,
                name=desc.name,
                environments=environments,
                model=desc.model,
                framework=desc.framework,
                description=desc.description,
                tags=list(desc.tags),
                team_id=team_id,
                metadata=desc.config,
                dataset=dataset_name(desc.environments),
                deadline=deadline,
            )
        except BaseException:
            self.shutdown()
            raise
        return Registration(id=created.id, name=created.name, url=created.url)

    def attach(self, eval_id: str) -> Registration:
        """An evaluation a launcher created (contract §4.5): no request; the first write
        proves access. The name is not known without a request, so it is the id."""
        if not isinstance(eval_id, str) or not eval_id.strip():
            raise ValueError("attach needs a non-empty evaluation id")
        eval_id = eval_id.strip()
        return Registration(id=eval_id, name=eval_id, url=self.settings.evaluation_url(eval_id))

    def close(
        self,
        registration: Registration,
        *,
        status: RunStatus,
        summary: Mapping[str, Any] | None,
        reason: str | None,
        config: Mapping[str, Any] | None,
        attached: bool,
        deadline: float | None = None,
    ) -> None:
        """Store the config and summary, then finalize (completed) or close out (contract
        §4.7 steps 4-5). An attached run sends only its summary, and nothing but that
        when it did not complete. The closing step runs even when the store fails; the
        first error is raised at the end."""
        status = RunStatus.coerce(status)
        if not status.terminal:
            raise ValueError("close needs a terminal status, not 'running'")
        eval_id = registration.id
        metrics = clean_summary(summary)
        metadata = None if attached else dict(config or {})

        if status is not RunStatus.COMPLETED and not attached:
            # close_out stores config and summary itself, before the status write.
            evaluations.close_out(
                self.client,
                eval_id,
                status,
                reason,
                config=metadata,
                summary=metrics,
                deadline=deadline,
            )
            return

        first: PrimeRunsError | None = None
        try:
            evaluations.update(
                self.client, eval_id, metadata=metadata, metrics=metrics, deadline=deadline
            )
        except PrimeRunsError as exc:
            first = exc
            logger.warning("run %s: storing the summary failed (%s)", eval_id, exc)
        if status is RunStatus.COMPLETED:
            evaluations.finalize(self.client, eval_id, metrics, deadline=deadline)
        else:
            logger.info(
                "run %s is %s; it was attached to, so its launcher marks it from the process exit",
                eval_id,
                status.value,
            )
        if first is not None:
            raise first

    def shutdown(self) -> None:
        """Release the HTTP client if this lifecycle opened it."""
        if self._owns_client:
            self.client.close()


__all__ = ["OnlineLifecycle", "Registration", "RunDescription", "clean_summary"]

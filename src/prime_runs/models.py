"""0.1.4's module path for the public types: ``from prime_runs.models import RunStatus``
keeps working. The objects are the ones ``prime_runs`` exports; 0.1.4's internal
``RunSpec``/``RunHandle`` have no counterpart here."""

from __future__ import annotations

from prime_runs._runs.config import CONFIG_SOURCE_KEY, MAX_CONFIG_SOURCE_BYTES, ConfigSource
from prime_runs.platform.environments import EnvironmentRef
from prime_runs.platform.training import RunKind, TrainingSpec
from prime_runs.status import RunStatus

__all__ = [
    "CONFIG_SOURCE_KEY",
    "MAX_CONFIG_SOURCE_BYTES",
    "ConfigSource",
    "EnvironmentRef",
    "RunKind",
    "RunStatus",
    "TrainingSpec",
]

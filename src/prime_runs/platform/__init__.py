"""The Prime platform API: HTTP client, environment resolution, evaluation lifecycle and
the legacy sample table. Internal to prime-runs; the public names are re-exported from
``prime_runs`` where producers need them (``EnvironmentRef``)."""

from __future__ import annotations

from prime_runs.platform._http import PlatformClient
from prime_runs.platform.environments import EnvironmentRef, dataset_name, resolve_environments
from prime_runs.platform.lifecycle import OnlineLifecycle, Registration, RunDescription
from prime_runs.platform.samples import AppendResult, SampleWriter

__all__ = [
    "AppendResult",
    "EnvironmentRef",
    "OnlineLifecycle",
    "PlatformClient",
    "Registration",
    "RunDescription",
    "SampleWriter",
    "dataset_name",
    "resolve_environments",
]

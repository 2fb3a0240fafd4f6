"""Registering a training run from its archive exactly once (contract Appendix A).

``prime-runs sync`` registers an offline training run this way, and so does a raw ``run``
span's training run, off the thread that started it (``_runs/registering``). Register is
never replayed: an intent goes to sync.json before the request. The RFT API lists no runs
to look an earlier attempt up in, so an attempt that finds an intent but no id does not
register again when the earlier request may have landed (it failed ambiguously, or its
process was killed): it stops and says how to go on. A request that certainly did not land
clears the intent.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from prime_runs._journal.archive import RunArchive
from prime_runs.errors import PrimeRunsError, SyncError, describe
from prime_runs.platform._http import is_ambiguous
from prime_runs.platform.environments import coerce_environments
from prime_runs.platform.training import (
    NEEDS_MODEL,
    TrainingPlatform,
    TrainingSpec,
    register_body,
)
from prime_runs.settings import Settings


def register(archive: RunArchive, settings: Settings, platform: TrainingPlatform) -> dict[str, Any]:
    """The run's ``{"id", "url", "name"}``, registering it; stored in sync.json and
    run.json. Raises ``SyncError``."""
    desc = archive.description()
    sync = archive.sync_state()
    if isinstance(sync.get("intent"), dict):
        # The RFT API cannot answer "did it land?": registering takes no id or key of ours,
        # and there is no list or lookup of runs (contract Appendix A). Only the user can.
        raise SyncError(
            f"an earlier sync may have registered this run (at {sync['intent'].get('at')}) "
            "and the platform's training API cannot look a run up: if the dashboard shows "
            f"a training run named {str(desc.get('name') or '')!r} created then, add "
            '"platform": {"id": "<its id>"} to sync.json; if not, remove "intent" from '
            "sync.json; then sync again"
        )
    body = _register_body(desc, settings, archive.run_id)
    sync["intent"] = {"at": datetime.now(timezone.utc).isoformat()}
    archive.write_sync_state(sync)  # before the request: a rerun knows it may have landed
    try:
        registration = platform.register(body)
    except (PrimeRunsError, ValueError) as exc:
        if not (isinstance(exc, PrimeRunsError) and is_ambiguous(exc)):
            sync.pop("intent", None)  # certainly not created: a rerun may register
            archive.write_sync_state(sync)
        raise SyncError(f"could not register the run: {describe(exc)}") from exc
    where = {"id": registration.id, "url": registration.url, "name": registration.name}
    sync["platform"] = where
    sync.pop("intent", None)
    archive.write_sync_state(sync)
    archive.write_description(dict(desc, platform=where))
    return where


def fill_in(
    archive: RunArchive,
    *,
    model: str | None = None,
    team_id: str | None = None,
    environments: Sequence[str] = (),
) -> list[str]:
    """Give a training run not registered yet what ``prime-runs sync --model/--team-id/
    --environment`` supplies, where its run.json has none (a value it has is kept), so
    this sync and any rerun register it with them. The fields written."""
    desc = archive.description()
    if desc.get("kind") != "train" or _registered(archive, desc):
        return []
    given: dict[str, Any] = {}
    if model and not desc.get("model"):
        given["model"] = model
    if team_id and not desc.get("team_id"):
        given["team_id"] = team_id
    if environments and not (desc.get("environment_refs") or desc.get("environments")):
        refs = coerce_environments(list(environments))  # ConfigurationError for a bad one
        given["environments"] = [ref.label for ref in refs]
        given["environment_refs"] = [dataclasses.asdict(ref) for ref in refs]
    if given:
        archive.write_description(dict(desc, **given))
    return sorted(given)


def _registered(archive: RunArchive, desc: dict[str, Any]) -> bool:
    for doc in (archive.sync_state(), desc):
        where = doc.get("platform")
        if isinstance(where, dict) and where.get("id"):
            return True
    return desc.get("mode") == "online"  # an online run's folder is its platform id's


def _register_body(desc: dict[str, Any], settings: Settings, run_id: str) -> dict[str, Any]:
    if not desc.get("model"):
        raise SyncError(
            f"run.json cannot register this training run: {NEEDS_MODEL}; give it to sync: "
            f"`prime-runs sync --model MODEL {run_id}`"
        )
    if not (desc.get("team_id") or settings.team_id):
        raise SyncError(
            f"run.json cannot register this training run: it names no team, and the platform "
            "registers a training run only under one: give it to sync (`prime-runs sync "
            f"--team-id TEAM {run_id}`) or set PRIME_TEAM_ID"
        )
    spec = desc.get("training")
    fields = TrainingSpec.__dataclass_fields__
    try:
        training = TrainingSpec(
            **{k: v for k, v in (spec if isinstance(spec, dict) else {}).items() if k in fields}
        )
        refs = desc.get("environment_refs") or []
        envs = [
            types.SimpleNamespace(**{k: r.get(k) for k in ("name", "slug", "id", "version_id")})
            for r in refs
            if isinstance(r, dict)
        ]
        config = desc.get("config")
        # From run.json, not init()'s arguments (training_open): this run was opened earlier.
        return register_body(
            model=desc.get("model"),
            team_id=desc.get("team_id") or settings.team_id,
            spec=training,
            environments=envs,
            name=desc.get("name"),
            config=dict(config) if isinstance(config, dict) else {},
        )
    except PrimeRunsError as exc:
        raise SyncError(f"run.json cannot register this training run: {exc}") from exc

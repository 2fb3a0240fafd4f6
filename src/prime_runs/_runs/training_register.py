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

import types
from datetime import datetime, timezone
from typing import Any

from prime_runs._journal.archive import RunArchive
from prime_runs.errors import PrimeRunsError, SyncError, describe
from prime_runs.platform._http import is_ambiguous
from prime_runs.platform.training import TrainingPlatform, TrainingSpec, register_body
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
    body = _register_body(desc, settings)
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


def _register_body(desc: dict[str, Any], settings: Settings) -> dict[str, Any]:
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

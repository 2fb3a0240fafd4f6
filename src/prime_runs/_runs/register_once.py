"""Registering an offline run exactly once, an evaluation or a training run, even across
interrupted syncs.

Neither create is idempotent on the platform. Before it is sent, an intent with its time is
written to sync.json; what a later attempt that finds the intent but no id does depends on
what the platform lets it look up:

- An evaluation (``register_evaluation``): it reads the recent evaluations back and adopts one
  created since the intent with the same name, model, framework and config (the oldest
  such, never one another local run already holds). Only when none exists is the create
  sent again. Within one call, ``evaluations.create`` already reconciles an ambiguous
  failure the same way.
- A training run (``register_training``, contract Appendix A): the RFT API lists no runs
  to look an earlier attempt up in, so it does not register again when the earlier request
  may have landed (it failed ambiguously, or its process was killed): it stops and says
  how to go on. A request that certainly did not land clears the intent.

``prime-runs sync`` registers offline runs this way, and so does a raw ``run`` span's run,
off the thread that started it (``_runs/registering``).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from prime_runs._journal.archive import RunArchive
from prime_runs._runid import is_run_id
from prime_runs.errors import PrimeRunsError, SyncError, describe
from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient, is_ambiguous
from prime_runs.platform.environments import coerce_environments
from prime_runs.platform.lifecycle import OnlineLifecycle, RunDescription
from prime_runs.platform.training import (
    NEEDS_MODEL,
    TrainingPlatform,
    TrainingSpec,
    register_body,
)
from prime_runs.settings import Settings

# -- an evaluation -----------------------------------------------------------------


def register_evaluation(
    archive: RunArchive, settings: Settings, client: PlatformClient, *, claimed: set[str]
) -> dict[str, Any]:
    """The run's ``{"id", "url"}`` on the platform, creating the evaluation if no earlier
    attempt landed; stored in sync.json and run.json. Raises ``SyncError``."""
    description = archive.description()
    sync = archive.sync_state()
    intent = sync.get("intent")
    if isinstance(intent, dict):
        found = _reconcile(client, description, settings, intent, claimed)
        if found is not None:
            return _store(archive, sync, found)
    sync["intent"] = {"at": datetime.now(timezone.utc).isoformat()}
    archive.write_sync_state(sync)  # before the create: a rerun looks for what it made
    environments = description.get("environment_refs") or description.get("environments") or []
    if not isinstance(environments, list):
        raise SyncError(
            f"run.json: environments must be a list of names, not {environments!r}; fix it or "
            "pass `prime-runs sync --environment NAME RUN`"
        )
    tags = description.get("tags")
    try:
        registration = OnlineLifecycle(settings, client=client).register(
            RunDescription(
                name=description.get("name"),
                environments=list(environments),
                model=description.get("model"),
                framework=description.get("framework"),
                description=description.get("description"),
                tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
                config=_config(description),
            )
        )
    except (PrimeRunsError, ValueError) as exc:
        raise SyncError(f"could not register the run: {type(exc).__name__}: {exc}") from exc
    return _store(
        archive, sync, {"id": registration.id, "url": registration.url, "name": registration.name}
    )


def _config(description: dict[str, Any]) -> dict[str, Any]:
    config = description.get("config")
    return dict(config) if isinstance(config, dict) else {}


def _create_body(description: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The fields of the create request that a listing can be matched on."""
    body: dict[str, Any] = {"name": description.get("name"), "metadata": _config(description)}
    if description.get("model"):
        body["model_name"] = description["model"]
    if description.get("framework"):
        body["framework"] = description["framework"]
    if settings.team_id:
        body["team_id"] = settings.team_id
    return body


def _reconcile(
    client: PlatformClient,
    description: dict[str, Any],
    settings: Settings,
    intent: dict[str, Any],
    claimed: set[str],
) -> dict[str, Any] | None:
    """The evaluation an interrupted sync created, if it landed."""
    since = evaluations.parse_time(intent.get("at"))
    if since is None:
        return None
    body = _create_body(description, settings)
    params: dict[str, Any] = {"limit": evaluations.RECONCILE_LIST_LIMIT}
    if body.get("team_id"):
        params["team_id"] = body["team_id"]
    try:
        listing = client.request("GET", "/evaluations/", params=params, idempotent=True)
    except PrimeRunsError as exc:
        # Creating again could duplicate the evaluation: stop until it can be read back.
        raise SyncError(
            f"could not check for an earlier registration: {type(exc).__name__}: {exc}"
        ) from exc
    items = listing.get("evaluations", listing.get("data", []))
    matches = [
        item
        for item in items
        if isinstance(item, dict)
        and evaluations.matches_request(item, body, since)
        and _eval_id(item) not in (None, *claimed)
    ]
    if not matches:
        return None
    # The oldest match after the intent is ours; a later one is another run's.
    first = min(matches, key=lambda item: evaluations.parse_time(_created(item)) or since)
    eval_id = str(_eval_id(first))
    url = first.get("viewer_url") or first.get("viewerUrl")
    return {
        "id": eval_id,
        "url": url if isinstance(url, str) and url else settings.evaluation_url(eval_id),
        "name": first.get("name"),
    }


def _store(archive: RunArchive, sync: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    platform = {"id": found["id"], "url": found.get("url")}
    sync["platform"] = {**platform, "name": found.get("name")}
    archive.write_sync_state(sync)
    description = archive.description()
    description["platform"] = platform
    archive.write_description(description)
    return platform


def _eval_id(item: dict[str, Any]) -> str | None:
    """The listed evaluation's id; None when it has none that could be a run id (such an
    entry is never adopted: its id would name the folder and the request paths)."""
    value = item.get("evaluation_id") or item.get("id")
    return value if is_run_id(value) else None


def _created(item: dict[str, Any]) -> Any:
    return item.get("created_at", item.get("createdAt"))


# -- a training run ---------------------------------------------------------------


def register_training(
    archive: RunArchive, settings: Settings, platform: TrainingPlatform
) -> dict[str, Any]:
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
        # From run.json, not init()'s arguments (train_kind): this run was opened earlier.
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

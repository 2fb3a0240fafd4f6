"""Registering an offline run's evaluation exactly once, even across interrupted syncs.

Create is not idempotent on the platform. Before it is sent, an intent with its time is
written to sync.json; a later sync that finds the intent but no id reads the recent
evaluations back and adopts one created since the intent with the same name, model,
framework and config (the oldest such, never one another local run already holds). Only
when none exists is the create sent again. Within one call, ``evaluations.create``
already reconciles an ambiguous failure the same way.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from prime_runs._journal.archive import RunArchive
from prime_runs._runid import is_run_id
from prime_runs.errors import PrimeRunsError, SyncError
from prime_runs.platform import evaluations
from prime_runs.platform._http import PlatformClient
from prime_runs.platform.lifecycle import OnlineLifecycle, RunDescription
from prime_runs.settings import Settings


def register(
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

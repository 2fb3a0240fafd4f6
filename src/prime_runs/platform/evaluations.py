"""The evaluation lifecycle on the platform API (contract §4, design §4.2-4.3).

Calls that must never run twice on the server (create, finalize) are not replayed
after an ambiguous failure; they read the evaluation back and resend only when the
first attempt evidently did not land. Closing a run that did not complete works on
both platform variants: a status ``PUT`` where the platform has one (N), otherwise a
``metadata.prime_runs`` marker merged into the full config (S).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, cast

from prime_runs._runid import is_run_id, shown
from prime_runs.errors import APIError, ConflictError, PrimeRunsError
from prime_runs.platform._http import is_ambiguous
from prime_runs.status import RunStatus

if TYPE_CHECKING:
    from prime_runs.platform._http import PlatformClient

logger = logging.getLogger("prime_runs")

ERROR_MESSAGE_MAX = 4096
OPEN_STATUSES = frozenset({"PENDING", "RUNNING"})
MARKER_KEY = "prime_runs"
RECONCILE_LIST_LIMIT = 50
# Allowance for clock skew between us and the platform when matching "created after
# our request started"; kept short so an older run of the same config is not adopted.
RECONCILE_SKEW = timedelta(seconds=60)
_VARIANT_S_CAPABILITY_MISSING = frozenset({404, 405, 422})
_PLATFORM_STATUS = {
    RunStatus.FAILED: "FAILED",
    RunStatus.CANCELLED: "CANCELLED",
    RunStatus.CRASHED: "FAILED",
}

# Platforms (by API root) seen to lack the status write; remembered for the process.
_variant_s: set[str] = set()


@dataclass(frozen=True)
class Created:
    """A created evaluation: its id (the run id everywhere), display name and page URL."""

    id: str
    name: str
    url: str | None


def default_name(dataset: str | None, framework: str | None) -> str:
    """``<stem>-<8 hex>``: stem is the first environment's name, else the framework, else eval."""
    return f"{dataset or framework or 'eval'}-{uuid.uuid4().hex[:8]}"


def _path(eval_id: str) -> str:
    return f"/evaluations/{eval_id}"


def create(
    client: PlatformClient,
    *,
    name: str | None,
    environments: Sequence[Mapping[str, Any]],
    model: str | None,
    framework: str | None,
    description: str | None,
    tags: Sequence[str] | None,
    team_id: str | None,
    metadata: Mapping[str, Any] | None,
    dataset: str | None = None,
    deadline: float | None = None,
) -> Created:
    """``POST /evaluations/`` (contract §4.1). ``environments`` is the resolved list.

    Never replayed blindly: after an ambiguous failure the recent evaluations are read
    back, and one created since this call started with the same name, model, framework
    and metadata is adopted; only when none is found is the create sent once more.
    """
    sent_name = name or default_name(dataset, framework)
    body: dict[str, Any] = {
        "name": sent_name,
        "environments": [dict(e) for e in environments],
        "tags": list(tags or []),
    }
    optional = {
        "model_name": model,
        "dataset": dataset,
        "framework": framework,
        "description": description,
        "metadata": dict(metadata) if metadata else None,
        "team_id": team_id or None,
    }
    body.update({k: v for k, v in optional.items() if v is not None})

    response = _post_once(client, body, deadline)
    eval_id = response.get("evaluation_id") or response.get("id")
    if not is_run_id(eval_id):  # it names the run's folder and every later request path
        got = f"{shown(eval_id)}, not a run id," if eval_id else "no evaluation_id"
        raise APIError(
            f"POST /api/v1/evaluations/ returned {got} (keys: {sorted(response)})",
            method="POST",
            path="/evaluations/",
        )
    named = response.get("name")
    url = response.get("viewer_url") or response.get("viewerUrl")
    return Created(
        id=eval_id,
        name=named if isinstance(named, str) and named else sent_name,
        url=url if isinstance(url, str) and url else client.settings.evaluation_url(eval_id),
    )


def _post_once(
    client: PlatformClient, body: dict[str, Any], deadline: float | None
) -> dict[str, Any]:
    """The create request, sent again only when a read-back shows it did not land."""
    started = datetime.now(timezone.utc)
    for attempt in range(2):
        try:
            return client.request(
                "POST", "/evaluations/", json=body, idempotent=False, deadline=deadline
            )
        except APIError as error:
            if not is_ambiguous(error):
                raise
            logger.info(
                "create evaluation %r: %s; reading back before resending", body["name"], error
            )
            try:
                found = _find_created(client, body, started, deadline)
            except APIError:
                raise error from None  # cannot tell whether it landed: never risk a duplicate
            if found is not None:
                return found
            if attempt == 1:
                raise
    raise AssertionError("unreachable")  # the second attempt returns or raises


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _field(item: Mapping[str, Any], *keys: str) -> tuple[bool, Any]:
    for key in keys:
        if key in item:
            return True, item[key]
    return False, None


def _created(item: Mapping[str, Any]) -> datetime | None:
    return parse_time(_field(item, "created_at", "createdAt")[1])


def matches_request(item: Mapping[str, Any], body: Mapping[str, Any], since: datetime) -> bool:
    created = _created(item)
    if created is None or created < since - RECONCILE_SKEW:
        return False
    checks = (
        (("name",), body.get("name")),
        (("model_name", "modelName"), body.get("model_name")),
        (("framework",), body.get("framework")),
        (("metadata",), body.get("metadata") or {}),
    )
    for keys, expected in checks:
        present, value = _field(item, *keys)
        if not present:
            continue  # the listing does not show it: cannot disagree
        if keys == ("metadata",):
            value = value or {}
        if value != expected:
            return False
    return True


def _find_created(
    client: PlatformClient, body: Mapping[str, Any], since: datetime, deadline: float | None
) -> dict[str, Any] | None:
    params: dict[str, Any] = {"limit": RECONCILE_LIST_LIMIT}
    if body.get("team_id"):
        params["team_id"] = body["team_id"]
    listing = client.request(
        "GET", "/evaluations/", params=params, idempotent=True, deadline=deadline
    )
    items = listing.get("evaluations", listing.get("data", []))
    matches = [
        item for item in items if isinstance(item, Mapping) and matches_request(item, body, since)
    ]
    if not matches:
        return None
    # matches_request kept only items whose creation time parses.
    newest = max(matches, key=lambda item: cast(datetime, _created(item)))
    found = dict(newest)
    found.setdefault("evaluation_id", found.get("id"))
    logger.info(
        "create evaluation: adopted %s, which landed despite the error", found.get("evaluation_id")
    )
    return found


def get(client: PlatformClient, eval_id: str, *, deadline: float | None = None) -> dict[str, Any]:
    """``GET /evaluations/{id}``."""
    return client.request("GET", _path(eval_id), idempotent=True, deadline=deadline)


def update(
    client: PlatformClient,
    eval_id: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    deadline: float | None = None,
) -> dict[str, Any] | None:
    """``PUT /evaluations/{id}`` with the fields given; empty ones count as not given
    (metadata is replaced whole: sending ``{}`` would erase it). Nothing: no request."""
    body: dict[str, Any] = {}
    if metadata:
        body["metadata"] = dict(metadata)
    if metrics:
        body["metrics"] = dict(metrics)
    if not body:
        return None
    return client.request("PUT", _path(eval_id), json=body, idempotent=True, deadline=deadline)


def _status_of(evaluation: Mapping[str, Any]) -> str:
    return str(evaluation.get("status") or "").upper()


def finalize(
    client: PlatformClient,
    eval_id: str,
    metrics: Mapping[str, Any] | None,
    *,
    deadline: float | None = None,
) -> dict[str, Any]:
    """``POST /evaluations/{id}/finalize`` with ``{"metrics": ...}`` (design §4.3).

    Not auto-replayed (finalize starts the platform's statistics task): after an
    ambiguous failure the evaluation is read back and finalize is resent once only if
    it still shows PENDING/RUNNING. If the read-back fails the original error is raised.
    """
    body = {"metrics": dict(metrics or {})}
    path = f"{_path(eval_id)}/finalize"
    try:
        return client.request("POST", path, json=body, idempotent=False, deadline=deadline)
    except APIError as error:
        if not is_ambiguous(error):
            raise
        try:
            current = get(client, eval_id, deadline=deadline)
        except APIError:
            raise error from None
        if _status_of(current) not in OPEN_STATUSES:
            logger.info(
                "finalize %s: landed despite the error (now %s)", eval_id, _status_of(current)
            )
            return current
        return client.request("POST", path, json=body, idempotent=False, deadline=deadline)


def error_message(status: RunStatus, reason: str | None) -> str | None:
    """The variant-N ``error_message``: crashed runs say ``crashed: <reason>``; capped."""
    if status is RunStatus.CRASHED:
        reason = f"crashed: {reason}" if reason else "crashed"
    return reason[:ERROR_MESSAGE_MAX] if reason else None


def marker(status: RunStatus, reason: str | None, *, now: datetime | None = None) -> dict[str, Any]:
    """The variant-S ``metadata.prime_runs`` marker."""
    finished = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return {
        "status": status.value,
        "finished_at": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "error": reason[:ERROR_MESSAGE_MAX] if reason else None,
    }


def _variant_key(client: PlatformClient) -> str:
    return client.api_root


def close_out(
    client: PlatformClient,
    eval_id: str,
    status: RunStatus,
    reason: str | None,
    *,
    config: Mapping[str, Any] | None,
    summary: Mapping[str, Any] | None,
    deadline: float | None = None,
) -> str:
    """Close an evaluation that did not complete, on either platform variant (design §4.2,
    contract §13.1). Returns how: ``"status"``, ``"already-closed"`` or ``"marker"``.

    1. ``PUT {"metadata", "metrics"}`` (never the marker); a failure is logged and the
       close-out goes on.
    2. Unless this platform is known to be variant S: ``PUT {"status", "error_message"}``.
       409 means already closed (info log, stop); 404/405/422, or a 2xx after which a
       ``GET`` still shows PENDING/RUNNING, means variant S. Other errors raise.
    3. Variant S: ``PUT {"metadata": {**config, "prime_runs": marker}}`` and one warning.
    """
    if status not in _PLATFORM_STATUS:
        raise ValueError(f"close_out takes failed, cancelled or crashed, not {status.value!r}")
    try:
        update(client, eval_id, metadata=config, metrics=summary, deadline=deadline)
    except PrimeRunsError as exc:
        logger.warning(
            "run %s: storing the config/summary failed (%s); still marking it %s",
            eval_id,
            exc,
            status.value,
        )

    if _variant_key(client) not in _variant_s:
        how = _put_status(client, eval_id, status, reason, deadline)
        if how is not None:
            return how

    metadata = dict(config or {})
    metadata[MARKER_KEY] = marker(status, reason)
    client.request(
        "PUT", _path(eval_id), json={"metadata": metadata}, idempotent=True, deadline=deadline
    )
    logger.warning(
        "run %s is %s, but this platform cannot mark an evaluation %s: the dashboard will keep "
        "showing it as running (the outcome is recorded in its metadata under %r)",
        eval_id,
        status.value,
        _PLATFORM_STATUS[status],
        MARKER_KEY,
    )
    return "marker"


def _put_status(
    client: PlatformClient,
    eval_id: str,
    status: RunStatus,
    reason: str | None,
    deadline: float | None,
) -> str | None:
    """Step 2 of :func:`close_out`: how the run was closed, or None when this platform
    turned out to be variant S (it is then remembered as such)."""
    body: dict[str, Any] = {"status": _PLATFORM_STATUS[status]}
    message = error_message(status, reason)
    if message:
        body["error_message"] = message
    try:
        client.request("PUT", _path(eval_id), json=body, idempotent=True, deadline=deadline)
    except ConflictError:
        logger.info(
            "run %s is already closed on the platform; not marking it %s", eval_id, status.value
        )
        return "already-closed"
    except APIError as exc:
        if exc.status_code not in _VARIANT_S_CAPABILITY_MISSING:
            raise
        _variant_s.add(_variant_key(client))
        return None
    try:
        current = get(client, eval_id, deadline=deadline)
    except PrimeRunsError:
        return "status"  # cannot confirm; the write was accepted
    if _status_of(current) not in OPEN_STATUSES:
        return "status"
    _variant_s.add(_variant_key(client))
    return None


def _reset_variant_cache() -> None:
    """Forget which platforms were found to be variant S (tests)."""
    _variant_s.clear()


__all__ = [
    "Created",
    "close_out",
    "create",
    "default_name",
    "error_message",
    "finalize",
    "get",
    "marker",
    "update",
]

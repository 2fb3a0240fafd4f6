"""The platform API routes: environment hub, evaluations and the legacy sample table."""

from __future__ import annotations

from typing import Any

from prime_runs.testing._reply import Call, Reply, Settings, detail
from prime_runs.testing._state import State, utc_now
from prime_runs.testing._validate import Invalid, body_object, check_fields, int_param

#: The legacy samples API refuses bodies over 25 MiB (contract §5.2).
SAMPLES_BODY_LIMIT = 26_214_400
OPEN_STATUSES = ("PENDING", "RUNNING")
CLOSE_STATUSES = ("FAILED", "CANCELLED")
ERROR_MESSAGE_LIMIT = 4096

_CREATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "environments": list,
    "tags": list,
    "model_name": str,
    "dataset": str,
    "framework": str,
    "description": str,
    "metadata": dict,
    "metrics": dict,
    "team_id": str,
    "task_type": str,
    "suite_id": str,
    "run_id": str,
    "is_public": bool,
}
_UPDATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "model_name": str,
    "dataset": str,
    "framework": str,
    "task_type": str,
    "description": str,
    "tags": list,
    "metadata": dict,
    "metrics": dict,
}
_STATUS_FIELDS: dict[str, type | tuple[type, ...]] = {"status": str, "error_message": str}
_NOT_FOUND = "Evaluation not found"


class PlatformApi:
    """Handlers for the platform routes. Each takes a Call and returns a Reply."""

    def __init__(self, state: State, settings: Settings) -> None:
        self._state = state
        self._settings = settings

    # -- environment hub -----------------------------------------------------------------

    def env_resolve(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, {"name": str, "team_id": str})
        name = body.get("name")
        if not name:
            raise Invalid("missing", ["body", "name"], "Field required")
        with self._state.lock:
            doc = self._state.envs_by_name.get(name)
            created = doc is None
            if doc is None:
                doc = self._state.add_environment(None, name, f"env_{name}")
        return Reply(200, {"data": {**doc, "created": created}})

    def env_lookup(self, call: Call) -> Reply:
        slug = f"{call.params['owner']}/{call.params['name']}"
        with self._state.lock:
            doc = self._state.envs_by_slug.get(slug)
        if doc is None:
            return detail(404, f"Environment {slug} not found")
        return Reply(200, {"data": doc})

    # -- evaluations ---------------------------------------------------------------------

    def eval_create(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, _CREATE_FIELDS)
        if not isinstance(body.get("name"), str):
            raise Invalid("missing", ["body", "name"], "Field required")
        if not body.get("environments") and not body.get("run_id"):
            raise Invalid("value_error", ["body"], "Either run_id or environments is required")
        for index, env in enumerate(body.get("environments") or []):
            if not isinstance(env, dict) or not isinstance(env.get("id"), str):
                raise Invalid("missing", ["body", "environments", index, "id"], "Field required")
        now = utc_now()
        with self._state.lock:
            self._state.eval_counter += 1
            eval_id = f"ev_standin_{self._state.eval_counter:04d}"
            evaluation = {
                "evaluation_id": eval_id,
                "name": body["name"],
                "environments": body.get("environments") or [],
                "tags": body.get("tags") or [],
                "metadata": body.get("metadata") or {},
                "metrics": body.get("metrics") or {},
                "status": "RUNNING",
                "error_message": None,
                "finalize_count": 0,
                "eval_type": "environment",
                "created_at": now,
                "updated_at": now,
                "finalized_at": None,
            }
            for key in ("model_name", "dataset", "framework", "description", "team_id"):
                evaluation[key] = body.get(key)
            for key in ("task_type", "suite_id", "run_id"):
                evaluation[key] = body.get(key)
            self._state.evaluations[eval_id] = evaluation
            self._state.samples[eval_id] = []
        return Reply(
            201,
            {
                "evaluation_id": eval_id,
                "name": body["name"],
                "status": "RUNNING",
                "eval_type": "environment",
                "viewer_url": self.viewer_url(eval_id),
                "created_at": now,
            },
        )

    def eval_list(self, call: Call) -> Reply:
        """Newest first; filters on team_id, suite_id and environment_name."""
        skip = int_param(call.query, "skip", 0, minimum=0)
        limit = int_param(call.query, "limit", 50, minimum=1)
        team = call.query.get("team_id")
        suite = call.query.get("suite_id")
        env_name = call.query.get("environment_name")
        with self._state.lock:
            matches = [
                ev
                for ev in reversed(self._state.evaluations.values())
                if (team is None or ev["team_id"] == team)
                and (suite is None or ev["suite_id"] == suite)
                and (env_name is None or env_name in self._env_names(ev))
            ]
            page = [self._public(ev) for ev in matches[skip : skip + limit]]
        return Reply(
            200, {"evaluations": page, "total": len(matches), "skip": skip, "limit": limit}
        )

    def eval_get(self, call: Call) -> Reply:
        with self._state.lock:
            evaluation = self._state.evaluations.get(call.params["id"])
            if evaluation is None:
                return detail(404, _NOT_FOUND)
            return Reply(200, self._public(evaluation))

    def eval_update(self, call: Call) -> Reply:
        body = body_object(call)
        variant = self._settings.variant
        if variant == "S":
            check_fields(body, _UPDATE_FIELDS, forbid_extra=True)
        else:
            check_fields(body, {**_UPDATE_FIELDS, **_STATUS_FIELDS})
        status = body.get("status") if variant == "N" else None
        if status is not None and status not in CLOSE_STATUSES:
            raise Invalid(
                "literal_error", ["body", "status"], "Input should be FAILED or CANCELLED"
            )
        with self._state.lock:
            evaluation = self._state.evaluations.get(call.params["id"])
            if evaluation is None:
                return detail(404, _NOT_FOUND)
            if status is not None and evaluation["status"] not in OPEN_STATUSES:
                return detail(
                    409,
                    f"Evaluation is {evaluation['status']}; only PENDING or RUNNING "
                    "evaluations can change status",
                )
            for key in _UPDATE_FIELDS:
                if body.get(key) is not None:
                    evaluation[key] = body[key]
            if status is not None:
                evaluation["status"] = status
                message = body.get("error_message")
                evaluation["error_message"] = message[:ERROR_MESSAGE_LIMIT] if message else None
            evaluation["updated_at"] = utc_now()
            return Reply(200, self._short(evaluation, updated_at=evaluation["updated_at"]))

    def eval_finalize(self, call: Call) -> Reply:
        body = body_object(call, empty_ok=True)
        check_fields(body, {"metrics": dict})
        with self._state.lock:
            evaluation = self._state.evaluations.get(call.params["id"])
            if evaluation is None:
                return detail(404, _NOT_FOUND)
            if evaluation["status"] not in (*OPEN_STATUSES, "PROCESSING"):
                return detail(409, f"Evaluation is {evaluation['status']}; cannot finalize")
            if body.get("metrics") is not None:
                evaluation["metrics"] = body["metrics"]
            evaluation["status"] = "PROCESSING"
            evaluation["finalize_count"] += 1
            evaluation["finalized_at"] = evaluation["updated_at"] = utc_now()
            eval_id = evaluation["evaluation_id"]
        return Reply(
            200,
            {
                "evaluation_id": eval_id,
                "status": "PROCESSING",
                "viewer_url": self.viewer_url(eval_id),
            },
        )

    # -- legacy samples ------------------------------------------------------------------

    def samples_append(self, call: Call) -> Reply:
        if len(call.body) > SAMPLES_BODY_LIMIT:
            return detail(413, f"Request body exceeds {SAMPLES_BODY_LIMIT} bytes")
        body = body_object(call)
        rows = body.get("samples")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise Invalid("list_type", ["body", "samples"], "Input should be a list of objects")
        with self._state.lock:
            evaluation = self._state.evaluations.get(call.params["id"])
            if evaluation is None:
                return detail(404, _NOT_FOUND)
            self._state.samples[evaluation["evaluation_id"]].extend(rows)
            return Reply(200, self._short(evaluation, samples_pushed=len(rows)))

    def samples_list(self, call: Call) -> Reply:
        page = int_param(call.query, "page", 1, minimum=1)
        limit = int_param(call.query, "limit", 100, minimum=1)
        with self._state.lock:
            rows = self._state.samples.get(call.params["id"])
            if rows is None:
                return detail(404, _NOT_FOUND)
            start = (page - 1) * limit
            if self._settings.samples_order == "newest":
                rows = rows[::-1]
            chunk = rows[start : start + limit]
            total = len(rows)
        return Reply(
            200,
            {
                "samples": chunk,
                "total": total,
                "page": page,
                "limit": limit,
                "hasMore": start + limit < total,
            },
        )

    # -- views ---------------------------------------------------------------------------

    def viewer_url(self, eval_id: str) -> str:
        return f"{self._settings.base_url}/dashboard/evaluations/{eval_id}"

    @staticmethod
    def _short(evaluation: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "evaluation_id": evaluation["evaluation_id"],
            "name": evaluation["name"],
            "status": evaluation["status"],
            **extra,
        }

    def _env_names(self, evaluation: dict[str, Any]) -> set[str]:
        names = {evaluation.get("dataset")}
        for env in evaluation["environments"]:
            names.add(self._state.env_names_by_id.get(env.get("id", "")))
        return {n for n in names if n}

    def _public(self, ev: dict[str, Any]) -> dict[str, Any]:
        """The camelCase GET view of Appendix B (caller holds the lock)."""
        return {
            "evaluation_id": ev["evaluation_id"],
            "name": ev["name"],
            "modelName": ev.get("model_name"),
            "dataset": ev.get("dataset"),
            "framework": ev.get("framework"),
            "taskType": ev.get("task_type"),
            "evalType": ev.get("eval_type"),
            "description": ev.get("description"),
            "status": ev["status"],
            "errorMessage": ev.get("error_message"),
            "environmentIds": [e.get("id") for e in ev["environments"]],
            "suiteId": ev.get("suite_id"),
            "runId": ev.get("run_id"),
            "versionId": None,
            "tags": ev["tags"],
            "metadata": ev["metadata"],
            "metrics": ev["metrics"],
            "totalSamples": len(self._state.samples.get(ev["evaluation_id"], ())),
            "createdAt": ev["created_at"],
            "updatedAt": ev["updated_at"],
            "finalizedAt": ev.get("finalized_at"),
            "userId": "standin-user",
            "teamId": ev.get("team_id"),
            "viewerUrl": self.viewer_url(ev["evaluation_id"]),
        }

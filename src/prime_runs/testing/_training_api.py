"""The training-run routes (contract Appendix A): register, metrics, presign + object
store, confirm, finalize, status; and the public root's and internal root's views.

Strict on purpose: unknown or mistyped fields are refused (422), so a client that drifts
from the contract fails its tests here rather than against the platform.
"""

from __future__ import annotations

import secrets
from typing import Any

from prime_runs.testing._reply import Call, Reply, Settings, detail
from prime_runs.testing._state import State, utc_now
from prime_runs.testing._validate import Invalid, body_object, check_fields

TRAIN_STATUSES = ("completed", "failed")
PARQUET_MAGIC = b"PAR1"
PRESIGN_EXPIRES = 3600

_REGISTER_FIELDS: dict[str, type | tuple[type, ...]] = {
    "base_model": str,
    "max_steps": int,
    "environments": list,
    "team_id": str,
    "name": str,
    "batch_size": int,
    "rollouts_per_example": int,
    "seq_len": int,
    "run_config": dict,
    "wandb_project": str,
    "wandb_entity": str,
    "wandb_run_name": str,
}
_NOT_FOUND = "Run not found"


def _require(body: dict[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        raise Invalid("missing", ["body", key], "Field required")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Invalid(f"{kind.__name__}_type", ["body", key], f"Input should be a {kind.__name__}")
    return value


def _step(body: dict[str, Any]) -> int:
    step = _require(body, "step", int)
    if step < 0:
        raise Invalid("greater_than_equal", ["body", "step"], "Input should be >= 0")
    return step


def _success(**extra: Any) -> Reply:
    return Reply(200, {"data": {"status": "success", **extra}})


class TrainingApi:
    """Handlers for the training routes. Each takes a Call and returns a Reply."""

    def __init__(self, state: State, settings: Settings) -> None:
        self._state = state
        self._settings = settings

    def register(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, _REGISTER_FIELDS, forbid_extra=True)
        team = _require(body, "team_id", str)
        _require(body, "base_model", str)
        if _require(body, "max_steps", int) < 0:
            raise Invalid("greater_than_equal", ["body", "max_steps"], "Input should be >= 0")
        for index, env in enumerate(body.get("environments") or []):
            if not isinstance(env, dict) or not isinstance(env.get("id"), str):
                raise Invalid("missing", ["body", "environments", index, "id"], "Field required")
            if set(env) - {"id", "version_id"}:
                raise Invalid("extra_forbidden", ["body", "environments", index], "Extra inputs")
        allowed = self._settings.train_teams
        if allowed is not None and team not in allowed:
            return detail(403, f"Team {team} is not enabled for external training runs")
        with self._state.lock:
            self._state.train_counter += 1
            run_id = f"rft_standin_{self._state.train_counter:04d}"
            name = body.get("name") or f"train-{run_id}"
            self._state.train_runs[run_id] = new_run(run_id, name, body=body)
        return Reply(200, {"run": {"id": run_id, "name": name, "status": "running"}})

    def status(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, {"status": str, "error_message": str}, forbid_extra=True)
        status = _require(body, "status", str)
        if status not in TRAIN_STATUSES:
            raise Invalid("literal_error", ["body", "status"], "Input should be completed|failed")
        with self._state.lock:
            run = self._state.train_runs.get(call.params["id"])
            if run is None:
                return detail(404, _NOT_FOUND)
            if run["status"] != "running":
                return detail(409, f"Run is already {run['status']}")
            run["status"] = status
            run["error_message"] = body.get("error_message")
            run["closed_at"] = utc_now()
        return Reply(200, {"run": {"id": run["id"], "status": status}})

    # -- monitoring (public and internal roots) -----------------------------------------

    def _run_for(self, call: Call, body: dict[str, Any]) -> dict[str, Any] | Reply:
        """The run a monitoring call names, or the refusal (caller holds the lock)."""
        run = self._state.train_runs.get(_require(body, "run_id", str))
        if run is None:
            return detail(404, _NOT_FOUND)
        internal = call.route.startswith("internal_")
        if run["hosted"] and not internal:
            return detail(400, "Hosted runs are monitored through the internal API")
        if internal and not run["hosted"]:
            return detail(404, _NOT_FOUND)
        return run

    def metrics(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, {"run_id": str, "metrics": dict}, forbid_extra=True)
        row = _require(body, "metrics", dict)
        step = row.get("step")
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
            raise Invalid("int_type", ["body", "metrics", "step"], "step must be an int >= 0")
        with self._state.lock:
            run = self._run_for(call, body)
            if isinstance(run, Reply):
                return run
            self._state.train_metrics.setdefault(run["id"], []).append(dict(row))
        return _success()

    def presign(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, {"run_id": str, "step": int}, forbid_extra=True)
        step = _step(body)
        with self._state.lock:
            run = self._run_for(call, body)
            if isinstance(run, Reply):
                return run
            token = secrets.token_hex(32)  # as long as a SigV4 signature
            key = f"rft/{run['id']}/samples/step_{step}_{token[:6]}.parquet"
            self._state.presigned[key] = {"run_id": run["id"], "step": step, "token": token}
        # Shaped as an S3 presigned URL: its query is a write credential for an hour.
        url = (
            f"{self._settings.base_url}/_objects/{key}?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential=STANDIN%2F{step}%2Fs3%2Faws4_request&X-Amz-Expires="
            f"{PRESIGN_EXPIRES}&X-Amz-SignedHeaders=host&X-Amz-Signature={token}"
        )
        return Reply(
            200, {"data": {"presignedUrl": url, "s3Key": key, "expiresIn": PRESIGN_EXPIRES}}
        )

    def confirm(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, {"run_id": str, "step": int, "s3_key": str}, forbid_extra=True)
        step = _step(body)
        key = _require(body, "s3_key", str)
        with self._state.lock:
            run = self._run_for(call, body)
            if isinstance(run, Reply):
                return run
            grant = self._state.presigned.get(key)
            if grant is None or grant["run_id"] != run["id"] or grant["step"] != step:
                return detail(400, "s3_key was not presigned for this run and step")
            if key not in self._state.objects:
                return detail(400, "no object was uploaded under s3_key")
            confirmed = self._state.train_samples.setdefault(run["id"], [])
            if all(c["s3_key"] != key for c in confirmed):  # a replay confirms once
                confirmed.append({"step": step, "s3_key": key})
        return _success()

    def finalize(self, call: Call) -> Reply:
        body = body_object(call)
        check_fields(body, {"run_id": str, "exit_code": int}, forbid_extra=True)
        _require(body, "exit_code", int)
        with self._state.lock:
            run = self._run_for(call, body)
            if isinstance(run, Reply):
                return run
            if run["status"] == "failed":
                return detail(409, "Run is already failed")
            run["finalize_count"] += 1
            if run["status"] == "running":  # compare-and-set: a second finalize succeeds
                run["status"] = "completed"
                run["closed_at"] = utc_now()
        return _success(run_id=run["id"], run_status="completed")

    # -- the object store ----------------------------------------------------------------

    def object_put(self, call: Call) -> Reply:
        key = call.params["key"]
        if "authorization" in call.headers or "x-api-key" in call.headers:
            return detail(400, "a presigned upload must not carry platform credentials")
        with self._state.lock:
            grant = self._state.presigned.get(key)
        if grant is None or call.query.get("X-Amz-Signature") != grant["token"]:
            return detail(403, "SignatureDoesNotMatch")
        if call.headers.get("content-type") != "application/parquet":
            return detail(403, "SignatureDoesNotMatch: Content-Type must be application/parquet")
        data = call.body
        if len(data) < 12 or not data.startswith(PARQUET_MAGIC) or not data.endswith(PARQUET_MAGIC):
            return detail(400, "the object is not a Parquet file")
        with self._state.lock:
            self._state.objects[key] = bytes(data)
        return Reply(200, None, {"ETag": f'"{secrets.token_hex(8)}"'})


def new_run(run_id: str, name: str, *, body: dict[str, Any], hosted: bool = False) -> dict:
    """A stored training run: the register body plus status and bookkeeping."""
    return {
        **body,
        "id": run_id,
        "name": name,
        "status": "running",
        "error_message": None,
        "finalize_count": 0,
        "hosted": hosted,
        "created_at": utc_now(),
        "closed_at": None,
    }

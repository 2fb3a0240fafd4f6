"""Training runs on the platform (contract Appendix A): register or attach, one metrics row
per step, sample objects (presign, upload, confirm), and the close-out (finalize, status).

External runs live under the public root (``{origin}/api/v1/rft/...``). A hosted run is
reached through the internal root its launcher hands over as the base URL
(``.../api/internal`` or ``.../api/internal/rft``): requests then go to
``{origin}/api/internal/rft/...`` with the run's token in ``x-api-key`` as well as in
``Authorization``. Registering and setting a status are not served there.

Replays follow the contract's table: register is never replayed after an ambiguous
failure (a second run could be created); every other call is (the platform keeps one
metrics row per step, a confirm or finalize is a compare-and-set).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

import prime_runs.platform._tls as _tls
import prime_runs.platform.retry as retry
from prime_runs._otel_private import suppress_instrumentation
from prime_runs._runid import is_run_id, shown
from prime_runs.errors import APIError, ConfigurationError, ConflictError, TransportError
from prime_runs.platform._http import Deadline, PlatformClient
from prime_runs.platform._redact import secret_query
from prime_runs.settings import Settings
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")

RunKind = Literal["eval", "train"]
EVAL: RunKind = "eval"
TRAIN: RunKind = "train"
RUN_KINDS: tuple[str, ...] = (EVAL, TRAIN)

INTERNAL_PATH = "/api/internal"
UPLOAD_ATTEMPTS = 3  # presigned PUTs: 5xx, 429 and transport errors, then give up
UPLOAD_TIMEOUT = 300.0
ERROR_MESSAGE_LIMIT = 4096

#: The RFT API knows ``completed | failed``; the finer status travels in the message.
TERMINAL_STATUS = {
    RunStatus.COMPLETED: "completed",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "failed",
    RunStatus.CRASHED: "failed",
}


NEEDS_MODEL = "a training run needs model=: the base model being trained"
NEEDS_TEAM = (
    "a training run needs a team: pass team_id= or set PRIME_TEAM_ID (the platform "
    "enables external training runs per team)"
)


@dataclass(frozen=True)
class TrainingSpec:
    """What a training run is registered with. ``max_steps`` 0 means unknown."""

    max_steps: int = 0
    batch_size: int | None = None
    rollouts_per_example: int | None = None
    seq_len: int | None = None
    wandb_project: str | None = None
    wandb_entity: str | None = None
    wandb_run_name: str | None = None

    def __post_init__(self) -> None:
        for name in ("max_steps", "batch_size", "rollouts_per_example", "seq_len"):
            value = getattr(self, name)
            if value is None and name != "max_steps":
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigurationError(
                    f"TrainingSpec.{name} must be an int, got {type(value).__name__}"
                )
            if value < 0 or (value == 0 and name != "max_steps"):
                bound = ">= 0" if name == "max_steps" else "> 0"
                raise ConfigurationError(f"TrainingSpec.{name} must be {bound}, got {value}")
        for name in ("wandb_project", "wandb_entity", "wandb_run_name"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(
                    f"TrainingSpec.{name} must be a string or None, got {type(value).__name__}"
                )


@dataclass(frozen=True)
class TrainingRegistration:
    id: str
    name: str
    url: str


def split_root(base_url: str) -> tuple[str, bool]:
    """(origin, internal?) of a base URL, accepting ``/api/internal[/rft]`` and
    ``/api/v1/rft`` (``/api/v1`` itself is already stripped by the settings)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    internal = False
    for suffix, is_internal in (
        ("/api/internal/rft", True),
        ("/api/internal", True),
        ("/api/v1/rft", False),
    ):
        if path.endswith(suffix):
            path, internal = path[: -len(suffix)].rstrip("/"), is_internal
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", "")), internal


class TrainingClient(PlatformClient):
    """The platform client aimed at the public or the internal root (see module doc)."""

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        origin, internal = split_root(settings.base_url)
        super().__init__(dataclasses.replace(settings, base_url=origin), **kwargs)
        self.internal = internal
        if internal:
            self.api_root = f"{origin}{INTERNAL_PATH}"
            self._headers["x-api-key"] = self._api_key


def register_body(
    *,
    model: str | None,
    team_id: str | None,
    spec: TrainingSpec,
    environments: list[Any],
    name: str | None,
    config: dict[str, Any],
) -> dict[str, Any]:
    """The register request (``POST /rft/external-runs``); ConfigurationError when the
    platform's required fields are missing."""
    if not model:
        raise ConfigurationError(NEEDS_MODEL)
    if not team_id:
        raise ConfigurationError(NEEDS_TEAM)
    envs = []
    for ref in environments:  # passed through as given: the RFT API resolves them itself
        env = {"id": ref.id or ref.slug or ref.name}
        if ref.version_id:
            env["version_id"] = ref.version_id
        envs.append(env)
    body: dict[str, Any] = {
        "base_model": model,
        "max_steps": spec.max_steps,
        "environments": envs,
        "team_id": team_id,
    }
    optional = {
        "name": name,
        "batch_size": spec.batch_size,
        "rollouts_per_example": spec.rollouts_per_example,
        "seq_len": spec.seq_len,
        "run_config": config or None,
        "wandb_project": spec.wandb_project,
        "wandb_entity": spec.wandb_entity,
        "wandb_run_name": spec.wandb_run_name,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


class TrainingPlatform:
    """One training run's calls. Thread-safe (the client is)."""

    def __init__(self, settings: Settings, client: TrainingClient | None = None) -> None:
        self.settings = settings
        self.client = client or TrainingClient(settings)

    def url_for(self, run_id: str) -> str:
        return f"{self.settings.frontend_url}/dashboard/training/{run_id}"

    def register(self, body: dict[str, Any]) -> TrainingRegistration:
        if self.client.internal:
            raise ConfigurationError(
                "the internal API root serves hosted runs a launcher created: pass their "
                "id= to attach, or use the public API root to register a run"
            )
        response = self.client.request("POST", "/rft/external-runs", json=body, idempotent=False)
        run = response.get("run")
        run_id = run.get("id") if isinstance(run, dict) else None
        if not is_run_id(run_id):  # it names the run's folder and later request paths
            got = f"{shown(run_id)}, not a run id," if run_id else "no run id"
            raise APIError(
                f"POST /rft/external-runs returned {got} (keys: {sorted(response)})",
                method="POST",
                path="/rft/external-runs",
            )
        name = run.get("name") if isinstance(run, dict) else None
        return TrainingRegistration(
            run_id, str(name or body.get("name") or run_id), self.url_for(run_id)
        )

    def attach(self, run_id: str, name: str | None = None) -> TrainingRegistration:
        """A run a launcher created: no request (the first write proves access)."""
        return TrainingRegistration(run_id, name or run_id, self.url_for(run_id))

    def send_metrics(self, run_id: str, row: bytes, deadline: Deadline | None) -> None:
        """One metrics row (``row`` is the request body, already encoded)."""
        self.client.request("POST", "/rft/metrics", content=row, idempotent=True, deadline=deadline)

    def presign(self, run_id: str, step: int, deadline: Deadline | None) -> tuple[str, str]:
        data = self._data(
            self.client.request(
                "POST",
                "/rft/samples/presign",
                json={"run_id": run_id, "step": step},
                idempotent=True,
                deadline=deadline,
            )
        )
        url = data.get("presignedUrl") or data.get("presigned_url")
        key = data.get("s3Key") or data.get("s3_key")
        if not isinstance(url, str) or not isinstance(key, str) or not url or not key:
            raise APIError(
                f"POST /rft/samples/presign returned no upload URL/key (keys: {sorted(data)})",
                method="POST",
                path="/rft/samples/presign",
            )
        return url, key

    def confirm(self, run_id: str, step: int, key: str, deadline: Deadline | None) -> None:
        body = {"run_id": run_id, "step": step, "s3_key": key}
        self.client.request(
            "POST", "/rft/samples/confirm", json=body, idempotent=True, deadline=deadline
        )

    def upload(self, url: str, data: bytes, deadline: float | None = None) -> None:
        """PUT Parquet bytes to a presigned URL: no platform credentials, no redirects.
        Retried under the one policy (``retry``) for a transport error, 429 or 5xx."""

        def send(timeout: float) -> None:
            try:
                with (
                    suppress_instrumentation(),
                    secret_query(),  # httpx logs the URL, and its query is a credential
                    httpx.Client(follow_redirects=False, verify=_tls.context()) as http,
                ):
                    response = http.put(
                        url,
                        content=data,
                        headers={"Content-Type": "application/parquet"},
                        timeout=timeout,
                    )
            except httpx.TransportError as exc:
                message = f"sample upload failed: {type(exc).__name__}"
                raise TransportError(message, method="PUT") from None
            status = response.status_code
            if not 200 <= status < 300:
                raise APIError(
                    f"sample upload answered {status}: {response.text[:200]}",
                    status_code=status,
                    method="PUT",
                )

        def retryable(error: BaseException) -> bool:
            status = getattr(error, "status_code", None)
            return isinstance(error, TransportError) or status == 429 or (status or 0) >= 500

        retry.retrying(
            send,
            timeout=UPLOAD_TIMEOUT,
            deadline=deadline,
            retryable=retryable,
            attempts=UPLOAD_ATTEMPTS,
        )

    def close(
        self, run_id: str, status: RunStatus, reason: str | None, deadline: float | None
    ) -> None:
        """Finalize a completed run (falling back to a status PUT); set ``failed`` for a run
        that failed, was cancelled or crashed. Already closed (409) is not an error."""
        if status is RunStatus.COMPLETED:
            try:
                self.client.request(
                    "POST",
                    "/rft/finalize",
                    json={"run_id": run_id, "exit_code": 0},
                    idempotent=True,
                    deadline=deadline,
                )
                return
            except APIError as exc:
                if self.client.internal:
                    raise  # no status endpoint on the internal root
                logger.warning(
                    "prime-runs: training run %s could not be finalized (%s); setting its "
                    "status to completed instead",
                    run_id,
                    exc,
                )
            self._set_status(run_id, status, None, deadline)
            return
        if self.client.internal:
            logger.info(
                "prime-runs: hosted training run %s ended %s; its launcher records the outcome "
                "(the internal API has no status endpoint)",
                run_id,
                status.value,
            )
            return
        message = reason or status.value
        if status is not RunStatus.FAILED:
            message = f"{status.value}: {message}"
        self._set_status(run_id, status, message, deadline)

    def _set_status(
        self, run_id: str, status: RunStatus, message: str | None, deadline: float | None
    ) -> None:
        body: dict[str, Any] = {"status": TERMINAL_STATUS[status]}
        if message:
            body["error_message"] = message[:ERROR_MESSAGE_LIMIT]
        try:
            self.client.request(
                "PUT",
                f"/rft/external-runs/{run_id}/status",
                json=body,
                idempotent=True,
                deadline=deadline,
            )
        except ConflictError:
            logger.info(
                "prime-runs: training run %s is already closed; not marking it %s",
                run_id,
                status.value,
            )

    @staticmethod
    def _data(response: dict[str, Any]) -> dict[str, Any]:
        data = response.get("data")
        return data if isinstance(data, dict) else response

    def shutdown(self) -> None:
        self.client.close()

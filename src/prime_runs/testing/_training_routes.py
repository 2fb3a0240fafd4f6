"""Route names and path matching for the stand-in's training endpoints (contract App. A).

The public root serves every call under ``/api/v1/rft``; the internal root a hosted run
reaches (``/api/internal/rft``) serves the monitoring calls only: registering a run and
setting its status are not available there. Presigned uploads go to a loopback object
store under ``/_objects/``, outside both API roots.
"""

from __future__ import annotations

from urllib.parse import unquote

TRAINING_ROUTES: dict[str, tuple[str, str]] = {
    "rft_register": ("POST", "/api/v1/rft/external-runs"),
    "rft_status": ("PUT", "/api/v1/rft/external-runs/{id}/status"),
    "rft_metrics": ("POST", "/api/v1/rft/metrics"),
    "rft_presign": ("POST", "/api/v1/rft/samples/presign"),
    "rft_confirm": ("POST", "/api/v1/rft/samples/confirm"),
    "rft_finalize": ("POST", "/api/v1/rft/finalize"),
    "internal_rft_metrics": ("POST", "/api/internal/rft/metrics"),
    "internal_rft_presign": ("POST", "/api/internal/rft/samples/presign"),
    "internal_rft_confirm": ("POST", "/api/internal/rft/samples/confirm"),
    "internal_rft_finalize": ("POST", "/api/internal/rft/finalize"),
    "object_put": ("PUT", "/_objects/{key}"),
}

#: Routes of the internal root: authenticated by ``x-api-key`` as well as the bearer token.
INTERNAL_ROUTES = frozenset(name for name in TRAINING_ROUTES if name.startswith("internal_"))
#: The object store takes no platform credentials at all (a presigned URL carries its own).
OBJECT_ROUTE = "object_put"
OBJECT_PREFIX = "/_objects/"

_MONITORING = {
    ("metrics",): "rft_metrics",
    ("samples", "presign"): "rft_presign",
    ("samples", "confirm"): "rft_confirm",
    ("finalize",): "rft_finalize",
}


def match_training(path: str) -> dict[str, tuple[str, dict[str, str]]] | None:
    """Method -> (route, params) for a training path; None when the path is not one."""
    if path.startswith(OBJECT_PREFIX):
        key = unquote(path[len(OBJECT_PREFIX) :])
        return {"PUT": (OBJECT_ROUTE, {"key": key})} if key else {}
    for root, internal in (("/api/v1/rft/", False), ("/api/internal/rft/", True)):
        if path.startswith(root):
            segments = tuple(unquote(s) for s in path[len(root) :].rstrip("/").split("/"))
            return _match_segments(segments, internal)
    return None


def _match_segments(s: tuple[str, ...], internal: bool) -> dict[str, tuple[str, dict[str, str]]]:
    monitoring = _MONITORING.get(s)
    if monitoring is not None:
        return {"POST": (("internal_" if internal else "") + monitoring, {})}
    if internal or s[0] != "external-runs":
        return {}
    if len(s) == 1:
        return {"POST": ("rft_register", {})}
    if len(s) == 3 and s[1] and s[2] == "status":
        return {"PUT": ("rft_status", {"id": s[1]})}
    return {}

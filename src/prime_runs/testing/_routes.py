"""Route names and path matching for the stand-in."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from prime_runs.testing._training_routes import TRAINING_ROUTES, match_training

#: Route name -> (method, path template). Names are the public vocabulary of
#: ``fail()``, ``stall()``, ``outage()`` and ``requests_for()``.
ROUTES: dict[str, tuple[str, str]] = {
    "env_resolve": ("POST", "/api/v1/environmentshub/resolve"),
    "env_lookup": ("GET", "/api/v1/environmentshub/{owner}/{name}/@latest"),
    "eval_create": ("POST", "/api/v1/evaluations/"),
    "eval_list": ("GET", "/api/v1/evaluations/"),
    "eval_get": ("GET", "/api/v1/evaluations/{id}"),
    "eval_update": ("PUT", "/api/v1/evaluations/{id}"),
    "eval_finalize": ("POST", "/api/v1/evaluations/{id}/finalize"),
    "samples_append": ("POST", "/api/v1/evaluations/{id}/samples"),
    "samples_list": ("GET", "/api/v1/evaluations/{id}/samples"),
    "traces_upload": ("POST", "/api/v1/traces"),
    "traces_get": ("GET", "/api/v1/traces/{id}"),
    "episodes_get": ("GET", "/api/v1/episodes/{id}"),
    **TRAINING_ROUTES,
}

#: Routes served with the Prime Traces error envelope instead of FastAPI's ``detail``.
TRACES_ROUTES = frozenset({"traces_upload", "traces_get", "episodes_get"})

#: The name recorded for a request that matched no route (answered 404 or 405).
UNKNOWN = "unknown"

_PREFIX = "/api/v1/"


@dataclass(frozen=True)
class Match:
    """The route a request matched (or ``UNKNOWN``), its path parameters, and whether only
    the method was wrong (405 rather than 404)."""

    route: str
    params: dict[str, str]
    wrong_method: bool = False


def check_route(route: str) -> str:
    """Return ``route`` if it names a route; raise ValueError otherwise."""
    if route not in ROUTES:
        raise ValueError(f"unknown route {route!r}; expected one of {sorted(ROUTES)}")
    return route


def match(method: str, path: str) -> Match:
    """Match a request path (without query) to a route name."""
    by_method = match_training(path)
    if by_method is None:
        if not path.startswith(_PREFIX):
            return Match(UNKNOWN, {})
        segments = [unquote(s) for s in path[len(_PREFIX) :].rstrip("/").split("/")]
        by_method = _match_segments(segments)
    if not by_method:
        return Match(UNKNOWN, {})
    if method in by_method:
        route, params = by_method[method]
        return Match(route, params)
    return Match(UNKNOWN, {}, wrong_method=True)


def _match_segments(s: list[str]) -> dict[str, tuple[str, dict[str, str]]]:
    """Method -> (route, params) for the routes that live at this path."""
    n = len(s)
    if s[0] == "environmentshub":
        if n == 2 and s[1] == "resolve":
            return {"POST": ("env_resolve", {})}
        if n == 4 and s[3] == "@latest" and s[1] and s[2]:
            return {"GET": ("env_lookup", {"owner": s[1], "name": s[2]})}
    elif s[0] == "evaluations":
        if n == 1:
            return {"POST": ("eval_create", {}), "GET": ("eval_list", {})}
        if n == 2 and s[1]:
            params = {"id": s[1]}
            return {"GET": ("eval_get", params), "PUT": ("eval_update", params)}
        if n == 3 and s[2] == "finalize":
            return {"POST": ("eval_finalize", {"id": s[1]})}
        if n == 3 and s[2] == "samples":
            params = {"id": s[1]}
            return {"POST": ("samples_append", params), "GET": ("samples_list", params)}
    elif s[0] == "traces":
        if n == 1:
            return {"POST": ("traces_upload", {})}
        if n == 2 and s[1]:
            return {"GET": ("traces_get", {"id": s[1]})}
    elif s[0] == "episodes" and n == 2 and s[1]:
        return {"GET": ("episodes_get", {"id": s[1]})}
    return {}

"""Environment hub resolution (contract §3): what ``init(environments=...)`` accepts and the
``[{"id", "version_id"?}]`` list an evaluation is created with.

- ``"gsm8k"`` is a hub name: get-or-create by name (``POST /environmentshub/resolve``);
- ``"alice/gsm8k"`` is an ``owner/name`` slug: lookup only (``GET .../@latest``);
- a mapping or :class:`EnvironmentRef` with ``name``/``slug``/``id``/``version_id``:
  an ``id`` is used as given, without a request; a ``version_id`` pin survives resolution.

Every entry is validated before the first request; one that does not resolve fails the
whole call (never skipped), so no evaluation is created against the wrong environments.

Only the hub saying an environment does not exist (404, or a 400/422 refusing the name or
slug as given) or answering without an id is an ``EnvironmentResolutionError``. Failing to
reach the hub or to be authorised by it (connect errors, timeouts, 5xx/429 after retries,
401/402/403) propagates as the ``APIError`` it is: a registration failure, which ``init()``
handles like a failed evaluation create (offline fallback under ``on_error="warn"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from prime_runs.errors import (
    ConfigurationError,
    EnvironmentResolutionError,
    NotFoundError,
    ValidationRejectedError,
)

if TYPE_CHECKING:
    from prime_runs.platform._http import PlatformClient


@dataclass(frozen=True)
class EnvironmentRef:
    """A hub environment: by ``name`` (get-or-create), ``slug`` (``owner/name``, lookup)
    or ``id`` (as given), optionally pinned to ``version_id``."""

    name: str | None = None
    slug: str | None = None
    id: str | None = None
    version_id: str | None = None

    def __post_init__(self) -> None:
        for field in ("name", "slug", "id", "version_id"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(
                    f"environment {field} must be a string, got {type(value).__name__}"
                )
        if not (self.name or self.slug or self.id):
            raise ConfigurationError("an environment needs a name, a slug (owner/name) or an id")
        if self.slug:
            owner, _, name = self.slug.partition("/")
            if not owner or not name or "/" in name:
                raise ConfigurationError(
                    f"environment slug {self.slug!r} must be 'owner/name' with both parts set"
                )

    @property
    def label(self) -> str:
        """How the user named it, for messages."""
        return self.slug or self.name or self.id or "?"

    @property
    def display_name(self) -> str | None:
        """The environment's name: ``name``, or the part of the slug after ``/``."""
        if self.name:
            return self.name
        if self.slug:
            return self.slug.partition("/")[2]
        return None

    @classmethod
    def coerce(cls, value: object) -> EnvironmentRef:
        """A ref from a str (slash = slug), a mapping, or a ref; ``ConfigurationError`` else."""
        if isinstance(value, EnvironmentRef):
            return value
        if isinstance(value, str):
            text = value.strip()
            return cls(slug=text) if "/" in text else cls(name=text or None)
        if isinstance(value, Mapping):
            unknown = set(value) - {"name", "slug", "id", "version_id"}
            if unknown:
                raise ConfigurationError(
                    f"environment {dict(value)!r} has unknown keys {sorted(unknown)}; "
                    "expected name, slug, id, version_id"
                )
            return cls(**{k: value.get(k) for k in ("name", "slug", "id", "version_id")})
        raise ConfigurationError(
            "environments entries must be a str, a mapping or an EnvironmentRef, "
            f"got {type(value).__name__}"
        )


def check_environments_type(environments: object) -> None:
    """``ConfigurationError`` unless ``environments=`` is None, one entry or an iterable of
    entries (a number or bytes would otherwise fail as a bare ``TypeError``)."""
    if environments is None or isinstance(environments, (str, Mapping, EnvironmentRef)):
        return
    if isinstance(environments, (bytes, bytearray)) or not isinstance(environments, Iterable):
        raise ConfigurationError(
            "environments= must be a list of environment names, owner/name slugs, mappings "
            f"or EnvironmentRef values, got {type(environments).__name__}; "
            "e.g. environments=['gsm8k']"
        )


def coerce_environments(environments: Iterable[object] | str | None) -> list[EnvironmentRef]:
    """Validate every entry locally; at least one is required."""
    if isinstance(environments, (str, Mapping, EnvironmentRef)):
        environments = [environments]
    check_environments_type(environments)
    refs = [EnvironmentRef.coerce(entry) for entry in environments or ()]
    if not refs:
        raise ConfigurationError(
            "an eval run needs at least one environment: pass environments=['my-env'] to init()"
        )
    return refs


def dataset_name(environments: Iterable[object] | str | None) -> str | None:
    """The first environment's name (a slug's part after ``/``): the create ``dataset``."""
    if isinstance(environments, (str, Mapping, EnvironmentRef)):
        environments = [environments]
    for entry in environments or ():
        name = EnvironmentRef.coerce(entry).display_name
        if name:
            return name
    return None


def resolve_environments(
    client: PlatformClient,
    environments: Sequence[object] | str,
    team_id: str | None,
    *,
    deadline: float | None = None,
) -> list[dict[str, Any]]:
    """``[{"id", "version_id"?}]`` for the create body. Raises ``ConfigurationError`` for
    bad entries (before any request), ``EnvironmentResolutionError`` naming the first
    environment the hub says does not exist, and the ``APIError`` of a hub that cannot be
    reached or refuses the key."""
    refs = coerce_environments(environments)
    resolved: list[dict[str, Any]] = []
    for ref in refs:
        entry: dict[str, Any] = {"id": ref.id or _resolve_one(client, ref, team_id, deadline)}
        if ref.version_id:
            entry["version_id"] = ref.version_id
        resolved.append(entry)
    return resolved


def _resolve_one(
    client: PlatformClient, ref: EnvironmentRef, team_id: str | None, deadline: float | None
) -> str:
    try:
        if ref.slug:
            owner, _, name = ref.slug.partition("/")
            response = client.request(
                "GET",
                f"/environmentshub/{quote(owner, safe='')}/{quote(name, safe='')}/@latest",
                idempotent=True,
                deadline=deadline,
            )
        else:
            body: dict[str, Any] = {"name": ref.name}
            if team_id:
                body["team_id"] = team_id
            # Get-or-create: a replay returns the same environment.
            response = client.request(
                "POST", "/environmentshub/resolve", json=body, idempotent=True, deadline=deadline
            )
    except (NotFoundError, ValidationRejectedError) as exc:
        # The hub's own answer about this environment. Anything else (unreachable, outage,
        # rejected key) says nothing about the environment and propagates as it is.
        raise EnvironmentResolutionError(ref.label, str(exc)) from exc
    env_id = _id_of(response)
    if env_id is None:
        raise EnvironmentResolutionError(
            ref.label, f"the hub answered without an id (keys: {sorted(response)})"
        )
    return env_id


def _id_of(response: Mapping[str, Any]) -> str | None:
    data = response.get("data")
    for source in (data if isinstance(data, Mapping) else {}, response):
        value = source.get("id")
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


__all__ = [
    "EnvironmentRef",
    "check_environments_type",
    "coerce_environments",
    "dataset_name",
    "resolve_environments",
]

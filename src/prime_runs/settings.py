"""Settings and the environment variables behind them, in one place.

Every setting resolves as: explicit argument > environment variable >
``~/.prime/config.json`` (the file the prime CLI writes) > default.

Environment variables:

``PRIME_API_KEY``
    API key. Blank counts as unset.
``PRIME_TEAM_ID``
    Team id, sent in request bodies. Blank counts as unset (falls through to the file).
``PRIME_API_BASE_URL`` (older alias ``PRIME_BASE_URL``)
    Platform API origin. A trailing ``/`` and then ``/api/v1`` are stripped.
``PRIME_TRACES_URL``
    Prime Traces origin. Set it for any non-production platform: the default is
    production, never the platform URL.
``PRIME_FRONTEND_URL``
    Dashboard origin used to build run URLs.
``PRIME_RUNS_MODE``
    ``online``, ``offline`` or ``disabled``; trimmed and case-insensitive.
``PRIME_RUNS_DIR``
    Root of the local run archive (resolved by the archive, not here).
``PRIME_TRACES_OPT_OUT``
    ``true`` (or ``1``, ``yes``, ``on``) keeps runs off Prime Traces, as in 0.1.4: their
    episodes go to the legacy sample tables only. ``false``/``0``/``no``/``off`` or blank:
    not opted out. Also read as ``traces_opt_out`` from the config file.
``PRIME_RUNS_REGISTER_TIMEOUT``
    Seconds ``init()`` waits for the platform to register an online run (default 15; ``0``:
    never wait; ``inf``: as long as the platform takes). Past it the run goes on under a
    local id and is registered when the platform answers. The ``register_timeout=`` keyword
    wins over it.
``TRACEPARENT``, ``BAGGAGE``
    A run to join from another process (W3C carrier; see ``docs/distributed.md``).
``PRIME_RUNS_INFLIGHT_WINDOW``
    Seconds a request of ours may still be stored by the platform after it was sent
    (default: the request's own timeout). `prime-runs sync` leaves the records of a request
    sent less than this ago pending; tests shorten it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prime_runs.errors import ConfigurationError

API_KEY_ENV = "PRIME_API_KEY"
TEAM_ID_ENV = "PRIME_TEAM_ID"
BASE_URL_ENV = "PRIME_API_BASE_URL"
BASE_URL_ALIAS_ENV = "PRIME_BASE_URL"
TRACES_URL_ENV = "PRIME_TRACES_URL"
FRONTEND_URL_ENV = "PRIME_FRONTEND_URL"
MODE_ENV = "PRIME_RUNS_MODE"
DIR_ENV = "PRIME_RUNS_DIR"
TRACES_OPT_OUT_ENV = "PRIME_TRACES_OPT_OUT"
REGISTER_TIMEOUT_ENV = "PRIME_RUNS_REGISTER_TIMEOUT"
TRACEPARENT_ENV = "TRACEPARENT"  # W3C carrier of a run to join (see _join.py)
BAGGAGE_ENV = "BAGGAGE"
INFLIGHT_WINDOW_ENV = "PRIME_RUNS_INFLIGHT_WINDOW"

#: Every variable the SDK reads: a hermetic test clears all of them.
ENV_VARIABLES = (
    API_KEY_ENV,
    TEAM_ID_ENV,
    BASE_URL_ENV,
    BASE_URL_ALIAS_ENV,
    TRACES_URL_ENV,
    FRONTEND_URL_ENV,
    MODE_ENV,
    DIR_ENV,
    TRACES_OPT_OUT_ENV,
    REGISTER_TIMEOUT_ENV,
    TRACEPARENT_ENV,
    BAGGAGE_ENV,
    INFLIGHT_WINDOW_ENV,
)

DEFAULT_BASE_URL = "https://api.primeintellect.ai"
DEFAULT_TRACES_URL = "https://api.primeintellect.ai"
DEFAULT_FRONTEND_URL = "https://app.primeintellect.ai"

ONLINE = "online"
OFFLINE = "offline"
DISABLED = "disabled"
MODES = (ONLINE, OFFLINE, DISABLED)

_API_PATH = "/api/v1"

#: How long ``init()`` waits for the platform to register a run, in seconds: past it the
#: run goes on under a local id and registers when the platform answers (about one
#: request's worth of retries, see ``platform.retry``).
DEFAULT_REGISTER_TIMEOUT = 15.0


def default_config_path() -> Path:
    """``~/.prime/config.json``, looked up at call time (tests move ``HOME``)."""
    return Path.home() / ".prime" / "config.json"


def load_config_file(path: Path | None = None) -> dict[str, Any]:
    """The CLI's config file as a dict; missing, unreadable, non-UTF-8, non-JSON or
    non-object files count as empty. Never raises."""
    try:
        data = json.loads((path or default_config_path()).read_bytes().decode("utf-8"))
    except (OSError, ValueError, RuntimeError):
        # RuntimeError: Path.home() fails when no home directory can be determined.
        return {}
    return data if isinstance(data, dict) else {}


def normalize_api_url(url: str) -> str:
    """Strip trailing ``/`` then a trailing ``/api/v1`` from the URL *path* (never the host)."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if path.endswith(_API_PATH):
        path = path[: -len(_API_PATH)].rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def _text(value: object) -> str | None:
    """A non-blank string, stripped; anything else is unset."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _first(*values: object) -> str | None:
    return _sourced(*((None, v) for v in values))[0]


def _sourced(*candidates: tuple[str | None, object]) -> tuple[str | None, str | None]:
    """The first non-blank ``(value, source)`` of ``(source, value)`` candidates."""
    for source, value in candidates:
        text = _text(value)
        if text is not None:
            return text, source
    return None, None


def _check_argument_types(**arguments: object) -> None:
    for name, value in arguments.items():
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(
                f"{name}= must be a string or None, got {type(value).__name__}"
            )


def check_api_key(key: str | None, source: str) -> None:
    """An HTTP header carries the key: printable ASCII, no spaces. The key is never echoed."""
    if key is not None and not (key.isascii() and key.isprintable() and " " not in key):
        raise ConfigurationError(
            f"{source} holds characters an API key never has (non-ASCII, spaces or control "
            "characters); copy the key again from the dashboard or run `prime login`"
        )


def check_url(url: str, source: str) -> None:
    """An ``http://`` or ``https://`` URL with a host (anything else would cost a round of
    retries before failing)."""
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and parts.hostname:
        return
    shown = url if "@" not in parts.netloc else f"{parts.scheme}://***@{parts.hostname}"
    raise ConfigurationError(
        f"{source} {shown[:200]!r} is not an http:// or https:// URL with a host; "
        "e.g. 'https://api.primeintellect.ai'"
    )


@dataclass(frozen=True, repr=False)
class Settings:
    """Resolved settings. The API key never appears in ``repr``/``str``."""

    api_key: str | None
    team_id: str | None
    base_url: str
    traces_url: str
    frontend_url: str
    mode: str

    def __repr__(self) -> str:
        key = "***" if self.api_key else None
        return (
            f"Settings(api_key={key!r}, team_id={self.team_id!r}, base_url={self.base_url!r}, "
            f"traces_url={self.traces_url!r}, frontend_url={self.frontend_url!r}, "
            f"mode={self.mode!r})"
        )

    __str__ = __repr__

    @classmethod
    def resolve(
        cls,
        *,
        api_key: str | None = None,
        team_id: str | None = None,
        base_url: str | None = None,
        traces_url: str | None = None,
        mode: str | None = None,
        config_path: Path | None = None,
    ) -> Settings:
        """Resolve every setting (argument > environment > config file > default).

        An explicit ``api_key`` wins even when it is ``""`` (meaning: no key). The mode
        is ``mode=`` > ``PRIME_RUNS_MODE`` > ``online`` with an API key, else ``offline``.
        Raises ``ConfigurationError`` (naming the argument, variable or file the value came
        from) for a non-string argument, an unknown mode, ``online`` without a key, and,
        unless the mode is ``disabled``, a key an HTTP header cannot carry or a platform or
        traces URL that is not ``http(s)://`` with a host.
        """
        _check_argument_types(
            api_key=api_key, team_id=team_id, base_url=base_url, traces_url=traces_url, mode=mode
        )
        env: Mapping[str, str] = os.environ
        file = load_config_file(config_path)
        where = f"{config_path or default_config_path()}"

        key, key_source = _resolve_key(api_key, env, file, where)
        team = _first(team_id, env.get(TEAM_ID_ENV), file.get("team_id"))
        base, base_source = _sourced(
            ("base_url=", base_url),
            (BASE_URL_ENV, env.get(BASE_URL_ENV)),
            (BASE_URL_ALIAS_ENV, env.get(BASE_URL_ALIAS_ENV)),
            (f"base_url in {where}", file.get("base_url")),
        )
        traces, traces_source = _sourced(
            ("traces_url=", traces_url),
            (TRACES_URL_ENV, env.get(TRACES_URL_ENV)),
            (f"traces_url in {where}", file.get("traces_url")),
        )
        frontend = _first(env.get(FRONTEND_URL_ENV), file.get("frontend_url"))
        resolved_mode = _resolve_mode(mode, env.get(MODE_ENV), has_key=key is not None)
        if resolved_mode != DISABLED:
            # A disabled run does nothing, so settings it never uses cannot stop it.
            check_api_key(key, key_source or "the API key")
            for url, source in ((base, base_source), (traces, traces_source)):
                if url is not None:
                    check_url(url, source or "a URL")
        return cls(
            api_key=key,
            team_id=team,
            base_url=normalize_api_url(base or DEFAULT_BASE_URL),
            traces_url=normalize_api_url(traces or DEFAULT_TRACES_URL),
            frontend_url=(frontend or DEFAULT_FRONTEND_URL).rstrip("/"),
            mode=resolved_mode,
        )

    def evaluation_url(self, evaluation_id: str) -> str:
        """The dashboard page of an evaluation."""
        return f"{self.frontend_url}/dashboard/evaluations/{evaluation_id}"


def _resolve_key(
    argument: str | None, env: Mapping[str, str], file: Mapping[str, Any], where: str
) -> tuple[str | None, str | None]:
    """The API key and where it came from: ``api_key=`` (even ``""``), else the environment,
    else the config file."""
    if argument is not None:
        return _text(argument), "api_key="
    return _sourced(
        (API_KEY_ENV, env.get(API_KEY_ENV)), (f"api_key in {where}", file.get("api_key"))
    )


def _resolve_mode(argument: str | None, env_value: str | None, *, has_key: bool) -> str:
    allowed = ", ".join(MODES)
    if _text(argument) is not None:
        value, source = _text(argument), "mode="
    elif _text(env_value) is not None:
        value, source = _text(env_value), MODE_ENV
    else:
        return ONLINE if has_key else OFFLINE
    assert value is not None
    mode = value.lower()
    if mode not in MODES:
        raise ConfigurationError(f"{source} {value!r} is not a mode; expected one of: {allowed}")
    if mode == ONLINE and not has_key:
        raise ConfigurationError(
            f"{source} {value!r} needs an API key: pass api_key=, set {API_KEY_ENV}, or run "
            "`prime login`; or use mode='offline' to keep the run in the local archive"
        )
    return mode


_OPT_OUT = ("1", "true", "yes", "on")
_STAY_IN = ("0", "false", "no", "off")


def traces_opt_out(argument: bool | None, config_path: Path | None = None) -> bool:
    """Whether a run stays off Prime Traces (0.1.4's opt-out): ``traces_opt_out=`` >
    ``PRIME_TRACES_OPT_OUT`` > ``traces_opt_out`` in the config file > off. A variable that
    is neither a yes nor a no raises ``ConfigurationError`` before anything is created."""
    if argument is not None:
        return argument
    raw = os.environ.get(TRACES_OPT_OUT_ENV, "").strip()
    if raw:
        if raw.lower() in _OPT_OUT:
            return True
        if raw.lower() in _STAY_IN:
            return False
        raise ConfigurationError(
            f"{TRACES_OPT_OUT_ENV}={raw[:40]!r} is neither true nor false; set it to true to "
            "keep runs off Prime Traces, false (or unset it) to upload to Prime Traces"
        )
    value = load_config_file(config_path).get("traces_opt_out", False)
    if isinstance(value, str):
        return value.strip().lower() in _OPT_OUT
    return bool(value)  # as 0.1.4 read it


def check_register_timeout(value: object, source: str = "register_timeout=") -> float:
    """A registration wait in seconds: a number ``>= 0`` (``inf``: no bound); anything else
    raises ``ConfigurationError`` naming ``source``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigurationError(
            f"{source} {value!r} is not valid: give seconds >= 0 (0: never wait for the "
            f"platform; inf: as long as it takes), or leave it unset for "
            f"{DEFAULT_REGISTER_TIMEOUT:g} s"
        )
    return float(value)


def register_timeout(argument: float | None) -> float:
    """How long ``init()`` waits for the platform to register a run: ``register_timeout=`` >
    ``PRIME_RUNS_REGISTER_TIMEOUT`` > 15 s. A variable that is not a number of seconds
    ``>= 0`` raises ``ConfigurationError``."""
    if argument is not None:
        return check_register_timeout(argument)
    raw = os.environ.get(REGISTER_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_REGISTER_TIMEOUT
    try:
        value: object = float(raw)
    except ValueError:
        value = raw
    return check_register_timeout(value, f"{REGISTER_TIMEOUT_ENV}=")


__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ALIAS_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_FRONTEND_URL",
    "DEFAULT_REGISTER_TIMEOUT",
    "DEFAULT_TRACES_URL",
    "DIR_ENV",
    "DISABLED",
    "FRONTEND_URL_ENV",
    "MODES",
    "MODE_ENV",
    "OFFLINE",
    "ONLINE",
    "REGISTER_TIMEOUT_ENV",
    "TEAM_ID_ENV",
    "TRACES_OPT_OUT_ENV",
    "TRACES_URL_ENV",
    "Settings",
    "check_api_key",
    "check_register_timeout",
    "check_url",
    "default_config_path",
    "load_config_file",
    "normalize_api_url",
    "register_timeout",
    "traces_opt_out",
]

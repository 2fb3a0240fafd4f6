"""What opening any run needs, whatever its kind: what ``init()`` (or a raw ``run`` span)
was given, its keywords checked by type (``check_arguments``, ``configure_exporter()``'s
too) and resolved into settings, config and environments before anything is created;
the run's description, archive and closer. The one way a run opens is
``_runs/opening``; what differs between an evaluation and a training run is its kind
(``_runs/eval_kind``, ``_runs/train_kind``)."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import reprlib
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec

from prime_runs._journal.archive import RunArchive
from prime_runs._runid import check_run_id
from prime_runs._runs.accounting import RAISE
from prime_runs._runs.config import capture_config
from prime_runs._runs.state import WARN
from prime_runs._version import __version__
from prime_runs.errors import ConfigurationError
from prime_runs.platform.environments import check_environments_type, coerce_environments
from prime_runs.settings import (
    API_KEY_ENV,
    DIR_ENV,
    DISABLED,
    MODE_ENV,
    OFFLINE,
    Settings,
    check_register_timeout,
)

logger = logging.getLogger("prime_runs")

DEFAULT_DIR = "prime-runs"

P = ParamSpec("P")


@dataclass
class RunOptions:
    """Everything ``init()`` was given."""

    name: str | None = None
    environments: Sequence[object] | None = None
    model: str | None = None
    framework: str | None = None
    config: object = None
    description: str | None = None
    tags: Sequence[str] = field(default_factory=list)
    team_id: str | None = None
    id: str | None = None
    mode: str | None = None
    dir: str | os.PathLike[str] | None = None
    on_error: str = WARN
    api_key: str | None = None
    base_url: str | None = None
    traces: bool = True
    samples: bool = True
    journal: bool = True
    # The run's OpenTelemetry Resource, as upload provenance (``_provenance``).
    resource: Mapping[str, str] = field(default_factory=dict)
    from_span: bool = False  # a raw `run` span, not init(): hints name span attributes
    # A training run: kind="train", training=TrainingSpec (``_runs/train_kind``).
    kind: str = "eval"
    training: object = None
    # How long init() waits for the platform to register the run (None: the setting's
    # default, see ``settings.register_timeout``); raw spans never wait.
    register_timeout: float | None = None


# -- init()'s keywords, checked by type before anything is created ----------------
#
# Each failure is a ``ConfigurationError`` naming the keyword (``dir=``), what it got and
# what it takes, raised before any request or file write. Values (a mode's spelling, a
# URL's scheme, an API key's characters) are checked where they are resolved, in
# ``settings``.

#: Keywords that take a string or None.
_OPTIONAL_TEXT = (
    "name",
    "model",
    "framework",
    "description",
    "team_id",
    "mode",
    "api_key",
    "base_url",
)
_FLAGS = ("traces", "samples", "journal", "handle_signals")


def _kind(value: object) -> str:
    return type(value).__name__


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Check the keywords present in ``arguments``; absent ones are not checked."""
    for key in _OPTIONAL_TEXT:
        value = arguments.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"{key}= must be a string or None, got {_kind(value)}")
    for key in _FLAGS:
        if key in arguments and not isinstance(arguments[key], bool):
            raise ConfigurationError(f"{key}= must be True or False, got {_kind(arguments[key])}")
    run_id = arguments.get("id")
    if run_id is not None:
        check_run_id(
            run_id,
            source="id=",
            fix="pass the id the platform gave the run (e.g. a hosted evaluation's "
            "$EVALUATION_ID), or leave id= out",
        )
    directory = arguments.get("dir")
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise ConfigurationError(
            f"dir= must be a path (str or os.PathLike), got {_kind(directory)}"
        )
    _check_tags(arguments.get("tags"))
    check_environments_type(arguments.get("environments"))
    _check_014_keywords(arguments)
    if arguments.get("register_timeout") is not None:
        check_register_timeout(arguments["register_timeout"])
    join = arguments.get("join")
    if join is not None and not isinstance(join, (bool, Mapping)):
        raise ConfigurationError(
            f"join= must be True, False, None or a carrier mapping, got {_kind(join)}"
        )


def _check_014_keywords(arguments: Mapping[str, Any]) -> None:
    """0.1.4's ``traces_opt_out=`` and ``finish_timeout=``."""
    opt_out = arguments.get("traces_opt_out")
    if opt_out is not None and not isinstance(opt_out, bool):
        raise ConfigurationError(
            f"traces_opt_out= must be True, False or None (None: {_OPT_OUT_SOURCES}), "
            f"got {_kind(opt_out)}"
        )
    timeout = arguments.get("finish_timeout")
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigurationError(
            f"finish_timeout= must be a number of seconds or None (300 s), got {_kind(timeout)}"
        )
    if (isinstance(timeout, float) and math.isnan(timeout)) or timeout < 0:
        raise ConfigurationError(
            f"finish_timeout={timeout!r} is not valid: give seconds >= 0 (0: do not wait for "
            "uploads; inf: up to 24 hours), or None for the default 300 s"
        )


_OPT_OUT_SOURCES = "PRIME_TRACES_OPT_OUT, then traces_opt_out in ~/.prime/config.json"


def _check_tags(tags: object) -> None:
    if tags is None:
        return
    # A str is iterable: "abc" must not silently become ["a", "b", "c"].
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
        raise ConfigurationError(
            f"tags= must be a list of strings, got {_kind(tags)}; e.g. tags=['baseline']"
        )
    if not isinstance(tags, Collection):
        return  # a one-shot iterable is not consumed here; its list is checked later
    bad = [t for t in tags if not isinstance(t, str)]
    if bad:
        raise ConfigurationError(
            f"tags= must be a list of strings; got a {_kind(bad[0])} entry {reprlib.repr(bad[0])}"
        )


# -- resolved ---------------------------------------------------------------------


@dataclass(repr=False, eq=False)  # no repr: the settings hold the API key
class Resolved:
    """What a run opens from, whatever its kind: ``init()``'s options, what they resolved
    to (``resolve``) and the archive root."""

    opts: RunOptions
    settings: Settings
    config: dict[str, Any]
    environments: list[Any]
    root: Path


def environments_hint(opts: RunOptions) -> str:
    if opts.from_span:
        return "set the run span's prime.run.environments attribute (a list of names)"
    return "pass environments=[...] to init()"


def archive_root(dir: str | os.PathLike[str] | None) -> Path:
    """``dir=`` > ``PRIME_RUNS_DIR`` > ``./prime-runs``."""
    chosen = dir if dir is not None else (os.environ.get(DIR_ENV) or "").strip() or DEFAULT_DIR
    return Path(chosen)


def local_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(4)


def check_on_error(on_error: object) -> str:
    if not isinstance(on_error, str) or on_error not in (WARN, RAISE):
        raise ConfigurationError(
            f"on_error={reprlib.repr(on_error)} is not valid; use 'warn' or 'raise'"
        )
    return on_error


def resolve(opts: RunOptions) -> tuple[Settings, dict[str, Any], list[Any]]:
    """Validate every input before anything is created (errors here always propagate)."""
    # Not asdict(): that deep-copies config=, which may be any object.
    check_arguments({f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)})
    check_on_error(opts.on_error)
    settings = Settings.resolve(
        api_key=opts.api_key, team_id=opts.team_id, base_url=opts.base_url, mode=opts.mode
    )
    if settings.mode == DISABLED:
        return settings, {}, []
    if settings.mode == OFFLINE and settings.api_key is None:
        _say_offline_once(opts.mode)
    config = capture_config(opts.config)
    # Offline runs may name no environment; online ones are checked before registering.
    environments = coerce_environments(opts.environments) if opts.environments else []
    return settings, config, environments


_offline_said = False


def _say_offline_once(mode: str | None) -> None:
    """A run offline only because no key was found says so once per process (0.1.4 warned
    too): a key forgotten in CI would otherwise go unnoticed. Asking for offline is quiet."""
    global _offline_said
    if _offline_said or (mode or os.environ.get(MODE_ENV, "")).strip():
        return
    _offline_said = True
    logger.warning(
        "prime-runs: no API key found, so runs are kept offline in the local archive; to go "
        "online set %s (or pass api_key=, or run `prime login`), or upload later with "
        "`prime-runs sync`. Pass mode='offline' to silence this.",
        API_KEY_ENV,
    )


def describe(
    opts: RunOptions, config: dict[str, Any], environments: list[Any], mode: str
) -> dict[str, Any]:
    return {
        "name": opts.name,
        "environments": [e.label for e in environments],
        # Exactly as given (ids, slugs, version pins), so `sync` resolves the same ones.
        "environment_refs": [
            {k: v for k, v in dataclasses.asdict(e).items() if v} for e in environments
        ],
        "sinks": [s for s, on in (("traces", opts.traces), ("eval_samples", opts.samples)) if on],
        "model": opts.model,
        "framework": opts.framework,
        "description": opts.description,
        "tags": list(opts.tags),
        "config": config,
        "mode": mode,
        "kind": "eval",
        "created_at": time.time(),
        "sdk": f"prime-runs {__version__}",
        "resource": dict(opts.resource),
    }


def offline_archive(root: Path, run_id: str, description: dict[str, Any]) -> RunArchive:
    """An offline run's archive: the run is nothing without it, so it cannot be written is
    a ``ConfigurationError`` saying where to write instead."""
    try:
        return RunArchive.create(root, run_id, description)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the run archive under {str(root)!r} ({exc.strerror}); pass dir= or "
            f"set {DIR_ENV} to a writable folder"
        ) from exc


def online_archive(
    opts: RunOptions, root: Path, run_id: str, description: dict[str, Any]
) -> RunArchive | None:
    """The run's journal, or None when it is off or cannot be written (said once)."""
    if not opts.journal:
        return None
    try:
        return RunArchive.create(root, run_id, description)
    except OSError as exc:
        logger.warning(
            "prime-runs: cannot write the run's journal under %s (%s); records that "
            "fail to upload will not be recoverable by `prime-runs sync`",
            root,
            exc.strerror,
        )
        return None


def closing(work: Callable[P, None], shutdown: Callable[[], None]) -> Callable[P, None]:
    """A run's closer: ``work`` (the close-out), then ``shutdown`` (its clients), always."""

    def close(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            work(*args, **kwargs)
        finally:
            shutdown()

    return close

"""Type checks of ``init()`` / ``configure_exporter()`` keywords, before anything is created.

Each failure is a ``ConfigurationError`` naming the keyword (``dir=``), what it got and
what it takes, raised before any request or file write. Values (a mode's spelling, a URL's
scheme, an API key's characters) are checked where they are resolved, in ``settings``.
"""

from __future__ import annotations

import math
import os
import reprlib
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from prime_runs._runid import check_run_id
from prime_runs.errors import ConfigurationError
from prime_runs.platform.environments import check_environments_type
from prime_runs.settings import check_register_timeout

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


__all__ = ["check_arguments"]

"""FastAPI-shaped request validation (422 with a ``detail`` list)."""

from __future__ import annotations

import json
from typing import Any

from prime_runs.testing._reply import Call, Reply


class Invalid(Exception):
    """A request the platform's validation layer refuses with 422."""

    def __init__(self, kind: str, loc: list[Any], msg: str) -> None:
        super().__init__(msg)
        self.kind = kind
        self.loc = loc
        self.msg = msg

    def reply(self) -> Reply:
        return Reply(422, {"detail": [{"type": self.kind, "loc": self.loc, "msg": self.msg}]})


def body_object(call: Call, *, empty_ok: bool = False) -> dict[str, Any]:
    """The request's JSON object body (``{}`` for an empty body when ``empty_ok``)."""
    if call.json is None:
        if not call.body.strip():
            if empty_ok:
                return {}
            raise Invalid("missing", ["body"], "Field required")
        try:
            json.loads(call.body)
        except ValueError:
            raise Invalid("json_invalid", ["body"], "JSON decode error") from None
    if not isinstance(call.json, dict):
        raise Invalid("dict_type", ["body"], "Input should be a valid dictionary")
    return call.json


def check_fields(
    body: dict[str, Any],
    types: dict[str, type | tuple[type, ...]],
    *,
    forbid_extra: bool = False,
) -> None:
    """Refuse known fields of the wrong type (None is allowed) and, optionally, extras."""
    for key, value in body.items():
        expected = types.get(key)
        if expected is None:
            if forbid_extra:
                raise Invalid("extra_forbidden", ["body", key], "Extra inputs are not permitted")
            continue
        if value is not None and not isinstance(value, expected):
            name = expected.__name__ if isinstance(expected, type) else "value"
            raise Invalid(f"{name}_type", ["body", key], f"Input should be a valid {name}")
    tags = body.get("tags")
    if isinstance(tags, list) and not all(isinstance(t, str) for t in tags):
        raise Invalid("string_type", ["body", "tags"], "Input should be a list of strings")


def int_param(query: dict[str, str], name: str, default: int, *, minimum: int) -> int:
    """An integer query parameter, at least ``minimum``."""
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Invalid("int_parsing", ["query", name], "Input should be an integer") from None
    if value < minimum:
        raise Invalid("greater_than_equal", ["query", name], f"Input should be >= {minimum}")
    return value

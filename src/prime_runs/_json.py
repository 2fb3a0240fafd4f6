"""The one JSON encoding every request body uses: compact, UTF-8, non-ASCII unescaped,
and strict (``NaN``/``Infinity`` are refused here rather than by the server as an opaque 400).

The fast path is always the C encoder with no ``default=`` hook; only a value that turns out
to hold a non-finite float pays for a Python walk (:func:`sanitize_nonfinite`).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["encode_json", "encode_json_lenient", "is_nonfinite_error", "sanitize_nonfinite"]

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON bytes.

    Raises ``ValueError`` for a non-finite float (and for circular references) and
    ``TypeError`` for a value JSON cannot represent.
    """
    return _encoder.encode(value).encode("utf-8")


def is_nonfinite_error(error: ValueError) -> bool:
    """Whether ``error`` is the encoder refusing NaN/Infinity (not a circular reference)."""
    return str(error).startswith("Out of range float")


def sanitize_nonfinite(value: Any) -> Any:
    """A copy of ``value`` with every NaN/±Infinity float replaced by ``None``.

    Only containers that change are copied; an unchanged subtree (or the whole value, when
    nothing is non-finite) is returned as the same object. Tuples that change become lists,
    which encode identically.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        copied: dict[Any, Any] | None = None
        for key, item in value.items():
            clean = sanitize_nonfinite(item)
            if clean is not item:
                if copied is None:
                    copied = dict(value)
                copied[key] = clean
        return value if copied is None else copied
    if isinstance(value, (list, tuple)):
        items: list[Any] | None = None
        for index, item in enumerate(value):
            clean = sanitize_nonfinite(item)
            if clean is not item:
                if items is None:
                    items = list(value)
                items[index] = clean
        return value if items is None else items
    return value


def encode_json_lenient(value: Any) -> tuple[bytes, bool]:
    """Encode like :func:`encode_json`, nulling non-finite floats instead of failing.

    Returns the bytes and whether anything had to be nulled. Tries the strict encoder first,
    so a clean value is encoded exactly once.
    """
    try:
        return encode_json(value), False
    except ValueError as error:
        if not is_nonfinite_error(error):
            raise
    return encode_json(sanitize_nonfinite(value)), True

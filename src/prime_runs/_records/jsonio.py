"""The JSON encodings: compact, UTF-8, non-ASCII unescaped.

Request bodies use :func:`encode_json`, strict (``NaN``/``Infinity`` are refused here rather
than by the server as an opaque 400): the standard library's C encoder with no ``default=``
hook; only a value that turns out to hold a non-finite float pays for a Python walk
(:func:`sanitize_nonfinite`).

Records use :func:`encode_record`: orjson, an order of magnitude faster on record-sized
values, which writes non-finite floats as ``null`` as the record rules ask. Whatever orjson
refuses (an integer beyond 64 bits, a non-string key, a nesting deeper than 255) is encoded
by the standard library exactly as before, so the set of accepted records only grows
(orjson also writes ``uuid.UUID`` and ``enum.Enum`` values). Both write the same JSON
values; floats in exponent form may differ in spelling (``1e-7`` against ``1e-07``), never
in value.
"""

from __future__ import annotations

import codecs
import json
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import orjson

__all__ = [
    "decode_record",
    "encode_json",
    "encode_json_lenient",
    "encode_record",
    "encode_record_marked",
    "is_nonfinite_error",
    "map_changed",
    "may_hold_long_int",
    "sanitize_nonfinite",
]

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# datetime and dataclass values stay refused, as the standard library refuses them.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


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
        return map_changed(value, sanitize_nonfinite)
    return value


def map_changed(items: Sequence[Any], clean: Callable[[Any], Any]) -> Any:
    """``items`` with ``clean`` applied to each: a list copied only when ``clean`` gave some
    item back as another object, else ``items`` itself (a walk that copies on change)."""
    copied: list[Any] | None = None
    for index, item in enumerate(items):
        new = clean(item)
        if new is not item:
            if copied is None:
                copied = list(items)
            copied[index] = new
    return items if copied is None else copied


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


_TEXT_CHUNK = 1024 * 1024  # text checked a chunk at a time: no copy or str of the whole


def is_utf8(data: bytes | memoryview) -> bool:
    """Whether ``data`` is valid UTF-8 (a decode would accept its bytes), checked without
    a ``str`` or a copy of the whole."""
    view = memoryview(data)
    try:
        if len(view) <= _TEXT_CHUNK:
            str(view, "utf-8")
            return True
        decoder = codecs.getincrementaldecoder("utf-8")()  # a character may span two chunks
        for at in range(0, len(view), _TEXT_CHUNK):
            decoder.decode(view[at : at + _TEXT_CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def encode_record(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON bytes, non-finite floats written as ``null``.

    Raises like :func:`encode_json` for what JSON cannot represent. :func:`decode_record`
    reads the bytes back exactly, whichever encoder wrote them.
    """
    return encode_record_marked(value)[0]


def encode_record_marked(value: Any) -> tuple[bytes, bool]:
    """:func:`encode_record`, and whether orjson wrote the bytes. If it did, they hold no
    integer beyond 64 bits (orjson refuses one), so ``decode_record(data, exact=True)``
    may skip the scan for one."""
    try:
        return orjson.dumps(value, option=_ORJSON_OPTIONS), True
    except TypeError:
        pass  # not orjson's: the standard library decides, as before
    return encode_json_lenient(value)[0], False


# Digits map to "0", the bytes a number follows (":", ",", "[") to ",", all else to a space,
# with whitespace and "-" deleted: ",0000..." (20 zeros) then marks an integer that may not
# fit 64 bits. Inside a string the same bytes only cost speed (the exact decoder reads it).
_TOKENS = bytes(
    0x30 if 0x30 <= byte <= 0x39 else 0x2C if byte in b":,[" else 0x20 for byte in range(256)
)
_SKIPPED = b" \t\r\n-"
_LONG_INT = b"," + b"0" * 20


# Above this, a record is decoded by the standard library, one at a time in the process:
# orjson's peak while decoding a long string is about twelve times the record (a 20 MB
# record: 248 MiB), the standard library's about six (115 MiB), and two sinks reading
# records back at once would double it. Below it orjson is faster and the peak small.
LARGE_DECODE = 4 * 1024 * 1024
LARGE_DECODE_LOCK = threading.Lock()


def decode_record(data: bytes | bytearray | memoryview, *, exact: bool = False) -> Any:
    """Decode JSON exactly as ``json.loads`` does, with orjson where that is safe.

    orjson reads an integer beyond 64 bits as a float, so bytes that may hold one (an
    integer of 20 digits or more) go to the standard library. ``exact``: the bytes are
    known to hold none (orjson wrote them, see :func:`encode_record_marked`). Raises
    ``ValueError`` for what is not JSON, or not strict JSON (``NaN`` literals: the caller
    decides what those mean).
    """
    if len(data) > LARGE_DECODE:
        with LARGE_DECODE_LOCK:
            return json.loads(bytes(data), parse_constant=_refuse_constant)
    if not exact and may_hold_long_int(data):
        return json.loads(bytes(data), parse_constant=_refuse_constant)
    return orjson.loads(data)


def may_hold_long_int(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` may hold an integer of 20 digits or more (which orjson would read
    as a float); False means it certainly holds none."""
    return _LONG_INT in bytes(data).translate(_TOKENS, _SKIPPED)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not strict JSON")

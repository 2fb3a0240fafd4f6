"""Reading a record line of a run's archive back: a line is either a record (a JSON object
whose numbers all fit a float) or the reason it is not one.

The archive's readers (``prime-runs show`` and ``sync``) go through :func:`parse_record`, so a
line written by hand or by an older version (``[1,2]``, ``"x"``, an integer with 401 digits)
is rejected and counted, never a crash.
"""

from __future__ import annotations

import json
import re
from contextlib import nullcontext
from typing import Any

import orjson

from prime_runs._records.jsonio import LARGE_DECODE, LARGE_DECODE_LOCK, may_hold_long_int
from prime_runs._records.skeleton import is_slot, outline

# A float overflows above ~1.8e308, so only an integer of 309 digits or more can fail to
# convert. Most lines have none: the C scanner checks that before any Python hook runs.
_LONG_DIGITS = re.compile(rb"\d{309}")

# A \uD800-\uDFFF escape: paired it is one character; alone, no UTF-8 encoder (nor the
# platform) takes the string, so a record holding one cannot be uploaded.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

NOT_JSON = "not valid JSON"
BIG_NUMBER = "a number in it does not fit a 64-bit float (such as 10**400)"
LONE_SURROGATE = "a string in it holds a lone UTF-16 surrogate (such as \\ud800), not valid text"
TOO_DEEP = "nested too deeply to read"


class _TooLarge(ValueError):
    pass


def _checked_int(text: str) -> int:
    try:
        value = int(text)  # past Python's digit limit (4,300) this is a ValueError
        if len(text) >= 309:
            float(value)
    except (OverflowError, ValueError):
        raise _TooLarge(text[:20]) from None
    return value


def parse_record(data: bytes, *, exact: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, None)`` for a usable record line, else ``(None, why it is not one)``.
    ``exact``: orjson wrote the line (see ``_json.encode_record_marked``)."""
    if len(data) <= LARGE_DECODE and (exact or not may_hold_long_int(data)):
        try:
            value = orjson.loads(data)  # exact here, and several times faster
        except ValueError:
            pass  # NaN literals, a lone surrogate, deep nesting...: judged as before
        else:
            return _record_or_why(value)
    try:
        with LARGE_DECODE_LOCK if len(data) > LARGE_DECODE else nullcontext():
            if _LONG_DIGITS.search(data):
                value = json.loads(data, parse_int=_checked_int)
            else:
                value = json.loads(data)
    except _TooLarge:
        return None, BIG_NUMBER
    except RecursionError:
        return None, TOO_DEEP
    except ValueError:  # also bad UTF-8, and integers past Python's digit limit
        return None, NOT_JSON
    if _SURROGATE_ESCAPE.search(data):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return None, LONE_SURROGATE
        except RecursionError:
            return None, TOO_DEEP
    return _record_or_why(value)


def parse_head(data: bytes, *, exact: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`parse_record` for a reader of the record's structure only (its kind, id and
    members): a large record's long strings come back as slots (``_records.skeleton``), so
    reading a 20 MB line back costs about its size, not six times it. Judged as
    :func:`parse_record` judges the whole line."""
    found = outline(data) if len(data) > LARGE_DECODE else None
    if found is None:
        return parse_record(data, exact=exact)
    record, why = parse_record(found[0], exact=exact)
    if record is not None and is_slot(record.get("id")):
        return parse_record(data, exact=exact)  # an id of 64 KiB: read as it is
    return record, why


def id_of_line(data: bytes) -> str | None:
    """The ``id`` of the record on a line, or None (no record, or no string id)."""
    record, _ = parse_head(data)  # a large line: its structure only
    rid = record.get("id") if record is not None else None
    return rid if isinstance(rid, str) else None


def _record_or_why(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    if not isinstance(value, dict):
        return None, f"a JSON {_json_type(value)}, not a record (a JSON object)"
    return value, None


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"

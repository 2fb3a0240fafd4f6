"""A large record read without its long strings: a bounded decode (issue 20).

A 20 MB record is nearly always one or a few long strings (a model's output, an image as
base64) in a small structure. Decoding it whole costs several times its size (the standard
library first makes a ``str`` of the whole document, four bytes a character when one
character needs it), and the ledger's read-back and ``prime-runs sync`` need only its
structure (its kind, id and members), with the long strings written back as the bytes they
already are. :func:`outline` gives the record with every long string literal replaced
by a short slot string, to decode; :func:`splice` writes slots back as the original
literals. Slots also stand for the large values spliced into a sample row
(``_records.rawtraces``), and :class:`Spliced` is such a row, kept as its parts.

Only the slots' *values* differ from the record's: a slot stands for a string of at least
``LONG_STRING`` bytes, which no field a sink reads as a value (an id, a name, a number)
holds, and callers fall back to a whole decode when one does (:func:`is_slot`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prime_runs._records.jsonio import is_utf8

__all__ = [
    "LONG_STRING",
    "Spliced",
    "is_slot",
    "literal_of",
    "outline",
    "slot",
    "splice",
    "splice_once",
]

#: String literals at least this long (quotes included) are left out of a skeleton.
LONG_STRING = 64 * 1024

# Random per process, so a record cannot hold a slot by accident (checked all the same).
SLOT_PREFIX = f"prime-runs:slot:{uuid.uuid4().hex}:"
_PREFIX = SLOT_PREFIX.encode()
_OPEN = b'"' + _PREFIX  # a slot's JSON string starts so, then its number and a quote
# What a whole decode would refuse inside a string: an unknown or short escape, a UTF-16
# surrogate escape (paired or not: the whole decode judges those), a control byte. Two
# checks: a pattern starting with a backslash is searched fast, an alternation is not.
_REFUSED_ESCAPE = re.compile(rb'\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4})|u[dD][89a-fA-F])')
_CONTROL = bytes(range(0x20))
_CHECK_CHUNK = 1024 * 1024  # checked a chunk at a time: no copy or str of the whole


def slot(number: int) -> str:
    return f"{SLOT_PREFIX}{number}"


def is_slot(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(SLOT_PREFIX)


def outline(data: bytes) -> tuple[bytes, list[memoryview]] | None:
    """``data`` with slots for its long strings, and each long string's JSON literal
    (quotes included) as a view of ``data``; None when it has none, or a long string a
    whole decode would refuse or read otherwise (the caller decodes it whole)."""
    if _PREFIX in data:
        return None
    view = memoryview(data)
    pieces: list[bytes | memoryview] = []
    literals: list[memoryview] = []
    last = 0
    for start, end in _literals(data):
        if end - start < LONG_STRING:
            continue
        literal = view[start:end]
        if not _plain(literal):
            return None
        pieces += (view[last:start], b'"' + slot(len(literals)).encode() + b'"')
        literals.append(literal)
        last = end
    if not literals:
        return None
    pieces.append(view[last:])
    return b"".join(pieces), literals


def _literals(data: bytes) -> Iterator[tuple[int, int]]:
    """Where each string literal of ``data`` starts and ends (quotes included). JSON outside
    strings holds no '"', so the quotes found from the start pair up; ``find`` runs at the
    speed of memory, where a pattern would step through a long string a byte at a time."""
    find = data.find
    start = find(b'"')
    while start >= 0:
        end = find(b'"', start + 1)
        while end > 0 and _escaped(data, end):
            end = find(b'"', end + 1)
        if end < 0:
            return  # unterminated: the decode reports it
        yield start, end + 1
        start = find(b'"', end + 1)


def _escaped(data: bytes, quote: int) -> bool:
    """The quote at ``quote`` follows an odd number of backslashes."""
    at = quote - 1
    while data[at] == 0x5C:
        at -= 1
    return (quote - 1 - at) % 2 == 1


def _plain(literal: memoryview) -> bool:
    """A literal a whole decode reads as is: no refused byte or escape, valid UTF-8."""
    if _REFUSED_ESCAPE.search(literal):
        return False
    for at in range(0, len(literal), _CHECK_CHUNK):
        chunk = literal[at : at + _CHECK_CHUNK].tobytes()
        if len(chunk.translate(None, _CONTROL)) != len(chunk):
            return False
    return is_utf8(literal)


Part = bytes | memoryview


def splice(encoded: bytes, piece: Callable[[int], Part | list[Part] | None]) -> list[Part] | None:
    """``encoded`` cut at its slots, each replaced by ``piece(number)`` (parts of it, or None
    for a slot it does not know: the whole splice fails). Join the parts once."""
    out: list[Part] = []
    last = 0
    # Found with bytes.find: a pattern that starts with a quote is tried at every quote.
    at = encoded.find(_OPEN)
    while at >= 0:
        start = at + len(_OPEN)
        end = encoded.find(b'"', start)
        digits = encoded[start:end] if end >= 0 else b""
        if digits.isdigit():  # ASCII digits, as the slot writes its number
            found = piece(int(digits))
            if found is None:
                return None
            out.append(encoded[last:at])
            if isinstance(found, list):
                out += found
            else:
                out.append(found)
            last = end + 1
        at = encoded.find(_OPEN, max(last, at + 1))
    out.append(encoded[last:])
    return out


def splice_once(
    encoded: bytes, pieces: Sequence[Part | list[Part]], literals: Sequence[memoryview] = ()
) -> Spliced | None:
    """``encoded`` with its slots spliced: a skeleton's long strings (``literals``, the
    first slot numbers, any number of times) and then ``pieces``, each exactly once; None
    otherwise (the record quotes a slot: no telling which is which)."""
    base = len(literals)
    seen: list[int] = []

    def piece_of(number: int) -> Part | list[Part] | None:
        if number < base:
            return literals[number]
        seen.append(number - base)
        return pieces[number - base] if number - base < len(pieces) else None

    parts = splice(encoded, piece_of)
    if parts is None or sorted(seen) != list(range(len(pieces))):
        return None
    return Spliced(parts)


class Spliced:
    """An encoded value kept as the parts :func:`splice` gave (views of a record's bytes
    among them), never joined on its way out: a request body is sent from the parts, so a
    row of a 20 MB record costs no copy of it. ``len()`` is its encoded size; ``bytes()``
    joins it (for a caller that needs one buffer)."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts
        self.size = sum(map(len, parts))

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


def literal_of(literals: Sequence[memoryview]) -> Callable[[int], memoryview | None]:
    """A :func:`splice` lookup for a skeleton's long strings."""
    return lambda number: literals[number] if 0 <= number < len(literals) else None

"""Replacing a record's run id in its encoded bytes, without decoding the record.

A run registered after it began (a raw ``run`` span's, or an offline run that
``prime-runs sync`` registers) journals its records under a local id; they are sent
stamped with the platform's id (``Delivery._stamped``, ``_sync/outgoing``). A large
record is never decoded for it: its long strings would cost several times its size.
"""

from __future__ import annotations

from dataclasses import dataclass

from prime_runs._records.jsonio import encode_json

# What stands before a JSON string that begins a key or a value in the encoded record.
_OPENERS = frozenset(b"{[,: \t\r\n")


@dataclass(frozen=True, slots=True)
class Restamp:
    """One run id replaced by another, as whole JSON strings of a record's bytes."""

    old: bytes  # the old id as the record spells it: a JSON string, quotes included
    new: bytes

    @classmethod
    def between(cls, old_id: str, new_id: str) -> Restamp:
        # The ids are spelled as the encoder wrote the record (UTF-8, escaped as JSON).
        return cls(encode_json(old_id), encode_json(new_id))

    def applies(self, data: bytes) -> bool:
        """Whether ``data`` may name the old id (a fast test; ``__call__`` decides)."""
        return self.old in data

    def __call__(self, data: bytes) -> bytes:
        """``data`` with every whole JSON string equal to the old id replaced by the new;
        ``data`` itself when there is none.

        The id is matched with its quotes, not bare: a bare id would also be replaced
        inside any longer string that contains it (a prompt quoting the run, a path). The
        opening quote must begin a string (it follows ``{``, ``[``, ``,``, ``:`` or white
        space), not close an escaped ``\\"`` inside one."""
        old = self.old
        pos = data.find(old)
        if pos < 0:
            return data
        view = memoryview(data)
        parts: list[bytes | memoryview] = []
        start = 0
        while pos >= 0:
            if pos == 0 or data[pos - 1] in _OPENERS:
                parts += (view[start:pos], self.new)
                start = pos + len(old)
                pos = data.find(old, start)
            else:
                pos = data.find(old, pos + 1)
        if not parts:
            return data
        parts.append(view[start:])
        return b"".join(parts)

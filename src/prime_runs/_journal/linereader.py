"""Reading one line of a journal segment as one allocation of its size.

A buffered reader's ``readline()`` gathers a long line in pieces of its buffer's size and
joins them, so a record of 20 MB cost twice its size while it was read, and a third copy
to drop its newline. A line longer than a piece is measured first and then read whole, its
newline skipped rather than cut off; the bytes are read twice from the page cache, once.
"""

from __future__ import annotations

from typing import BinaryIO

#: Lines up to this long are read as they are (the common case: records of kilobytes).
PIECE = 1024 * 1024


def read_line(f: BinaryIO) -> tuple[bytes, int]:
    """The next line of ``f`` without its newline, and the bytes it took in the file (its
    newline included). A torn last line (no newline) comes back with ``taken == len(data)``;
    at the end of the file, ``(b"", 0)``."""
    line = f.readline(PIECE)
    if len(line) < PIECE or line.endswith(b"\n"):
        return (line[:-1], len(line)) if line.endswith(b"\n") else (line, len(line))
    start = f.tell() - len(line)
    size, complete = len(line), False
    del line
    while not complete:
        piece = f.readline(PIECE)
        size += len(piece)
        complete = piece.endswith(b"\n")
        if len(piece) < PIECE and not complete:
            break  # a torn last line
    f.seek(start)
    data = f.read(size - 1 if complete else size)
    if complete:
        f.seek(1, 1)
    return data, size

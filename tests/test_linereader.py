"""A journal line is read whole, as one allocation of its size, whatever its length; a
torn last line is told apart from a complete one."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from prime_runs._journal.linereader import PIECE, read_line


def _lines(path: Path) -> list[tuple[bytes, int]]:
    out = []
    with path.open("rb") as f:
        while True:
            data, taken = read_line(f)
            if taken == 0:
                return out
            out.append((data, taken))


@pytest.mark.parametrize("torn", [b"", b"tail", b"t" * PIECE, b"t" * (PIECE * 2 + 3)])
def test_lines_of_every_length_come_back_as_written(tmp_path: Path, torn: bytes) -> None:
    lines = [b"{}", b"a" * (PIECE - 1), b"b" * PIECE, b"c" * (PIECE * 3 + 5), b"", b"x"]
    path = tmp_path / "segment.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + torn)
    expected = [(line, len(line) + 1) for line in lines]
    if torn:
        expected.append((torn, len(torn)))
    assert _lines(path) == expected


def test_a_long_line_is_read_as_one_allocation_of_its_size(tmp_path: Path) -> None:
    size = 24 * 1024 * 1024
    path = tmp_path / "segment.jsonl"
    path.write_bytes(b"{}\n" + b"z" * size + b"\n")
    with path.open("rb") as f:
        read_line(f)
        tracemalloc.start()
        try:
            data, taken = read_line(f)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (len(data), taken) == (size, size + 1)
    # readline() would join buffer-sized pieces (twice the line) and then cut the newline.
    assert peak < size + 3 * PIECE, f"{peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB line"

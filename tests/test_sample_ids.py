"""A row's sample id is read from its head, so a row of megabytes is neither joined nor
decoded for it; whatever the head cannot settle, the whole row decides."""

from __future__ import annotations

import json

import pytest

from prime_runs._records.skeleton import Spliced
from prime_runs._records.v0rows import sample_id_of


@pytest.mark.parametrize(
    "row",
    [
        b'{"sample_id":"tr-1","x":1}',
        b'{"sample_id":null,"x":1}',
        b'{"sample_id":42}',
        b'{"sample_id":"\\u00e9 \\"q\\"","x":[1]}',
        b'{"x":1,"sample_id":"later"}',  # not the first key: the whole row
        b'{"sample_id": "spaced" , "x": 1}',
    ],
)
def test_the_head_gives_what_the_whole_row_gives(row: bytes) -> None:
    assert sample_id_of(row) == str(json.loads(row).get("sample_id"))


def test_an_id_cut_by_the_first_part_is_read_from_the_whole_row() -> None:
    # A number cut short would read as a smaller one; a string cut short does not close.
    assert sample_id_of(Spliced([b'{"sample_id":12', b'34,"x":1}'])) == "1234"
    long_id = "t" * 5000
    assert sample_id_of(Spliced([b'{"sample_id":"', memoryview(long_id.encode() + b'"}')])) == (
        long_id
    )


def test_a_spliced_row_of_megabytes_is_read_from_its_first_part() -> None:
    big = memoryview(b"x" * (8 * 1024 * 1024))
    row = Spliced([b'{"sample_id":"tr-9","completion":"', big, b'"}'])
    assert sample_id_of(row) == "tr-9"

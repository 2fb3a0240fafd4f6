"""A record the ledger reads back from the journal, made an item again.

An episode with a head (where its id lies, found when it was logged) is not decoded: it was
checked then, and its sample row reads its bytes as for a record held in memory (two whole
decodes cost about 80 µs a verifiers-sized record). Its segment is this process's, appended
only by it, and read at the line's logged size and framing. Any other record read back is
decoded (its structure only) and checked again.
"""

from __future__ import annotations

import orjson

from prime_runs._records.encode import EPISODE, kind_of, record_id, traces_problem
from prime_runs._records.item import Item, RecordKey
from prime_runs._records.lines import parse_head

_HALF = 32  # a head packs the id's offset above its length (``head``)
_LOW = (1 << _HALF) - 1
_SHORT = (1 << 16) - 1  # the id's length, at most


def head(item: Item) -> int:
    """What a sink needs of an episode beyond its bytes: where its id lies (any place its
    JSON string occurs decodes to the id), packed into one number; 0 for another record
    (it is then decoded again)."""
    episode_id = item.record_id
    if episode_id is None or item.problem is not None or not item.exact or item.kind != EPISODE:
        return 0
    quoted = orjson.dumps(episode_id)  # as orjson wrote it into the record
    at = item.data.find(quoted)
    if at < 0 or len(quoted) > _SHORT or at > _LOW:
        return 0
    return at << _HALF | len(quoted)


def from_head(
    data: bytes, key: RecordKey, ref: int, stamps: tuple[int, ...] | None, head: int
) -> Item | None:
    """An episode read back, from what was found when it was logged (``head``); None when
    there is none or its bytes do not read as then (it is then decoded and checked)."""
    if not head:
        return None
    at, length = head >> _HALF, head & _SHORT
    try:
        episode_id = orjson.loads(memoryview(data)[at : at + length])
    except ValueError:
        return None
    if episode_id.__class__ is not str or data[0:1] != b"{":
        return None
    return Item(EPISODE, data, key, None, episode_id, None, ref, True, stamps)


def recovered(
    data: bytes, key: RecordKey, ref: int, exact: bool, stamps: tuple[int, ...] | None
) -> Item:
    """A record read back from the journal, with what was found at log time found again."""
    record, _problem = parse_head(data, exact=exact)  # its long strings are not needed
    if record is None:
        return Item("trace", data, key, None, None, None, ref)  # the sink rejects it
    kind = kind_of(record)
    problem = traces_problem(kind, record)
    return Item(kind, data, key, problem, record_id(record), None, ref, exact, stamps=stamps)

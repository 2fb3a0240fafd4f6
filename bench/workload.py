"""The benchmark workloads: episodes derived from the fixture records.

Every episode is a copy of one fixture episode (``tests/data/episodes.jsonl``)
with a fresh episode id and fresh member trace ids (so nothing repeats inside a
run or across runs). Three workloads (``WORKLOADS``):

* ``mixed``: each copy padded to a size class (~5 KB, ~50 KB, ~1 MB) by appending
  text to its assistant messages;
* ``verifiers``: the fixture records as they are (unpadded, ~9 KB on average),
  the size verifiers actually produces, taken in turn;
* ``dicts``: the same records, all plain mappings, two of every three keeping the
  fixture's ``run`` block (which names another run id, as records of an earlier or
  offline run do) and the third without one;
* ``large``: plain mappings of about 15 MiB each (a model output that long in the
  summary trace's last assistant message), for CPU per MiB; not run by default: ask
  for it by name with a few dozen ``--episodes``, not thousands.

Except in ``dicts``, episodes alternate between two forms a producer hands over:

* even positions: an ``EpisodeObject``, standing in for a verifiers ``Episode``
  (verifiers is not installed in the benchmark environments): ``id`` and
  ``traces`` attributes, and ``to_record()`` returning a freshly built dict,
  copied container by container the way a pydantic ``model_dump`` builds one,
  so that calling it costs what the real call costs;
* odd positions: the plain JSON mapping.

This module runs under both the project's and the peer's interpreter, so it
uses the standard library only.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "data" / "episodes.jsonl"

#: The workloads ``Generator.workload`` builds.
WORKLOADS = ("mixed", "verifiers", "dicts", "large")
#: What a run measures unless told (``large`` is asked for by name, with few episodes).
DEFAULT_WORKLOADS = ("mixed", "verifiers", "dicts")

#: The encoded size of a ``large`` episode's long message.
LARGE_BYTES = 15 * 1024 * 1024

#: Size classes in bytes of compact UTF-8 JSON.
SIZES: dict[str, int] = {"5KB": 5 * 1024, "50KB": 50 * 1024, "1MB": 1024 * 1024}


#: The class of position ``i``: one in 50 is ~1 MB, one in 5 is ~50 KB, the rest ~5 KB.
#: 2,000 episodes come to about 70 MB of JSON.
def size_class(index: int) -> str:
    if index % 50 == 49:
        return "1MB"
    if index % 5 == 2:
        return "50KB"
    return "5KB"


_WORDS = (
    "the model answer reasoning step tool call result check value function return "
    "because therefore first second then finally compute total sum list item index "
    "assistant user system note lookup key error retry token output input prompt "
    "répondre déjà naïve façade größe straße привет 你好 数据 🙂 ✓ — … "
    "x = y + 1 def f(a, b): return a * b  if n > 0: n -= 1 else: break"
).split()


def _pad_pool(chars: int, seed: int) -> str:
    """Prose-like filler: random words from a small vocabulary compress about as
    well as model output does, unlike a run of one repeated character."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        sep = "\n" if rng.random() < 0.05 else " "
        parts.append(word + sep)
        size += len(word) + 1
    return "".join(parts)


def encode(record: Mapping[str, Any]) -> bytes:
    """The canonical encoding: compact UTF-8 JSON (what every side uploads)."""
    return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _copy_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_tree(item) for item in value]
    return value


class TraceObject:
    """A member trace as verifiers hands it over: ``id`` and ``to_record()``."""

    __slots__ = ("_data", "id")

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self.id = data["id"]

    def to_record(self) -> dict[str, Any]:
        return _copy_tree(self._data)


class EpisodeObject:
    """An episode as verifiers hands it over: ``id``, ``traces``, ``to_record()``.

    ``to_record()`` builds a new dict on every call (copying every container,
    sharing the immutable leaves), like a pydantic dump; mutating the result
    never changes the object.
    """

    __slots__ = ("_data", "id", "traces")

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self.id = data["id"]
        self.traces = [TraceObject(trace) for trace in data["traces"]]

    def to_record(self) -> dict[str, Any]:
        return _copy_tree(self._data)


def as_record(episode: Any) -> dict[str, Any]:
    """The JSON mapping of either form."""
    return episode.to_record() if isinstance(episode, EpisodeObject) else episode


@dataclass
class Episode:
    """One workload item: what the producer logs, and its size class."""

    payload: Any  # EpisodeObject or dict
    size: str
    nbytes: int


def _load_fixture() -> list[dict[str, Any]]:
    with FIXTURE.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _paddable(record: Mapping[str, Any]) -> bool:
    traces = record.get("traces") or []
    return bool(traces) and all(_assistant_nodes(trace) for trace in traces)


def _assistant_nodes(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        node
        for node in trace.get("nodes") or []
        if isinstance(node.get("message"), dict) and node["message"].get("role") == "assistant"
    ]


class Generator:
    """Builds episodes with unique ids; ``salt`` keeps separate runs apart."""

    def __init__(self, salt: int | None = None, seed: int = 7) -> None:
        self._salt = random.getrandbits(32) if salt is None else salt
        fixture = _load_fixture()
        paddable = [record for record in fixture if _paddable(record)]
        natural = {id(record): len(encode(record)) for record in paddable}
        self._fixture = fixture
        self._bases: dict[str, list[dict[str, Any]]] = {
            # The small class starts from the fixtures already under 5 KB.
            name: [record for record in paddable if natural[id(record)] <= target]
            for name, target in SIZES.items()
        }
        self._natural = natural
        self._pool = _pad_pool(SIZES["1MB"] + 64 * 1024, seed)
        # Bytes of encoded JSON per pool character (multi-byte UTF-8, escaped newlines).
        self._bytes_per_char = (len(encode({"c": self._pool})) - 8) / len(self._pool)
        self._rng = random.Random(seed)

    def _ids(self, index: int, member: int | None = None) -> str:
        if member is None:
            return f"{self._salt:08x}{index:016x}00000000"
        return f"{self._salt:08x}{index:016x}{member + 1:08x}"

    def _fresh(self, base: Mapping[str, Any], index: int) -> dict[str, Any]:
        """A copy of ``base`` with fresh episode and member trace ids."""
        record = dict(base)
        record["id"] = self._ids(index)
        traces = []
        for member, trace in enumerate(base.get("traces") or []):
            copy = dict(trace)
            copy["id"] = self._ids(index, member)
            copy["nodes"] = [dict(node) for node in trace.get("nodes") or []]
            traces.append(copy)
        record["traces"] = traces
        return record

    def record(self, index: int, size: str) -> dict[str, Any]:
        """A fresh episode mapping of roughly ``SIZES[size]`` bytes."""
        bases = self._bases[size]
        base = bases[index % len(bases)]
        record = self._fresh(base, index)
        traces = record["traces"]
        missing = SIZES[size] - self._natural[id(base)]
        if missing > 0:
            targets = [node for trace in traces for node in _assistant_nodes(trace)]
            share = int(missing / self._bytes_per_char) // len(targets)
            for node in targets:
                # A slice at a varying offset: text differs between episodes.
                start = self._rng.randrange(0, len(self._pool) - share)
                message = dict(node["message"])
                padding = self._pool[start : start + share]
                message["content"] = f"{message.get('content') or ''} {padding}"
                node["message"] = message
        return record

    def episode(self, index: int, size: str | None = None) -> Episode:
        size = size or size_class(index)
        record = self.record(index, size)
        nbytes = len(encode(record))
        payload: Any = EpisodeObject(record) if index % 2 == 0 else record
        return Episode(payload=payload, size=size, nbytes=nbytes)

    def episodes(self, count: int) -> list[Episode]:
        return [self.episode(index) for index in range(count)]

    def verifiers(self, count: int) -> list[Episode]:
        """``count`` fixture records as they are (unpadded), fresh ids, taken in turn."""
        episodes = []
        for index in range(count):
            record = self._fresh(self._fixture[index % len(self._fixture)], index)
            payload: Any = EpisodeObject(record) if index % 2 == 0 else record
            episodes.append(Episode(payload=payload, size="fixture", nbytes=len(encode(record))))
        return episodes

    def dicts(self, count: int) -> list[Episode]:
        """The ``verifiers`` records as plain mappings; every third without a ``run`` block."""
        episodes = []
        for index in range(count):
            record = self._fresh(self._fixture[index % len(self._fixture)], index)
            if index % 3 == 2:
                record.pop("run", None)
            episodes.append(Episode(payload=record, size="fixture", nbytes=len(encode(record))))
        return episodes

    def large(self, count: int) -> list[Episode]:
        """``count`` plain mappings of about 15 MiB, each a different slice of the pool."""
        chars = int(LARGE_BYTES / self._bytes_per_char)
        pool = self._pool * (chars // len(self._pool) + 2)
        episodes = []
        for index in range(count):
            base = self._bases["5KB"][index % len(self._bases["5KB"])]
            record = self._fresh(base, index)
            node = _assistant_nodes(record["traces"][0])[-1]
            start = self._rng.randrange(0, len(pool) - chars)
            node["message"] = dict(node["message"], content=pool[start : start + chars])
            episodes.append(Episode(payload=record, size="15MB", nbytes=len(encode(record))))
        return episodes

    def workload(self, name: str, count: int) -> list[Episode]:
        """The ``count`` episodes of workload ``name`` (one of ``WORKLOADS``)."""
        if name == "mixed":
            return self.episodes(count)
        if name == "verifiers":
            return self.verifiers(count)
        if name == "dicts":
            return self.dicts(count)
        if name == "large":
            return self.large(count)
        raise ValueError(f"unknown workload {name!r}; expected one of {WORKLOADS}")

    def stream(self, count: int, size: str = "5KB", start: int = 0) -> Iterator[Any]:
        """``count`` payloads built one at a time (nothing is kept): the burst."""
        for index in range(start, start + count):
            record = self.record(index, size)
            yield EpisodeObject(record) if index % 2 == 0 else record

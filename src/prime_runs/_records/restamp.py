"""A record journaled under a run's local id, sent under the platform's: only its stamps
change.

A run registered after it began (a raw ``run`` span's, or an offline run that
``prime-runs sync`` registers) journals its records stamped with a local id. They are sent
with ``run.id`` of the envelope and of each member trace set to the platform's id, and
nothing else changed: a producer may read the local id and quote it anywhere in its
content (contract §10.2). The encoder says where it wrote the stamps (``encode(locate=
True)``, ``Item.stamps``), and the new id is written at those offsets, without decoding the
record: by the live delivery (``Delivery._stamped``) and by ``prime-runs sync``
(``_sync/outgoing``), which finds them in the journal's note of them (``noted``) or by the
encoder's own rule, counting the id in the record's bytes (``stamp_sites``).

Only a record journaled by an earlier version, whose content names the id, has neither:
it is decoded, given the new id where its stamps hold the old one, and encoded again (a
large one without its long strings, ``_records/skeleton``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prime_runs._records.encode import stamp_sites
from prime_runs._records.item import Item, RecordKey
from prime_runs._records.jsonio import LARGE_DECODE, encode_json, encode_record
from prime_runs._records.lines import parse_record
from prime_runs._records.skeleton import literal_of, outline, splice


@dataclass(frozen=True, slots=True)
class Restamp:
    """Records stamped with run id ``old_id``, sent under ``new_id``."""

    old_id: str
    new_id: str
    old: bytes  # the ids as the encoder spells them: JSON strings, quotes included
    new: bytes
    # Where the journal noted the stamps of a record whose content names the id too.
    noted: Mapping[RecordKey, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def between(
        cls, old_id: str, new_id: str, noted: Mapping[RecordKey, tuple[int, ...]] | None = None
    ) -> Restamp:
        return cls(old_id, new_id, encode_json(old_id), encode_json(new_id), noted or {})

    def at(self, data: bytes, stamps: tuple[int, ...]) -> bytes | None:
        """``data`` with the new id at ``stamps``; None unless each holds the old id."""
        old, size = self.old, len(self.old)
        if not stamps or not all(data.startswith(old, at) for at in stamps):
            return None
        view = memoryview(data)
        parts: list[bytes | memoryview] = []
        last = 0
        for at in stamps:
            parts += (view[last:at], self.new)
            last = at + size
        parts.append(view[last:])
        return b"".join(parts)

    def item(self, item: Item) -> Item:
        """``item`` as it is sent under the new id; itself when its id could not change."""
        stamps = item.stamps
        if stamps is None:
            return item
        data = self.at(item.data, stamps)
        if data is None:  # stamps not known (never seen): decoded and encoded again
            data = self.reencoded(item.data) or item.data
        return dataclasses.replace(item, data=data, stamps=None)

    def line(self, key: RecordKey, data: bytes, record: Mapping[str, Any]) -> bytes | None:
        """The journal's line ``data`` at ``key`` (``record``: what ``lines.parse_head``
        read of it) as it is sent under the new id; None when it cannot be."""
        ids = _stamp_ids(record)
        if self.old_id not in ids:
            return data  # stamped with another id (logged once the run was registered)
        noted = self.noted.get(key)
        found = self.at(data, noted) if noted is not None else None
        if found is None and all(run_id == self.old_id for run_id in ids):
            # The encoder's rule: when the id occurs as often as there are stamps, each
            # occurrence is one. Otherwise the content names it too (and no note says where).
            sites = stamp_sites(data, self.old, len(ids))
            found = self.at(data, sites) if sites is not None else None
        return found if found is not None else self.reencoded(data)

    def reencoded(self, data: bytes) -> bytes | None:
        """``data`` decoded, the new id set where a stamp holds the old, encoded again
        (for a record whose stamps are not known); None when it does not decode."""
        found = outline(data) if len(data) > LARGE_DECODE else None
        small, literals = found if found is not None else (data, None)
        try:
            record, _why = parse_record(small)
            if record is None:
                return None
            encoded = encode_record(self._given(record))
        except (ValueError, TypeError, RecursionError):
            return None
        if literals is None:
            return encoded
        parts = splice(encoded, literal_of(literals))
        return None if parts is None else b"".join(parts)

    def _given(self, record: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``record`` with the new id on each stamp holding the old."""
        copy = dict(record)
        if isinstance(record.get("run"), dict):
            copy["run"] = self._run(record["run"])
        traces = record.get("traces")
        if isinstance(traces, list):
            copy["traces"] = [
                dict(member, run=self._run(member["run"]))
                if isinstance(member, dict) and isinstance(member.get("run"), dict)
                else member
                for member in traces
            ]
        return copy

    def _run(self, run: dict[str, Any]) -> dict[str, Any]:
        return dict(run, id=self.new_id) if run.get("id") == self.old_id else run


def _stamp_ids(record: Mapping[str, Any]) -> list[Any]:
    """The ``run.id`` of the envelope and of each mapping member (None without one): one
    per stamp ``encode.stamp`` writes."""

    def run_id(value: Any) -> Any:
        run = value.get("run")
        return run.get("id") if isinstance(run, dict) else None

    traces = record.get("traces")
    members = traces if isinstance(traces, list) else []
    return [run_id(record), *(run_id(m) for m in members if isinstance(m, dict))]

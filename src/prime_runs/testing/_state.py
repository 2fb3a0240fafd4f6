"""Everything the stand-in stores, behind one lock."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from prime_runs.testing._records import RecordedRequest


def utc_now() -> str:
    """The current time as ISO-8601 UTC with a ``Z`` suffix."""
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Upload:
    """One committed traces upload request."""

    upload_id: str
    line_format: str
    context: dict[str, Any]
    trace_ids: list[str]
    episode_ids: list[str]

    @property
    def receipt(self) -> dict[str, str]:
        return {"upload_id": self.upload_id, "status": "committed"}


@dataclass
class Rejection:
    """A test hook: uploads naming this id are refused with ``status``/``code``."""

    status: int
    code: str


@dataclass
class State:
    """The stand-in's memory. Every read and write holds ``lock``.

    Indexes are kept per key, so no request scans all stored data.
    """

    lock: threading.RLock = field(default_factory=threading.RLock)
    requests: list[RecordedRequest] = field(default_factory=list)
    envs_by_name: dict[str, dict[str, Any]] = field(default_factory=dict)
    envs_by_slug: dict[str, dict[str, Any]] = field(default_factory=dict)
    env_names_by_id: dict[str, str] = field(default_factory=dict)
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: dict[str, list[Any]] = field(default_factory=dict)
    traces: dict[str, dict[str, Any]] = field(default_factory=dict)
    trace_writes: dict[str, int] = field(default_factory=dict)
    episodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    episode_writes: dict[str, int] = field(default_factory=dict)
    receipts: list[dict[str, str]] = field(default_factory=list)
    uploads: dict[str, Upload] = field(default_factory=dict)
    rejections: dict[str, Rejection] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    eval_counter: int = 0
    # Training runs (contract Appendix A); see _training_api.
    train_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    train_metrics: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    presigned: dict[str, dict[str, Any]] = field(default_factory=dict)
    objects: dict[str, bytes] = field(default_factory=dict)
    train_samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    train_counter: int = 0

    def clear(self) -> None:
        """Forget everything stored (requests, data, hooks, counters)."""
        with self.lock:
            fresh = State(lock=self.lock)
            for name in self.__dataclass_fields__:
                if name != "lock":
                    setattr(self, name, getattr(fresh, name))

    def add_environment(self, owner: str | None, name: str, env_id: str) -> dict[str, Any]:
        """Register an environment. Without an owner it is the caller's own: resolvable by
        name (and by the slug ``standin/<name>``); with one, only by its ``owner/name`` slug."""
        doc: dict[str, Any] = {"id": env_id, "name": name, "owner": {"name": owner or "standin"}}
        with self.lock:
            if owner is None:
                self.envs_by_name[name] = doc
            self.envs_by_slug[f"{doc['owner']['name']}/{name}"] = doc
            self.env_names_by_id[env_id] = name
        return doc

    def commit_upload(
        self,
        upload: Upload,
        traces: list[dict[str, Any]],
        episodes: list[dict[str, Any]],
    ) -> tuple[Upload, bool]:
        """Store an upload atomically; return (the committed upload, replayed?).

        A digest committed earlier (perhaps by a concurrent identical request) is not
        stored again: the earlier upload is returned with replayed=True.
        """
        with self.lock:
            earlier = self.uploads.get(upload.upload_id)
            if earlier is not None:
                return earlier, True
            for doc in traces:
                trace_id = doc["id"]
                self.traces[trace_id] = doc
                self.trace_writes[trace_id] = self.trace_writes.get(trace_id, 0) + 1
            for envelope in episodes:
                episode_id = envelope["id"]
                self.episodes[episode_id] = envelope
                self.episode_writes[episode_id] = self.episode_writes.get(episode_id, 0) + 1
            self.uploads[upload.upload_id] = upload
            self.receipts.append(upload.receipt)
            return upload, False

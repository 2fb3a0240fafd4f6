"""The Prime Traces routes: upload (multipart JSONL) and raw reads."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import time
import zlib
from typing import Any

from prime_runs._records.jsonio import decode_record
from prime_runs.testing._multipart import MultipartError, boundary_of, parse_multipart
from prime_runs.testing._records import RecordedRequest
from prime_runs.testing._reply import Call, Reply, Settings, traces_error
from prime_runs.testing._state import State, Upload

MIB = 1024 * 1024
MAX_UPLOAD_BYTES = 256 * MIB
MAX_LINE_BYTES = 64 * MIB
MAX_ROWS = 1_000_000
#: The service's created-at window (record-schema §5): 365 days back, 300 s ahead.
WINDOW_PAST_SECONDS = 365 * 24 * 3600
WINDOW_FUTURE_SECONDS = 300

_KEY = re.compile(r"sha256:([0-9a-f]{64})")


class _Rejected(Exception):
    """A 400-class refusal of the whole upload."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


class TracesApi:
    """Handlers for ``traces_upload``, ``traces_get`` and ``episodes_get``."""

    def __init__(self, state: State, settings: Settings) -> None:
        self._state = state
        self._settings = settings

    def upload(self, call: Call) -> Reply:
        try:
            return self._upload(call)
        except _Rejected as exc:
            return traces_error(exc.status, exc.code, str(exc))

    def get_trace(self, call: Call) -> Reply:
        with self._state.lock:
            doc = self._state.traces.get(call.params["id"])
        if doc is None:
            return traces_error(404, "trace_not_found", "trace not found")
        return Reply(200, doc)

    def get_episode(self, call: Call) -> Reply:
        with self._state.lock:
            doc = self._state.episodes.get(call.params["id"])
        if doc is None:
            return traces_error(404, "episode_not_found", "episode not found")
        return Reply(200, doc)

    # -- upload steps, in the order the checks run ---------------------------------------

    def _upload(self, call: Call) -> Reply:
        record = call.record
        metadata, data = self._parts(call, record)
        record.context = self._context(metadata)
        line_format = self._line_format(call.headers.get("x-prime-line-format"))
        record.line_format = line_format
        key = call.headers.get("idempotency-key")
        record.idempotency_key = key
        match = _KEY.fullmatch(key or "")
        if match is None:
            raise _Rejected("invalid_idempotency_key", "expected Idempotency-Key sha256:<64 hex>")
        if len(data) > MAX_UPLOAD_BYTES:
            raise _Rejected("upload_too_large", f"upload exceeds {MAX_UPLOAD_BYTES} bytes")
        digest = hashlib.sha256(data).hexdigest()
        if digest != match.group(1):
            raise _Rejected("digest_mismatch", "Idempotency-Key does not match the traces bytes")
        docs = _parse_lines(data)
        if self._settings.keep_documents:
            record.lines = docs
        with self._state.lock:
            earlier = self._state.uploads.get(digest)
        if earlier is not None:
            return self._replay(call, earlier, line_format)
        traces, episodes = self._validate(docs, line_format)
        if not self._settings.keep_documents:
            traces = [{"id": t["id"]} for t in traces]
            episodes = [{"id": e["id"], "traces": e["traces"]} for e in episodes]
        upload = Upload(
            digest,
            line_format,
            record.context,
            [t["id"] for t in traces],
            [e["id"] for e in episodes],
        )
        committed, replayed = self._state.commit_upload(upload, traces, episodes)
        if replayed:
            return self._replay(call, committed, line_format)
        return Reply(201, upload.receipt)

    def _replay(self, call: Call, earlier: Upload, line_format: str) -> Reply:
        if earlier.line_format != line_format:
            raise _Rejected(
                "line_format_conflict",
                f"these bytes were committed under line format {earlier.line_format!r}",
                status=409,
            )
        call.record.replayed = True
        return Reply(200, earlier.receipt)

    def _parts(self, call: Call, record: RecordedRequest) -> tuple[Any, bytes]:
        boundary = boundary_of(call.headers.get("content-type", ""))
        if boundary is None:
            raise _Rejected("malformed_encoding", "expected a multipart/form-data body")
        try:
            parts = parse_multipart(call.body, boundary)
        except MultipartError as exc:
            raise _Rejected("malformed_encoding", str(exc)) from None
        metadata = [p for p in parts if p.name == "metadata"]
        traces = [p for p in parts if p.name == "traces"]
        if len(metadata) != 1:
            raise _Rejected("invalid_metadata", "expected exactly one metadata part")
        if len(traces) != 1:
            raise _Rejected("malformed_encoding", "expected exactly one traces part")
        try:
            meta = json.loads(metadata[0].data)
        except ValueError:
            raise _Rejected("invalid_metadata", "metadata part is not JSON") from None
        part = traces[0]
        encoding = part.headers.get("content-encoding", "").strip().lower()
        if encoding in ("", "identity"):
            return meta, part.data
        if encoding != "gzip":
            raise _Rejected("malformed_encoding", f"unsupported Content-Encoding {encoding!r}")
        record.gzip = True
        try:
            return meta, gzip.decompress(part.data)
        except (OSError, EOFError, zlib.error):
            raise _Rejected("malformed_encoding", "traces part is not valid gzip") from None

    @staticmethod
    def _context(metadata: Any) -> dict[str, Any]:
        if not isinstance(metadata, dict):
            raise _Rejected("invalid_metadata", "metadata must be a JSON object")
        version = metadata.get("schema_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise _Rejected("invalid_metadata", "metadata.schema_version must be an integer")
        if version != 1:
            raise _Rejected("unsupported_schema_version", f"schema_version {version} unsupported")
        context = metadata.get("context", {})
        if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
            raise _Rejected("invalid_metadata", "metadata.context must map names to strings")
        return context

    @staticmethod
    def _line_format(header: str | None) -> str:
        if header is None or header == "trace":
            return "trace"
        if header == "episode":
            return "episode"
        raise _Rejected("line_format_mismatch", f"unknown X-Prime-Line-Format {header!r}")

    def _validate(
        self, docs: list[Any], line_format: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Check every line; return (trace documents, episode envelopes) to store."""
        if not docs:
            raise _Rejected("invalid_trace", "the upload holds no lines")
        window = time.time() if self._settings.check_time_window else None
        traces: list[dict[str, Any]] = []
        episodes: list[dict[str, Any]] = []
        if line_format == "trace":
            for number, doc in enumerate(docs, start=1):
                if isinstance(doc, dict) and isinstance(doc.get("traces"), list):
                    raise _Rejected(
                        "line_format_mismatch",
                        f"line {number} is an episode; send X-Prime-Line-Format: episode",
                    )
                _check_trace(doc, f"line {number}", window)
                traces.append(doc)
        else:
            for number, doc in enumerate(docs, start=1):
                envelope, members = _check_episode(doc, f"line {number}", window)
                episodes.append(envelope)
                traces.extend(members)
        if len(traces) + len(episodes) > MAX_ROWS:
            raise _Rejected("too_many_traces_in_upload", f"more than {MAX_ROWS} rows")
        _check_unique(traces, "duplicate_trace_id", "trace")
        _check_unique(episodes, "duplicate_episode_id", "episode")
        self._check_rejections(traces, episodes)
        return traces, episodes

    def _check_rejections(
        self, traces: list[dict[str, Any]], episodes: list[dict[str, Any]]
    ) -> None:
        with self._state.lock:
            rejections = dict(self._state.rejections)
        if not rejections:
            return
        for doc in (*episodes, *traces):
            rejection = rejections.get(doc["id"])
            if rejection is not None:
                raise _Rejected(rejection.code, f"rejected record {doc['id']}", rejection.status)


def _parse_lines(data: bytes) -> list[Any]:
    """Parse the JSONL bytes (split on LF; whitespace-only lines skipped) exactly once."""
    docs: list[Any] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line or line.isspace():
            continue
        if len(line) > MAX_LINE_BYTES:
            raise _Rejected("trace_too_large", f"line {number} exceeds {MAX_LINE_BYTES} bytes")
        try:
            docs.append(decode_record(line))  # strict and exact, and fast (see _json)
            continue
        except ValueError:
            pass  # not UTF-8, a lone surrogate escape...: judged below as before
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise _Rejected("malformed_encoding", f"line {number} is not UTF-8") from None
        try:
            docs.append(json.loads(text, parse_constant=_no_constants))
        except ValueError:
            raise _Rejected("invalid_trace", f"line {number} is not strict JSON") from None
    return docs


def _check_trace(doc: Any, where: str, now: float | None) -> None:
    if not isinstance(doc, dict):
        raise _Rejected("invalid_trace", f"{where}: a trace must be a JSON object")
    trace_id = doc.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise _Rejected("invalid_trace", f"{where}: a trace needs a non-empty string id")
    timing = doc.get("timing")
    start = timing.get("start") if isinstance(timing, dict) else None
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise _Rejected("invalid_trace", f"{where}: trace {trace_id} needs a numeric timing.start")
    if now is not None and not (now - WINDOW_PAST_SECONDS <= start <= now + WINDOW_FUTURE_SECONDS):
        raise _Rejected(
            "created_at_out_of_window", f"{where}: trace {trace_id} timing.start out of window"
        )


def _check_episode(
    doc: Any, where: str, now: float | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Validate an episode line; return (envelope with member ids, member documents)."""
    if not isinstance(doc, dict):
        raise _Rejected("invalid_trace", f"{where}: an episode must be a JSON object")
    episode_id = doc.get("id")
    if not isinstance(episode_id, str) or not episode_id:
        raise _Rejected("invalid_trace", f"{where}: an episode needs a non-empty string id")
    if "traces" not in doc:
        raise _Rejected("line_format_mismatch", f"{where}: an episode line needs `traces`")
    members = doc["traces"]
    if not isinstance(members, list):
        raise _Rejected("invalid_trace", f"{where}: episode `traces` must be a list")
    for index, member in enumerate(members):
        _check_trace(member, f"{where} trace {index}", now)
    envelope = {k: v for k, v in doc.items() if k != "traces"}
    envelope["traces"] = [m["id"] for m in members]
    return envelope, members


def _check_unique(docs: list[dict[str, Any]], code: str, kind: str) -> None:
    seen: set[str] = set()
    for doc in docs:
        if doc["id"] in seen:
            raise _Rejected(code, f"{kind} id {doc['id']} appears twice in this upload")
        seen.add(doc["id"])

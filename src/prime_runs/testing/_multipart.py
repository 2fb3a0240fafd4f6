"""A small multipart/form-data parser for the traces upload body."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BOUNDARY = re.compile(r'boundary=(?:"([^"]+)"|([^;\s]+))', re.IGNORECASE)
_PARAM = re.compile(r'(\w+)="([^"]*)"')


class MultipartError(ValueError):
    """The body is not well-formed multipart/form-data."""


@dataclass(frozen=True)
class Part:
    """One form part: its headers (lower-case keys), form name, filename and raw body."""

    headers: dict[str, str]
    name: str | None
    filename: str | None
    data: bytes


def boundary_of(content_type: str) -> str | None:
    """The boundary parameter of a ``multipart/form-data`` content type, or None."""
    if not content_type.lower().startswith("multipart/form-data"):
        return None
    match = _BOUNDARY.search(content_type)
    if match is None:
        return None
    return match.group(1) or match.group(2)


def parse_multipart(body: bytes, boundary: str) -> list[Part]:
    """Split ``body`` into its parts; raise MultipartError when it is malformed.

    Works on bytes with ``find`` so a large part is sliced once, never scanned line by line.
    """
    delimiter = b"--" + boundary.encode("latin-1")
    start = body.find(delimiter)
    if start < 0:
        raise MultipartError("multipart boundary not found")
    parts: list[Part] = []
    position = start + len(delimiter)
    separator = b"\r\n" + delimiter
    while True:
        if body.startswith(b"--", position):
            return parts
        if not body.startswith(b"\r\n", position):
            raise MultipartError("malformed multipart delimiter")
        position += 2
        header_end = body.find(b"\r\n\r\n", position)
        if header_end < 0:
            raise MultipartError("multipart part without a header terminator")
        end = body.find(separator, header_end + 4)
        if end < 0:
            raise MultipartError("unterminated multipart part")
        headers = _parse_headers(body[position:header_end])
        params = dict(_PARAM.findall(headers.get("content-disposition", "")))
        data = body[header_end + 4 : end]
        parts.append(Part(headers, params.get("name"), params.get("filename"), data))
        position = end + len(separator)


def _parse_headers(block: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw in block.split(b"\r\n"):
        if not raw:
            continue
        name, colon, value = raw.decode("utf-8", "replace").partition(":")
        if not colon:
            raise MultipartError("malformed multipart part header")
        headers[name.strip().lower()] = value.strip()
    return headers

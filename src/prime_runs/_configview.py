"""A run's config as ``prime-runs show`` and the report print it: every value (long ones
folded), and the text of the launch file when the config came from one.

The values are the point of looking (``temperature=0.0``, not ``{temperature}``); folding
keeps one huge value (a prompt template, a list of thousands of ids) from burying the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from prime_runs._runs.config import CONFIG_SOURCE_KEY

VALUE_CHARS = 120  # a value longer than this is folded
MAX_KEYS = 50
FILE_LINES = 60  # lines of a launch file shown; the whole text stays in run.json


@dataclass
class ConfigView:
    """``values``: (key, value as compact JSON, folded); ``file``: the launch file, if any."""

    values: list[tuple[str, str]] = field(default_factory=list)
    more_keys: int = 0
    file_name: str | None = None
    file_format: str | None = None
    file_bytes: int | None = None
    file_lines: list[str] = field(default_factory=list)
    more_lines: int = 0

    @property
    def empty(self) -> bool:
        return not self.values and self.file_name is None

    def to_json(self) -> dict[str, Any]:
        return {
            "values": [list(pair) for pair in self.values],
            "more_keys": self.more_keys,
            "file": None
            if self.file_name is None
            else {
                "name": self.file_name,
                "format": self.file_format,
                "bytes": self.file_bytes,
                "lines": self.file_lines,
                "more_lines": self.more_lines,
            },
        }


def fold(text: str, limit: int = VALUE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def _value_text(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (ValueError, RecursionError):  # a hand-edited run.json: shown, never fatal
        text = repr(value)
    return fold(text)


def view(config: object) -> ConfigView:
    out = ConfigView()
    if not isinstance(config, dict) or not config:
        return out
    source = config.get(CONFIG_SOURCE_KEY)
    if isinstance(source, dict):
        text = source.get("text")
        out.file_name = str(source.get("filename") or "(in memory)")
        out.file_format = str(source.get("format") or "?")
        if isinstance(text, str):
            out.file_bytes = len(text.encode("utf-8", "replace"))
            lines = text.splitlines()
            out.file_lines = [fold(line) for line in lines[:FILE_LINES]]
            out.more_lines = max(0, len(lines) - FILE_LINES)
    keys = [k for k in config if k != CONFIG_SOURCE_KEY or not isinstance(source, dict)]
    out.values = [(str(k), _value_text(config[k])) for k in keys[:MAX_KEYS]]
    out.more_keys = max(0, len(keys) - MAX_KEYS)
    return out


def text_lines(config: object) -> list[str]:
    """The config for a terminal: ``key=value`` lines, then the launch file's lines."""
    v = view(config)
    if v.empty:
        return ["-"]
    lines = []
    if v.file_name is not None:
        size = f", {v.file_bytes:,} bytes" if v.file_bytes is not None else ""
        lines.append(f"{v.file_name} ({v.file_format}{size})")
        lines.extend(f"| {line}" for line in v.file_lines)
        if v.more_lines:
            lines.append(f"| ... ({v.more_lines:,} more lines; the whole file is in run.json)")
    lines.extend(f"{key}={value}" for key, value in v.values)
    if v.more_keys:
        lines.append(f"... ({v.more_keys:,} more keys; all of them are in run.json)")
    return lines

"""Capturing a run's config (``init(config=...)``) as the object stored on the platform.

Forms are told apart by type only, never by looking at keys:

- ``None``: ``{}`` (no metadata is sent);
- a ``str`` or path-like: always a file path, read byte for byte and stored as
  ``{"config_source": {"format", "text", "filename"}}``;
- a :class:`ConfigSource`: an in-memory file, stored the same way;
- a mapping: stored exactly as given (a shallow copy; nothing parsed or cleaned);
- a pydantic model (anything with ``model_dump``): ``model_dump(mode="json", exclude_unset=True)``.

Every check happens here, before any request is made. Nothing is redacted: credentials
belong in the environment, not in the config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_runs.errors import ConfigurationError

CONFIG_SOURCE_KEY = "config_source"
MAX_CONFIG_SOURCE_BYTES = 256 * 1024

_FORMATS = {".toml": "toml", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}


@dataclass(frozen=True)
class ConfigSource:
    """A config file's text held in memory; stored like a file given by path."""

    text: str
    format: str = "toml"
    filename: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored object; ``filename`` is omitted when there is none."""
        data: dict[str, Any] = {"format": self.format, "text": self.text}
        if self.filename:
            data["filename"] = self.filename
        return data

    @classmethod
    def from_stored(cls, value: object) -> ConfigSource | None:
        """Rebuild from a stored object; ``None`` unless ``text`` is a string."""
        if not isinstance(value, Mapping) or not isinstance(value.get("text"), str):
            return None
        fmt, filename = value.get("format"), value.get("filename")
        return cls(
            text=value["text"],
            format=fmt if isinstance(fmt, str) and fmt else "toml",
            filename=filename if isinstance(filename, str) and filename else None,
        )

    # 0.1.4's spellings of the constructors.
    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> ConfigSource | None:
        """0.1.4's name for :meth:`from_stored`."""
        return cls.from_stored(value)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ConfigSource:
        """Read a config file as ``init(config=path)`` does (``ConfigurationError`` naming
        the path when it is missing, unreadable, not UTF-8 or over 256 KiB)."""
        return read_config_source(path)

    @classmethod
    def coerce(cls, value: object) -> ConfigSource | None:
        """``None``, a ``ConfigSource``, or a path (a ``str`` is always a path)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, (str, os.PathLike)):
            return read_config_source(value)
        raise TypeError(
            f"a config source must be a path or a ConfigSource, got {type(value).__name__}"
        )


def format_for(path: str | os.PathLike[str]) -> str:
    """``toml``/``json``/``yaml`` from the suffix (case-insensitive), else ``text``."""
    return _FORMATS.get(Path(path).suffix.lower(), "text")


def read_config_source(path: str | os.PathLike[str]) -> ConfigSource:
    """Read a config file byte for byte; ``ConfigurationError`` naming the path when it is
    missing, unreadable, not UTF-8 or over 256 KiB. The file is never truncated."""
    shown = os.fspath(path)
    limit = f"{MAX_CONFIG_SOURCE_BYTES:,} bytes (256 KiB)"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_SOURCE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigurationError(
            f"config={shown!r} does not exist. A string config is always a file path; pass a "
            "mapping or ConfigSource(text=...) for an in-memory config"
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"config={shown!r} cannot be read: {exc.strerror or exc}"
        ) from None
    if len(raw) > MAX_CONFIG_SOURCE_BYTES:
        raise ConfigurationError(
            f"config={shown!r} is over the {limit} limit for a stored run config (it is never "
            "truncated); pass a smaller file, or a mapping of the values that matter"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"config={shown!r} is not UTF-8 text (byte {exc.start}); a run config must be "
            "readable text"
        ) from None
    return ConfigSource(text=text, format=format_for(path), filename=Path(path).name or None)


def _checked_source(source: ConfigSource) -> ConfigSource:
    if not isinstance(source.text, str):
        raise ConfigurationError(
            f"ConfigSource.text must be a str, got {type(source.text).__name__}"
        )
    if len(source.text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_SOURCE_BYTES:
        raise ConfigurationError(
            f"ConfigSource {source.filename or '(in memory)'!r} is larger than the "
            f"{MAX_CONFIG_SOURCE_BYTES:,} bytes (256 KiB) limit"
        )
    return source


def _check_json(config: dict[str, Any], what: str) -> dict[str, Any]:
    """Fail here rather than at create: the platform only takes strict JSON."""
    try:
        json.dumps(config, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigurationError(f"config ({what}) is not JSON-serializable: {exc}") from None
    return config


def capture_config(config: object) -> dict[str, Any]:
    """The run config to store (contract §11); raises ``ConfigurationError`` for bad input."""
    if config is None:
        return {}
    if isinstance(config, (str, os.PathLike)):
        return {CONFIG_SOURCE_KEY: read_config_source(config).to_dict()}
    if isinstance(config, ConfigSource):
        return {CONFIG_SOURCE_KEY: _checked_source(config).to_dict()}
    if isinstance(config, Mapping):
        return _check_json(dict(config), "mapping")
    model_dump = getattr(config, "model_dump", None)
    if callable(model_dump):
        dumped = model_dump(mode="json", exclude_unset=True)
        if not isinstance(dumped, Mapping):
            raise ConfigurationError(
                f"{type(config).__name__}.model_dump() returned a {type(dumped).__name__}, "
                "expected a mapping"
            )
        return _check_json(dict(dumped), type(config).__name__)
    raise ConfigurationError(
        f"config must be a file path, a mapping, a ConfigSource or a pydantic model, "
        f"got {type(config).__name__}"
    )


__all__ = [
    "CONFIG_SOURCE_KEY",
    "MAX_CONFIG_SOURCE_BYTES",
    "ConfigSource",
    "capture_config",
    "format_for",
    "read_config_source",
]

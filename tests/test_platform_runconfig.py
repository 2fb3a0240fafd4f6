from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pydantic
import pytest

from prime_runs._runs.config import (
    CONFIG_SOURCE_KEY,
    MAX_CONFIG_SOURCE_BYTES,
    ConfigSource,
    capture_config,
)
from prime_runs.errors import ConfigurationError

TOML = (
    "# the environment we are measuring\n"
    'environment = "primeintellect/terminal-bench-2"\n'
    "\n"
    "[sampling]  # keep it greedy\r\n"
    "temperature = 0.0\n"
    'note = "ünïcödé ✓"\n'
)


def test_none_is_empty() -> None:
    assert capture_config(None) == {}


def test_path_is_stored_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "Eval.TOML"
    path.write_bytes(TOML.encode("utf-8"))
    for given in (path, str(path)):
        stored = capture_config(given)
        assert stored == {
            CONFIG_SOURCE_KEY: {"format": "toml", "text": TOML, "filename": "Eval.TOML"}
        }
        assert stored[CONFIG_SOURCE_KEY]["text"].encode("utf-8") == path.read_bytes()


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.json", "json"), ("a.yaml", "yaml"), ("a.YML", "yaml"), ("a.cfg", "text"), ("a", "text")],
)
def test_format_from_suffix(tmp_path: Path, name: str, fmt: str) -> None:
    path = tmp_path / name
    path.write_text("x")
    assert capture_config(path)[CONFIG_SOURCE_KEY]["format"] == fmt


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigurationError, match=r"nope\.toml"):
        capture_config(str(missing))


def test_directory_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=str(tmp_path.name)):
        capture_config(tmp_path)


def test_size_limit_names_the_path_and_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * MAX_CONFIG_SOURCE_BYTES)
    assert len(capture_config(path)[CONFIG_SOURCE_KEY]["text"]) == MAX_CONFIG_SOURCE_BYTES
    path.write_bytes(b"#" * (MAX_CONFIG_SOURCE_BYTES + 1))
    with pytest.raises(ConfigurationError) as info:
        capture_config(path)
    assert "big.toml" in str(info.value)
    assert "256 KiB" in str(info.value)


def test_non_utf8_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes("x = 'café'".encode("latin-1"))
    with pytest.raises(ConfigurationError, match=r"latin\.toml.*UTF-8"):
        capture_config(path)


def test_mapping_is_stored_as_given() -> None:
    given = OrderedDict(text="not a source", format="toml", empty=None, nested={"a": [1, None]})
    stored = capture_config(given)
    assert stored == dict(given)
    assert type(stored) is dict
    stored["extra"] = 1
    assert "extra" not in given


def test_mapping_that_is_not_json_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="JSON"):
        capture_config({"when": object()})
    with pytest.raises(ConfigurationError, match="JSON"):
        capture_config({"x": float("nan")})


def test_config_source_object() -> None:
    assert capture_config(ConfigSource(text="a = 1\n")) == {
        CONFIG_SOURCE_KEY: {"format": "toml", "text": "a = 1\n"}
    }
    assert capture_config(ConfigSource(text="{}", format="json", filename="c.json")) == {
        CONFIG_SOURCE_KEY: {"format": "json", "text": "{}", "filename": "c.json"}
    }
    with pytest.raises(ConfigurationError, match="256 KiB"):
        capture_config(ConfigSource(text="x" * (MAX_CONFIG_SOURCE_BYTES + 1)))


def test_config_source_round_trip() -> None:
    source = ConfigSource(text="t", format="yaml", filename="f.yaml")
    assert ConfigSource.from_stored(source.to_dict()) == source
    assert ConfigSource.from_stored({"text": 3}) is None
    assert ConfigSource.from_stored("text") is None


class Sampling(pydantic.BaseModel):
    temperature: float = 1.0
    top_p: float | None = None


class EvalConfig(pydantic.BaseModel):
    model: str
    rollouts: int = 4
    sampling: Sampling = Sampling()
    path: Path | None = None


def test_pydantic_model_is_dumped_with_exclude_unset() -> None:
    config = EvalConfig(model="m", sampling=Sampling(temperature=0.5), path=Path("/x/y"))
    assert capture_config(config) == {
        "model": "m",
        "sampling": {"temperature": 0.5},
        "path": "/x/y",
    }


@pytest.mark.parametrize("bad", [b"bytes", 3, ["a"], object()])
def test_other_types_are_rejected(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=type(bad).__name__):
        capture_config(bad)

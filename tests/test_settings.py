from __future__ import annotations

import json
from pathlib import Path

import pytest

from prime_runs.errors import ConfigurationError
from prime_runs.settings import (
    DEFAULT_BASE_URL,
    DEFAULT_FRONTEND_URL,
    DEFAULT_TRACES_URL,
    ENV_VARIABLES,
    MODE_ENV,
    Settings,
    load_config_file,
    normalize_api_url,
)

KEY = "pk-settings-secret-0123456789"
_ENV = ENV_VARIABLES


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake HOME with no PRIME_* variables set."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("USERPROFILE", str(tmp_path))
    return tmp_path


def write_config(home: Path, data: object) -> Path:
    path = home / ".prime" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_defaults_without_anything_are_offline(home: Path) -> None:
    s = Settings.resolve()
    assert s.api_key is None and s.team_id is None
    assert s.base_url == DEFAULT_BASE_URL
    assert s.traces_url == DEFAULT_TRACES_URL
    assert s.frontend_url == DEFAULT_FRONTEND_URL
    assert s.mode == "offline"


def test_config_file_is_read_from_home_at_call_time(home: Path) -> None:
    write_config(
        home,
        {
            "api_key": KEY,
            "team_id": "team_file",
            "base_url": "http://file.example/api/v1/",
            "traces_url": "http://traces.file.example/",
            "frontend_url": "http://app.file.example/",
            "team_name": "ignored",
        },
    )
    s = Settings.resolve()
    assert s.api_key == KEY
    assert s.team_id == "team_file"
    assert s.base_url == "http://file.example"
    assert s.traces_url == "http://traces.file.example"
    assert s.frontend_url == "http://app.file.example"
    assert s.mode == "online"


def test_environment_beats_file_and_argument_beats_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(home, {"api_key": "file-key", "team_id": "team_file", "base_url": "http://f"})
    monkeypatch.setenv("PRIME_API_KEY", "env-key")
    monkeypatch.setenv("PRIME_TEAM_ID", "team_env")
    monkeypatch.setenv("PRIME_BASE_URL", "http://alias")
    monkeypatch.setenv("PRIME_API_BASE_URL", "http://env")
    monkeypatch.setenv("PRIME_TRACES_URL", "http://traces.env/api/v1")
    monkeypatch.setenv("PRIME_FRONTEND_URL", "http://app.env/")
    s = Settings.resolve()
    assert (s.api_key, s.team_id, s.base_url) == ("env-key", "team_env", "http://env")
    assert s.traces_url == "http://traces.env"
    assert s.frontend_url == "http://app.env"
    s = Settings.resolve(
        api_key="arg-key", team_id="team_arg", base_url="http://arg/", traces_url="http://t/"
    )
    assert (s.api_key, s.team_id, s.base_url, s.traces_url) == (
        "arg-key",
        "team_arg",
        "http://arg",
        "http://t",
    )


def test_older_base_url_alias_is_used_when_the_new_one_is_unset(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_BASE_URL", "http://alias/api/v1")
    assert Settings.resolve().base_url == "http://alias"


def test_blank_values_count_as_unset(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(home, {"api_key": "file-key", "team_id": "team_file"})
    monkeypatch.setenv("PRIME_API_KEY", "  ")
    monkeypatch.setenv("PRIME_TEAM_ID", "")
    monkeypatch.setenv(MODE_ENV, " ")
    s = Settings.resolve(team_id="")
    assert s.api_key == "file-key"
    assert s.team_id == "team_file"
    assert s.mode == "online"


def test_explicit_empty_api_key_means_no_key(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_API_KEY", "env-key")
    s = Settings.resolve(api_key="")
    assert s.api_key is None
    assert s.mode == "offline"


@pytest.mark.parametrize(
    "content",
    ["", "not json", "[1, 2]", '"a string"', "\xff\xfe garbage", '{"api_key": 42}'],
)
def test_bad_config_files_are_treated_as_empty(home: Path, content: str) -> None:
    path = write_config(home, content)
    if content.startswith("\xff"):
        path.write_bytes(b"\xff\xfe{}")
    s = Settings.resolve()
    assert s.api_key is None
    assert s.mode == "offline"


def test_config_path_that_is_a_directory_is_treated_as_empty(home: Path) -> None:
    assert load_config_file(home) == {}


def test_explicit_config_path(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps({"api_key": KEY}))
    assert Settings.resolve(config_path=other).api_key == KEY
    assert Settings.resolve().api_key is None


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://host", "http://host"),
        ("http://host/", "http://host"),
        ("http://host/api/v1", "http://host"),
        ("http://host/api/v1/", "http://host"),
        ("http://host/api/v1//", "http://host"),
        ("http://api", "http://api"),
        ("https://rft.internal:8080", "https://rft.internal:8080"),
        ("http://api/v1", "http://api/v1"),
        ("http://host/prefix/api/v1", "http://host/prefix"),
    ],
)
def test_base_url_normalization(home: Path, given: str, expected: str) -> None:
    assert normalize_api_url(given) == expected
    assert Settings.resolve(base_url=given).base_url == expected


@pytest.mark.parametrize(
    ("argument", "env", "key", "expected"),
    [
        (None, None, KEY, "online"),
        (None, None, None, "offline"),
        ("disabled", None, KEY, "disabled"),
        (None, " Disabled ", KEY, "disabled"),
        ("OFFLINE", "online", KEY, "offline"),
        (None, "offline", KEY, "offline"),
        ("disabled", None, None, "disabled"),
    ],
)
def test_mode_resolution(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    argument: str | None,
    env: str | None,
    key: str | None,
    expected: str,
) -> None:
    if env is not None:
        monkeypatch.setenv(MODE_ENV, env)
    assert Settings.resolve(api_key=key, mode=argument).mode == expected


def test_unknown_mode_names_the_value_and_the_allowed_ones(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.resolve(api_key=KEY, mode="turbo")
    assert "'turbo'" in str(info.value)
    for allowed in ("online", "offline", "disabled"):
        assert allowed in str(info.value)
    monkeypatch.setenv(MODE_ENV, "Loud")
    with pytest.raises(ConfigurationError, match=f"{MODE_ENV}.*'Loud'"):
        Settings.resolve(api_key=KEY)


def test_online_without_a_key_is_a_configuration_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match="API key"):
        Settings.resolve(mode="online")
    monkeypatch.setenv(MODE_ENV, "online")
    with pytest.raises(ConfigurationError, match=MODE_ENV):
        Settings.resolve()


def test_repr_and_str_never_show_the_key(home: Path) -> None:
    s = Settings.resolve(api_key=KEY)
    for text in (repr(s), str(s), f"{s}", f"{s!r}"):
        assert KEY not in text
        assert "***" in text
    assert "api_key=None" in repr(Settings.resolve())


def test_settings_are_frozen(home: Path) -> None:
    s = Settings.resolve()
    with pytest.raises(AttributeError):
        s.mode = "online"  # type: ignore[misc]


def test_evaluation_url(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_FRONTEND_URL", "http://app.test/")
    assert Settings.resolve().evaluation_url("ev1") == "http://app.test/dashboard/evaluations/ev1"


def test_bad_values_name_their_source_and_never_echo_the_key(tmp_path, monkeypatch) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"api_key": "kéy-in-file", "base_url": "ftp://file.test"}')
    with pytest.raises(ConfigurationError, match=r"api_key in .*config\.json") as info:
        Settings.resolve(config_path=config)
    assert "kéy" not in str(info.value)
    config.write_text('{"api_key": "good-key", "base_url": "ftp://file.test"}')
    with pytest.raises(ConfigurationError, match=r"base_url in .*config\.json"):
        Settings.resolve(config_path=config)
    monkeypatch.setenv("PRIME_BASE_URL", "gopher://alias.test")
    with pytest.raises(ConfigurationError, match="PRIME_BASE_URL"):
        Settings.resolve(config_path=config)
    with pytest.raises(ConfigurationError, match="traces_url="):
        Settings.resolve(api_key="k", base_url="http://ok.test", traces_url="file:///x")
    with pytest.raises(ConfigurationError, match="mode= must be a string"):
        Settings.resolve(mode=5)  # type: ignore[arg-type]
    # An https URL with user info is accepted; a bad one is shown without its password.
    with pytest.raises(ConfigurationError) as info:
        Settings.resolve(api_key="k", base_url="ftp://user:pw@host.test")
    assert "pw" not in str(info.value)
    assert Settings.resolve(api_key="k", base_url="HTTPS://host.test/").base_url == (
        "https://host.test"
    )

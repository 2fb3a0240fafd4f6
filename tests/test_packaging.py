"""The built wheel: installable on every Python the resolver may pick, from 3.10 on.

An upper bound on ``Requires-Python`` cannot be lifted after release: on a newer
interpreter the resolver would skip our release and pick an older one. These tests build
the real wheel (hatchling, no network) and ask pip's own resolver about it.
"""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIP = (sys.executable, "-m", "pip")
# Ask the resolver only: wheels alone, as if nothing were installed.
RESOLVE_ONLY = ("--no-index", "--no-deps", "--only-binary=:all:", "--ignore-installed")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (built,) = out.glob("prime_runs-*.whl")
    return built


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def _resolve(wheel: Path, version: str) -> subprocess.CompletedProcess[str]:
    """pip's resolver on ``wheel`` as if installing for Python ``version`` (nothing installed)."""
    return subprocess.run(
        [*PIP, "install", "--dry-run", *RESOLVE_ONLY, "--python-version", version, str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_requires_python_has_no_upper_bound(wheel: Path) -> None:
    metadata = _metadata(wheel)
    assert metadata["Requires-Python"] == ">=3.10"
    tested = {
        c.rsplit(" :: ", 1)[1]
        for c in metadata.get_all("Classifier", [])
        if c.startswith("Programming Language :: Python :: 3.")
    }
    assert tested == {"3.10", "3.11", "3.12", "3.13"}


@pytest.mark.parametrize("version", ["3.10", "3.13", "3.14", "3.15"])
def test_resolver_accepts_the_wheel(wheel: Path, version: str) -> None:
    result = _resolve(wheel, version)
    assert result.returncode == 0, result.stderr
    assert "Would install prime-runs-" in result.stdout


def test_resolver_refuses_older_pythons(wheel: Path) -> None:
    result = _resolve(wheel, "3.9")
    assert result.returncode != 0
    assert "requires a different Python" in result.stderr


def test_wheel_ships_the_typing_marker(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        assert "prime_runs/py.typed" in archive.namelist()

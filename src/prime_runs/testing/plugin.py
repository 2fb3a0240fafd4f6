"""pytest plugin (registered through the ``pytest11`` entry point): stand-in fixtures.

- ``prime_platform``: a started ``StandInPlatform``, stopped after the test. Configure it
  with ``@pytest.mark.prime_platform(variant="S", traces="service_not_enabled", ...)``;
  the marker's keyword arguments go to the constructor.
- ``prime_env``: the same platform, with its ``env()`` exported through ``monkeypatch``,
  ``HOME`` pointed at an empty temporary directory (so no real ``~/.prime/config.json`` is
  read), ``PRIME_RUNS_DIR`` set to a temporary directory, and every variable in
  ``CLEARED_VARIABLES`` that it does not set removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

# Light on purpose (the variable names, the errors): pytest imports this module in every
# session; the stand-in and the SDK load when a fixture is first used.
from prime_runs.settings import ENV_VARIABLES

if TYPE_CHECKING:
    from prime_runs.testing._standin import StandInPlatform

#: Variables ``prime_env`` removes before it sets its own, because they could leak from the
#: developer's environment into a hermetic test: every one the SDK reads (a run to join and
#: 0.1.4's traces opt-out included), plus ``PRIME_RUN_ID``. docs/testing.md lists them (a
#: test compares).
CLEARED_VARIABLES = (*ENV_VARIABLES, "PRIME_RUN_ID")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "prime_platform(**kwargs): StandInPlatform constructor arguments for the "
        "prime_platform / prime_env fixtures",
    )


@pytest.fixture
def prime_platform(request: pytest.FixtureRequest) -> Iterator[StandInPlatform]:
    """A started stand-in platform, stopped after the test."""
    from prime_runs.testing._standin import StandInPlatform

    marker = request.node.get_closest_marker("prime_platform")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    platform = StandInPlatform(**kwargs)
    platform.start()
    try:
        yield platform
    finally:
        platform.stop()


@pytest.fixture
def prime_env(
    prime_platform: StandInPlatform,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[StandInPlatform]:
    """``prime_platform`` with the process environment pointed at it."""
    for name in CLEARED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in prime_platform.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path_factory.mktemp("prime-runs")))
    yield prime_platform

"""The dev extra installs with the pip a fresh ``python -m venv`` ships (issue 23).

An older pip takes a pre-release only when the requirement's own specifier names one
(``>=0.1b0``); ``opentelemetry-util-genai<1.0`` matched nothing it would take, since every
release below 1.0 is a beta. This checks pip's rule for each dev requirement against what
is installed here: a pre-release must be allowed by the specifier itself."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, requires, version

from packaging.requirements import Requirement
from packaging.version import Version


def test_every_pre_release_in_the_dev_extra_is_allowed_by_its_own_specifier():
    # The installed metadata: what pip read from pyproject.toml's dev extra.
    everything = [Requirement(line) for line in requires("prime-runs") or ()]
    dev = [r for r in everything if r.marker is not None and r.marker.evaluate({"extra": "dev"})]
    checked = []
    for requirement in dev:
        line = f"{requirement.name}{requirement.specifier}"
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:
            continue
        if installed.is_prerelease:
            # An older pip admits a pre-release only when the specifier names one (newer
            # ones also fall back to pre-releases when nothing else matches).
            named = bool(requirement.specifier.prereleases)
            assert requirement.specifier.contains(installed, prereleases=named), (
                f"{line!r} does not admit the installed {installed} without --pre: name a "
                "pre-release in its lower bound (e.g. >=0.1b0)"
            )
            checked.append(requirement.name)
    assert "opentelemetry-util-genai" in checked

"""0.1.4's module path for the errors: ``from prime_runs.exceptions import APIError`` keeps
working. The names are those of ``prime_runs.errors`` (also exported by ``prime_runs``)."""

from __future__ import annotations

from prime_runs.errors import *  # noqa: F403 - the same objects, under 0.1.4's module name
from prime_runs.errors import __all__ as __all__

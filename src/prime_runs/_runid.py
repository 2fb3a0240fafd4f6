"""What a run id may be: it names a folder of the archive and a path on the platform.

A run id arrives from outside the process (a carrier's baggage, ``TRACEPARENT``/
``BAGGAGE``, ``init(id=...)``, a command-line argument, ``run.json``/``sync.json``, a
platform response) and becomes ``<archive root>/<id>/`` and ``/evaluations/<id>``. Every
id the SDK and the platform hand out (``run-20250101-120000-1a2b3c4d``,
``disabled-<16 hex>``, a platform's ``cm...``/uuid/``ev_...`` ids) is letters, digits,
``.``, ``_`` and ``-``: that charset, starting with a letter or digit, is one path
component that is neither ``.`` nor ``..`` and needs no quoting in a URL.
"""

from __future__ import annotations

import re
import reprlib
from typing import TypeGuard

from prime_runs.errors import ConfigurationError

MAX_LENGTH = 128
_SHAPE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_LENGTH - 1}}}")
SHAPE_TEXT = f"1 to {MAX_LENGTH} of A-Z a-z 0-9 . _ -, starting with a letter or digit"

_shown = reprlib.Repr()
_shown.maxstring = 60


def is_run_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _SHAPE.fullmatch(value) is not None


def shown(value: object) -> str:
    """``value`` as an error message quotes it: its repr, cut to a readable length."""
    return _shown.repr(value)


def check_run_id(value: object, *, source: str, fix: str) -> str:
    """``value`` if it is a run id, else ``ConfigurationError`` naming ``source`` (where it
    came from), the value and ``fix``."""
    if is_run_id(value):
        return value
    raise ConfigurationError(f"{source} {shown(value)} is not a run id ({SHAPE_TEXT}); {fix}")

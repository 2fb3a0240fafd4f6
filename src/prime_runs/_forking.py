"""The one fork hook of the process: what each module resets in a forked child.

Modules that keep process-wide state (the delivery pipeline, the run registry, leases,
open joins, close-outs, id generators, training sides, the exit hooks' trackers) say so
with :func:`in_child` at import; a single ``os.register_at_fork`` hook runs them in the
child, in the order the modules were imported (a lower layer is imported, so reset, before
the layers that use it). A reset that fails is logged and never stops the others.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

logger = logging.getLogger("prime_runs")

_resets: list[Callable[[], None]] = []


def in_child(reset: Callable[[], None]) -> None:
    """Run ``reset`` in every forked child of this process."""
    _resets.append(reset)


def _after_fork_in_child() -> None:
    for reset in list(_resets):
        try:
            reset()
        except Exception:  # one module's reset must not leave the others undone
            logger.debug("prime-runs: a reset after fork failed", exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

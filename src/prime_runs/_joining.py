"""``pr.join(carrier)``: the one way a worker joins a run for a block of work.

``with pr.join(carrier) as run:`` joins the run the carrier names, and leaving the block
gives back what the join took: this handle's share of the process's join (the journal
files and connections go with the last handle). Joining again in the same process
reuses the open join, so a join per task costs a long-lived worker what one join does.
Entering the block makes the run the current context's run (per thread, per asyncio
task), and ``run.log_episodes`` always logs into this run, whatever the context.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from prime_runs._runs.join import context_to_join
from prime_runs.api import init
from prime_runs.errors import ConfigurationError
from prime_runs.run import Run


def join(
    carrier: Mapping[str, str] | None = None,
    *,
    dir: str | os.PathLike[str] | None = None,
    on_error: str = "warn",
    api_key: str | None = None,
    base_url: str | None = None,
    traces: bool = True,
    samples: bool = True,
    journal: bool = True,
) -> Run:
    """Join the run another process owns (``carrier`` is the owner's ``run.context()``,
    either form; ``None``: the current context's or the environment's
    ``TRACEPARENT``/``BAGGAGE``). A joined handle never closes the run: leaving
    ``with``, or ``finish()``, drains this worker's records and releases the join.

    Unlike ``init()``, it never starts a run of its own: with nothing to join it raises
    ``ConfigurationError``. An empty carrier (``context()`` of a disabled run) gives a
    handle that records nothing.
    """
    if carrier is not None and not isinstance(carrier, Mapping):
        raise ConfigurationError(
            f"join(carrier): the carrier must be a mapping from run.context(), "
            f"not a {type(carrier).__name__}"
        )
    ctx = context_to_join(carrier)  # a carrier that names no run raises here
    if ctx is None:
        if carrier is not None:  # {}: the owner's run is disabled
            return init(mode="disabled")
        raise ConfigurationError(
            "join(): there is no run to join: pass the owner's run.context(), or set "
            "TRACEPARENT and BAGGAGE from run.context(env=True)"
        )
    return init(
        join=dict(carrier) if carrier is not None else None,
        dir=dir,
        on_error=on_error,
        api_key=api_key,
        base_url=base_url,
        traces=traces,
        samples=samples,
        journal=journal,
    )

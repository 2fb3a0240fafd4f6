"""The finish report's last word on a run that recorded nothing."""

from __future__ import annotations

import logging

from prime_runs._runs.state import RunState

logger = logging.getLogger("prime_runs")


def warn_if_empty(state: RunState) -> None:
    """A run that ends with no records says so; its refused records are in ``run.errors``
    and counted (``invalid``) in ``status.json``."""
    if not state.owner or state.forked or _recorded_any(state):
        return
    refused = state.counters.invalid
    if refused:
        why = (
            f"{'the one record' if refused == 1 else f'all {refused} records'} logged into "
            f"it {'was' if refused == 1 else 'were'} refused: invalid, cut or dropped by "
            "an OpenTelemetry attribute or event limit, or logged after finish() (see run.errors)"
        )
    else:
        why = (
            "nothing was logged into it. Log with run.log_episodes() or "
            "pr.log_episodes(), or as `episode` spans or span events carrying "
            "prime.record under the `run` span"
        )
        reported = len(state.counters.errors)
        if reported:  # e.g. events dropped by a limit, records perhaps among them
            why += f" (see run.errors: {reported} problem{'' if reported == 1 else 's'} reported)"
    logger.warning("prime-runs: run %s ended with no records: %s", state.run_id, why)


def _recorded_any(state: RunState) -> bool:
    if state.counters.logged or state.records_summarized:
        return True  # (the second: workers elsewhere logged what the platform holds)
    if state.archive is None:
        return False
    try:  # forked children journal records this process never counted
        return next(iter(state.archive.iter_records()), None) is not None
    except OSError:
        return True  # cannot tell: claim nothing

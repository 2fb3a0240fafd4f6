"""What 0.1.4's callers pass and call that has no other home here: ``init(traces_opt_out=,
finish_timeout=)`` and ``Run.update_summary()``. See ``docs/coming-from-0.1.4.md``."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import Any

from prime_runs._runs.accounting import RAISE
from prime_runs._runs.config import capture_config
from prime_runs._runs.options import RunOptions
from prime_runs._runs.state import RunState
from prime_runs._runs.training import clean_metrics
from prime_runs.errors import ConfigurationError, RecordError, RunFinishedError
from prime_runs.settings import DISABLED, MODE_ENV, traces_opt_out

logger = logging.getLogger("prime_runs")


def apply_opt_out(opts: RunOptions, argument: bool | None) -> RunOptions:
    """0.1.4's Prime Traces opt-out: the run never contacts Prime Traces and its episodes go
    to the legacy sample table (eval rows, or a training run's Parquet objects). Not
    evaluated for a disabled run, so a bad ``PRIME_TRACES_OPT_OUT`` cannot fail one."""
    requested = (opts.mode or "").strip() or os.environ.get(MODE_ENV, "").strip()
    if requested.lower() == DISABLED or not traces_opt_out(argument):
        return opts
    if opts.kind == "train" and opts.samples:
        from prime_runs.exporters.train_samples import parquet_available

        if not parquet_available():
            # As 0.1.4: opted out, nothing but the Parquet table would store the episodes.
            raise ConfigurationError(
                "traces_opt_out: opting a training run out of Prime Traces sends its samples "
                "to the legacy table, which needs pyarrow: pip install 'prime-runs[train]'"
            )
    return dataclasses.replace(opts, traces=False)


def update_summary(state: RunState | None, values: object, disabled: dict[str, Any]) -> None:
    """``Run.update_summary``: merge run-level outputs into the summary ``finish()`` sends
    (over the one computed from the episodes; a ``finish(summary)`` wins over them).
    Non-finite numbers are dropped as 0.1.4 dropped them."""
    if not isinstance(values, Mapping):
        raise TypeError(f"update_summary() takes a mapping, not a {type(values).__name__}")
    try:
        cleaned = clean_metrics({str(k): v for k, v in values.items()})
    except RecordError as exc:
        raise TypeError(f"update_summary(): {exc}") from None
    if state is None:  # a disabled run keeps it on the handle, as 0.1.4's did
        disabled.update(cleaned)
        return
    if state.finishing or state.finished:
        message = (
            f"update_summary() on run {state.run_id}, which has finished (or is finishing): "
            "the summary was already sent. Call update_summary() before finish()."
        )
        if state.on_error == RAISE:
            raise RunFinishedError(message)
        state.report(message)
        return
    if not state.owner and not state.summary_updates:
        logger.warning(  # once: a joined process never closes the run, so never sends it
            "prime-runs: update_summary() in a process that joined run %s is kept on this "
            "handle only: the process that started the run sends the summary; call it there",
            state.run_id,
        )
    state.summary_updates.update(cleaned)


def summary_view(state: RunState | None, disabled: dict[str, Any]) -> dict[str, Any]:
    """``Run.summary``: while the run is open, the dict ``update_summary()`` fills (0.1.4
    callers may write into it); once finished, the summary the run closed with."""
    if state is None:
        return disabled
    if state.finished and state.summary is not None:
        return state.summary
    return state.summary_updates


def disabled_config(config: object) -> dict[str, Any]:
    """A disabled run's ``run.config``, as 0.1.4 kept it (so ``run.config_source`` still says
    which file a run was started from). Best effort: a disabled run never fails on it."""
    try:
        return capture_config(config)
    except Exception:  # nothing about a disabled run may raise
        return {}

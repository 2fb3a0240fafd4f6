"""A rank that joins a training run: its ``log_metrics`` rows are journaled in the run's
folder and delivered by a metrics delivery of its own, as the owner's are. A rank never
registers nor closes the run; finishing it sends what it has left, then lets go.
"""

from __future__ import annotations

from collections.abc import Callable

from prime_runs._delivery.provenance import upload_context
from prime_runs._runs.opening import RunOptions
from prime_runs._runs.state import RunState
from prime_runs._runs.training import TrainingSide
from prime_runs.exporters._sinks import build_sinks
from prime_runs.exporters.train_samples import SINK_NAME as SAMPLES_SINK
from prime_runs.platform.training import TRAIN, TrainingPlatform
from prime_runs.settings import Settings

AfterFinish = Callable[[RunState, float], None]


def wire(
    state: RunState,
    settings: Settings | None,
    opts: RunOptions,
    after: AfterFinish,
) -> AfterFinish:
    """Give a joined ``state`` its training side (and, online, its sinks); the
    ``after_finish`` hook that finishes the side before ``after``."""
    platform = TrainingPlatform(settings) if settings is not None else None
    state.training = TrainingSide(state, platform, state.archive)
    if state.journal is not None:
        # The sample table is the owner's: a rank's episodes have no row there, and sync,
        # reading the run's folder, must not send them to it.
        state.journal.skipped_by = (SAMPLES_SINK,)
    if settings is not None:
        # Episodes reach Prime Traces as the owner's do. The per-step sample table is the
        # owner's alone: ranks presigning the same step's object would overwrite it.
        context = upload_context(run_type=TRAIN, resource=opts.resource)
        sinks = build_sinks(settings, state.run_id, context, traces=opts.traces, samples=False)
        state.delivery.attach(sinks)

    def finish(done: RunState, deadline: float) -> None:
        try:
            side = getattr(done, "training", None)
            if isinstance(side, TrainingSide):
                side.finish(deadline)
        finally:
            if platform is not None:
                platform.shutdown()
        after(done, deadline)

    return finish

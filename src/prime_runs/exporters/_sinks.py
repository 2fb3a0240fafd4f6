"""Building a run's sinks from settings: the one place the live wiring and
``prime-runs sync`` construct them."""

from __future__ import annotations

from collections.abc import Mapping

from prime_runs.exporters.samples import SamplesSink
from prime_runs.exporters.traces import TracesSink
from prime_runs.platform._http import PlatformClient
from prime_runs.settings import Settings


def build_sinks(
    settings: Settings,
    eval_id: str,
    context: Mapping[str, str],
    *,
    traces: bool = True,
    samples: bool = True,
) -> list[TracesSink | SamplesSink]:
    """The Prime Traces sink (uploads stamped lines with ``context``) and the sample-table
    sink of evaluation ``eval_id``, as asked."""
    sinks: list[TracesSink | SamplesSink] = []
    if traces:
        sinks.append(
            TracesSink(
                api_key=settings.api_key or "",
                traces_url=settings.traces_url,
                team_id=settings.team_id,
                context=dict(context),
            )
        )
    if samples:
        sinks.append(SamplesSink(PlatformClient(settings), eval_id))
    return sinks

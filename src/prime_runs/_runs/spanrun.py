"""A raw ``run`` span's run: what its attributes ask for when it starts, and how it ended.

The attribute names are in ``semconv``. A span with ``prime.run.type = "train"`` opens a
training run: ``prime.train.<field>`` attributes are its ``TrainingSpec``,
``prime.run.team_id`` its team and ``prime.run.attach_id`` the id of a run a launcher
created. ``RunProcessor`` opens the run with ``options_of`` and closes it with what
``ending_of`` reads when the span ends.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from prime_runs import semconv
from prime_runs._runs.options import RunOptions
from prime_runs.errors import ConfigurationError
from prime_runs.platform.training import RUN_KINDS, TRAIN, TrainingSpec
from prime_runs.status import RunStatus

logger = logging.getLogger("prime_runs")


def options_of(
    attrs: Mapping[str, Any], resource: Mapping[str, str], defaults: Mapping[str, Any]
) -> RunOptions:
    """The run a ``run`` span's attributes describe, over the processor's ``defaults``
    (``configure_exporter()`` settings). ``ConfigurationError`` for what is no run."""
    kind = attrs.get(semconv.RUN_TYPE, "eval")
    if not isinstance(kind, str) or kind not in RUN_KINDS:
        raise ConfigurationError(
            f"{semconv.RUN_TYPE}={kind!r} is not a run type: use 'eval' or 'train'"
        )
    options: dict[str, Any] = {
        "name": attrs.get(semconv.RUN_NAME),
        "environments": list(attrs.get(semconv.RUN_ENVIRONMENTS) or ()),
        "model": attrs.get(semconv.RUN_MODEL),
        "framework": attrs.get(semconv.RUN_FRAMEWORK),
        "description": attrs.get(semconv.RUN_DESCRIPTION),
        "tags": list(attrs.get(semconv.RUN_TAGS) or ()),
        "config": _config(attrs),
        "resource": resource,
        **defaults,
    }
    team = attrs.get(semconv.RUN_TEAM_ID)
    if team:  # the span's team over the configured one
        options["team_id"] = team
    if kind == TRAIN:
        options.update(kind=TRAIN, training=_spec(attrs), id=attrs.get(semconv.RUN_ATTACH_ID))
    options["on_error"] = "warn"  # a span hook never raises
    options["from_span"] = True
    return RunOptions(**options)


def _config(attrs: Mapping[str, Any]) -> object:
    raw = attrs.get(semconv.RUN_CONFIG)
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            logger.warning(
                "prime-runs: %s is not JSON; the config is not stored", semconv.RUN_CONFIG
            )
    return attrs.get(semconv.RUN_CONFIG_PATH)


def _spec(attrs: Mapping[str, Any]) -> TrainingSpec:
    """The ``TrainingSpec`` of ``prime.train.<field>`` attributes (``ConfigurationError``
    for a value of the wrong type, as ``TrainingSpec`` itself says)."""
    given = {
        f.name: attrs[semconv.TRAIN_PREFIX + f.name]
        for f in dataclasses.fields(TrainingSpec)
        if semconv.TRAIN_PREFIX + f.name in attrs
    }
    return TrainingSpec(**given)


def ending_of(span: ReadableSpan) -> tuple[RunStatus, dict[str, Any] | None, str | None]:
    """How the run of an ended ``run`` span closes: its status, summary and error.

    ``prime.run.status`` when it names a terminal status, else failed for a span ended
    with status ERROR (its description the reason), else completed."""
    attrs = span.attributes or {}
    reason = attrs.get(semconv.RUN_ERROR)
    status_attr = attrs.get(semconv.RUN_STATUS)
    known = isinstance(status_attr, str) and _known_status(status_attr)
    if isinstance(status_attr, str) and not known:
        logger.warning(
            "prime-runs: %s=%r is not a run status (completed, failed, cancelled, crashed); "
            "using the span status instead",
            semconv.RUN_STATUS,
            status_attr,
        )
    if known:
        status = RunStatus.coerce(str(status_attr))
    elif span.status.status_code is StatusCode.ERROR:
        status = RunStatus.FAILED
        reason = reason or span.status.description
    else:
        status = RunStatus.COMPLETED
    summary = None
    raw_summary = attrs.get(semconv.RUN_SUMMARY)
    if isinstance(raw_summary, str):
        try:
            summary = json.loads(raw_summary)
        except ValueError:
            logger.warning("prime-runs: %s is not JSON; computing the summary", semconv.RUN_SUMMARY)
    stored = summary if isinstance(summary, dict) else None
    return status, stored, str(reason) if reason else None


def _known_status(value: str) -> bool:
    try:
        return RunStatus.coerce(value).terminal
    except ValueError:
        return False

"""Training runs: ``init(kind="train", training=TrainingSpec(...))`` and ``log_metrics``.

A training run is a ``run`` span like an eval run. What differs is its backend (register
with ``POST /rft/external-runs`` or attach to a launcher's run with ``id=``; close with
``POST /rft/finalize`` or a status ``PUT``, ``platform/training.py``) and one more thing
it delivers: metrics rows, one per ``log_metrics`` call (``_training_metrics``). Its
records still go to Prime Traces, stamped ``run.type = "train"``; a producer's
``run.work`` (the step an episode was dispatched at) is kept unchanged.

Metrics the OpenTelemetry way: inside a training run's trace, a span named ``step`` that
carries ``prime.train.step`` (an int) becomes one metrics row when it ends, exactly as
``run.log_metrics()`` would send it: each ``prime.train.metrics.<name>`` attribute is the
metric ``<name>``. An event named ``step`` with the same attributes, on any span of the
run's trace but the ``run`` span itself, becomes a row when its span ends (an ``init()``
run's ``run`` span ends after the run has closed, too late for its rows). ``RunProcessor``
hands every span of a run to ``log_steps`` as it ends, whether ``init()`` or a raw ``run``
span opened the run. See docs/training.md.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import prime_runs._forking as _forking
from prime_runs import semconv
from prime_runs._delivery.delivery import Delivery
from prime_runs._delivery.metrics import DELIVERY_SUFFIX, KIND, PAUSE, MetricsJournal
from prime_runs._journal.archive import RunArchive
from prime_runs._plural import quantity
from prime_runs._records.item import Item, Outcome
from prime_runs._records.jsonio import encode_record
from prime_runs._runs.accounting import RAISE
from prime_runs._runs.handling import refuse_bad, refuse_late
from prime_runs._runs.state import RunState
from prime_runs.errors import ConfigurationError, RecordError
from prime_runs.exporters.metrics import SINK_NAME, MetricsSink
from prime_runs.platform.training import RUN_KINDS, TRAIN, TrainingPlatform, TrainingSpec

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

logger = logging.getLogger("prime_runs")

# Where a row's body (``{"run_id": ..., "metrics": ...}``) holds its run id: a raw span's
# run sends the rows held while it registered with the platform's id there.
_ROW_STAMPS = (len(b'{"run_id":'),)


def check_kind(kind: object, training: object) -> TrainingSpec | None:
    """``kind=`` and ``training=`` of ``init()``: ConfigurationError before anything.
    Returns ``training``, checked."""
    if not isinstance(kind, str) or kind not in RUN_KINDS:
        raise ConfigurationError(f"kind={kind!r} is not valid; use 'eval' or 'train'")
    if training is not None and not isinstance(training, TrainingSpec):
        raise ConfigurationError(
            f"training= must be a prime_runs.TrainingSpec, got {type(training).__name__}"
        )
    if training is not None and kind != TRAIN:
        raise ConfigurationError("training= describes a training run: pass kind='train' too")
    return training


class TrainingSide:
    """A training run's metrics: journal and delivery. Thread-safe."""

    def __init__(
        self,
        state: RunState,
        platform: TrainingPlatform | None,
        archive: RunArchive | None,
        *,
        expect: bool = False,
    ) -> None:
        self._state = state
        self.run_id = state.run_id
        self.journal = MetricsJournal(archive) if archive is not None else None
        self.delivery = Delivery(
            state.run_id + DELIVERY_SUFFIX,
            None,
            on_outcome=self._settled,
            on_late=self._late,
            pause=PAUSE,
        )
        if platform is not None:
            self.delivery.attach([MetricsSink(platform, state.run_id, owns_client=False)])
        elif expect:  # a raw run span's run, registering: rows wait for the sink
            self.delivery.expect([SINK_NAME])
        _sides.add(self)

    def registered(self, platform: TrainingPlatform, run_id: str, local_id: str) -> None:
        """The run is registered as ``run_id``: rows held so far (stamped with
        ``local_id``) and later ones go to its metrics sink."""
        sink = MetricsSink(platform, run_id, owns_client=False)
        self.delivery.attach([sink], restamp=(local_id, run_id))

    def went_offline(self) -> None:
        """The run was not registered: the journal keeps the rows for `prime-runs sync`."""
        self.delivery.forget_expected()

    def log(self, row: dict[str, Any], step: int | None) -> None:
        """Send ``row`` (``_cleaned``, not yet known to be JSON) as the metrics of ``step``;
        ``RecordError``, with nothing sent, when it is no JSON."""
        if step is not None:
            row.setdefault("step", step)
        row.setdefault("_timestamp", time.time())
        # Encoded once, by the records' encoder: this encode is the row's JSON check too.
        body = _encoded({"run_id": self.run_id, "metrics": row})
        seq = None
        if self.journal is not None:
            try:
                seq = self.journal.append(body)
            except OSError as exc:  # never fatal: the row still goes to the platform
                self._state.report(f"could not journal a metrics row: {exc}")
        self._state.counters.count_sink("given", SINK_NAME)
        if self.delivery.online:  # its sink, or the one expected once registered
            label = f"metrics row (step {step})"
            item = Item(KIND, body, seq, None, label, stamps=_ROW_STAMPS)
            if not self.delivery.hand(item):
                self._state.counters.count_sink("failed", SINK_NAME, 1)

    def _settled(self, channel: Any, outcome: Outcome) -> None:
        self._state.counters.count_outcome(SINK_NAME, outcome)
        if self.journal is not None:
            self.journal.ack([i.key for i in outcome.acked if isinstance(i.key, int)])
        for item, reason in outcome.rejected:
            self._state.report(f"{SINK_NAME}: {item.record_id} was not stored: {reason}")
        if outcome.retire is not None:
            self._state.report(f"{SINK_NAME}: sink stopped for this run: {outcome.retire}")

    @property
    def logged(self) -> int:
        """Rows logged by this process."""
        return self._state.counters.given.get(SINK_NAME, 0)

    def _late(self, channel: Any, outcome: Outcome) -> None:
        # The counts stay as finish() reported them (status.json holds them); the
        # journal learns what landed, so sync does not send it again.
        if self.journal is not None:
            self.journal.ack([i.key for i in outcome.acked if isinstance(i.key, int)])

    def drain(self, until: float) -> bool:
        self.delivery.drain(until)
        return not self.delivery.pending()

    def finish(self, until: float) -> None:
        """Deliver what is left until ``until``, then stop; count what was never sent."""
        self.delivery.stop_by(until)
        self.drain(until)
        for sink, left in self.delivery.close().items():
            self._state.counters.count_sink("failed", sink, left)
            self._state.report(
                f"{sink}: {quantity(left, 'metrics row was', 'metrics rows were')} not sent "
                "before the finish deadline; "
                "they are in the run's metrics journal",
                warn=False,
            )
        if self.journal is not None:
            self.journal.close()

    def after_fork(self) -> None:
        if self.journal is not None:
            self.journal.after_fork()
        self.delivery.after_fork()


_DROP = object()
_SCALARS = frozenset({int, str, bool, type(None)})


def _finite(value: Any) -> Any:
    """``value`` without NaN/infinity anywhere inside (strict JSON has none; 0.1.4 drops
    them too), scalars of array libraries as plain numbers, or ``_DROP``."""
    if value.__class__ is float:  # a row's usual values first: no attribute lookups
        return value if math.isfinite(value) else _DROP
    if value.__class__ in _SCALARS:
        return value
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes, Mapping, list, tuple)):
        try:
            value = item()  # numpy and torch scalars
        except (TypeError, ValueError, RuntimeError):
            pass  # not a scalar: encoding says what is wrong with it
    if isinstance(value, float) and not math.isfinite(value):
        return _DROP
    if isinstance(value, Mapping):
        kept = {k: _finite(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not _DROP}
    if isinstance(value, (list, tuple)):
        return [v for v in (_finite(v) for v in value) if v is not _DROP]
    return value


def clean_metrics(values: object) -> dict[str, Any]:
    """A copy of ``values`` ready to send; ``RecordError`` for what is no metrics row."""
    row = _cleaned(values)
    _encoded(row)
    return row


def _cleaned(values: object) -> dict[str, Any]:
    """``clean_metrics`` but for the JSON check, which ``TrainingSide.log``'s one encode
    of the row makes."""
    if not isinstance(values, Mapping):
        raise RecordError(f"metrics must be a mapping, not {type(values).__name__}")
    bad = [k for k in values if not isinstance(k, str)]
    if bad:
        raise RecordError(f"metric names must be strings, got {type(bad[0]).__name__}")
    return _finite(values)  # a new dict: the caller's mapping is never changed


def _encoded(value: Any) -> bytes:
    try:
        return encode_record(value)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"metrics are not JSON: {exc}") from None


def side_of(state: RunState | None) -> TrainingSide | None:
    side = getattr(state, "training", None)
    return side if isinstance(side, TrainingSide) else None


EVAL_ROWS = (
    "run {run_id} is an evaluation: log_metrics() rows belong to a training run "
    '(init(kind="train")) and are not recorded here{count}. In an evaluation, put '
    "per-episode numbers in the trace's metrics (the report and the platform's samples show "
    "them) and run-level ones in run.update_summary({{...}}) or finish(summary=...)"
)


class _EvalRows:
    """The rows an evaluation refused: one ``run.errors`` entry kept up to date, one
    warning per run."""

    def __init__(self) -> None:
        self.count = 0
        self.entry: int | None = None


_refused: weakref.WeakKeyDictionary[RunState, _EvalRows] = weakref.WeakKeyDictionary()
_refused_lock = threading.Lock()


def refuse_eval_row(state: RunState) -> None:
    """``log_metrics()`` on an evaluation: a ``RecordError`` under ``on_error="raise"``,
    otherwise reported once and counted in that one report."""
    if state.on_error == RAISE:
        raise RecordError(EVAL_ROWS.format(run_id=state.run_id, count=""))
    with _refused_lock:
        rows = _refused.setdefault(state, _EvalRows())
        rows.count += 1
        message = EVAL_ROWS.format(run_id=state.run_id, count=f" ({rows.count} refused so far)")
        first = rows.entry is None
        rows.entry = state.counters.note_error(message, rows.entry)
    if first:
        logger.warning("prime-runs: %s", message)


def log_metrics(state: RunState | None, values: object, step: object) -> None:
    """``Run.log_metrics``. A bad ``step`` raises ``ValueError``; bad ``values`` and late
    calls are handled as ``log_episodes`` handles bad or late records: raised under
    ``on_error="raise"``, otherwise counted and reported. An evaluation refuses the row
    (``refuse_eval_row``); after ``finish()`` it refuses it as late, as 0.1.4 did. Nothing
    else raises."""
    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
        raise ValueError(f"step must be an int >= 0 or None, got {step!r}")
    if state is None:  # disabled: every call accepted
        return
    if not state.gate.enter():  # finish() waits for calls in flight, then refuses more
        refuse_late(state, 1, "metrics")
        return
    try:
        side = side_of(state)
        if side is None:
            refuse_eval_row(state)  # an evaluation has no metrics rows
            return
        try:
            side.log(_cleaned(values), step)
        except RecordError as exc:
            refuse_bad(state, exc, "a metrics row")
    except RecordError:
        raise
    except Exception as exc:  # nothing the SDK does is fatal to the producer
        state.report(f"could not log a metrics row: {type(exc).__name__}: {exc}", exc)
    finally:
        state.gate.leave()


def logged_any(state: RunState | None) -> bool:
    side = side_of(state)
    return side is not None and side.logged > 0


def flush(state: RunState | None, seconds: float) -> bool:
    side = side_of(state)
    return True if side is None else side.drain(time.monotonic() + seconds)


# Forked children write metrics journals of their own (see MetricsJournal.after_fork).
_sides: weakref.WeakSet[TrainingSide] = weakref.WeakSet()


def _after_fork() -> None:
    for side in list(_sides):
        side.after_fork()


_forking.in_child(_after_fork)


# -- step spans and events ---------------------------------------------------------


def metrics_of(attributes: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The row's metrics and step from a ``step`` span's (or event's) attributes."""
    prefix = semconv.TRAIN_METRICS
    values = {
        key[len(prefix) :]: value
        for key, value in attributes.items()
        if key.startswith(prefix) and len(key) > len(prefix)
    }
    step = attributes.get(semconv.TRAIN_STEP)
    return values, step if isinstance(step, int) and not isinstance(step, bool) else None


def _rows(span: ReadableSpan) -> list[Mapping[str, Any]]:
    rows: list[Mapping[str, Any]] = []
    attributes = span.attributes or {}
    if span.name == semconv.STEP_SPAN and semconv.TRAIN_STEP in attributes:
        rows.append(attributes)
    rows.extend(
        e.attributes or {}
        for e in span.events
        if e.name == semconv.STEP_SPAN and semconv.TRAIN_STEP in (e.attributes or {})
    )
    return rows


def log_steps(state: RunState, span: ReadableSpan) -> None:
    """The metrics rows a span of ``state``'s run carries, logged as ``log_metrics`` would
    (a span of an evaluation carries none). Never raises: a span hook must not."""
    if side_of(state) is None:
        return
    for attributes in _rows(span):
        values, step = metrics_of(attributes)
        try:
            log_metrics(state, values, step)
        except Exception as exc:
            logger.warning("prime-runs: a step span's metrics were not logged: %s", exc)

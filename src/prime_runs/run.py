"""``Run``: the handle a producer holds. It wraps the run's root span."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

import prime_runs._runs.closeouts as _closeouts
import prime_runs._runs.compat014 as _compat
import prime_runs._runs.exithooks as _exit
import prime_runs._runs.training as _training
from prime_runs import semconv
from prime_runs._records.encode import EPISODE
from prime_runs._runs.accounting import warn_if_empty
from prime_runs._runs.aio import AsyncFace
from prime_runs._runs.closeouts import CRASH_REASON
from prime_runs._runs.config import CONFIG_SOURCE_KEY, ConfigSource
from prime_runs._runs.finishing import DEFAULT_FINISH_TIMEOUT, budget, check_timeout
from prime_runs._runs.handling import (
    as_records,
    reason_of,
    record_span_attributes,
    refuse_bad,
    refuse_late,
    warn_ignored_finish,
)
from prime_runs._runs.join import carrier
from prime_runs._runs.state import RunState
from prime_runs.errors import PrimeRunsError, RecordError
from prime_runs.status import RunStatus


class Run(AsyncFace):
    """A tracked run. Create it with ``prime_runs.init()`` (``prime_runs.ainit()`` in a
    coroutine).

    Every method is safe to call from any thread; under ``on_error="warn"``
    (the default) none of them raises because of the platform. ``aflush()``,
    ``afinish()`` and ``async with`` are the same calls off the event loop (``_runs/aio``).
    """

    def __init__(
        self,
        state: RunState | None,
        *,
        span: trace.Span,
        tracer: trace.Tracer | None,
        mode: str,
        run_id: str | None = None,
        name: str | None = None,
        context: otel_context.Context | None = None,
        kind: str = "eval",
        config: dict[str, Any] | None = None,
        finish_timeout: float | None = None,
    ) -> None:
        """``context``: where its records' spans go (a join's; else under ``span``);
        ``kind`` and ``config``: a disabled run's; ``finish_timeout``: init()'s, 0.1.4's."""
        self._state = state
        self._span = span
        self._tracer = tracer
        self._ctx = context if context is not None else trace.set_span_in_context(span)
        self._mode = mode
        # A disabled run's; a run's own are its state's, which change when a registration
        # lands after init() returned (``_runs/registering``).
        self._id = run_id or (state.run_id if state else f"disabled-{secrets.token_hex(8)}")
        self._name = name or (state.identity.name if state else self._id)
        # A disabled run's status; for a handle on a join that other handles of this process
        # still use, the status its own finish() gave (see _join.shared_join).
        self._status = RunStatus.RUNNING
        self._kind = kind
        self._finish_timeout = finish_timeout
        self._disabled_summary: dict[str, Any] = {}
        self._disabled_config = config if config is not None else {}
        self._tokens: list[Token[otel_context.Context]] = []
        if state is not None:
            _exit.track(self, state)

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, name={self.name!r}, mode={self.mode!r}, status={self.status})"

    # -- identity --------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The platform's id; a local id while a registration that outlasted
        ``register_timeout`` is under way, and for an offline run."""
        return self._state.run_id if self._state else self._id

    @property
    def url(self) -> str | None:
        return self._state.identity.url if self._state else None

    @property
    def name(self) -> str:
        return self._state.identity.name if self._state else self._name

    @property
    def mode(self) -> str:
        return self._state.identity.mode if self._state else self._mode

    @property
    def kind(self) -> str:
        """``"eval"`` or ``"train"`` (``run.type`` on the records)."""
        return self._state.identity.kind if self._state else self._kind

    @property
    def status(self) -> RunStatus:
        if self._state is None or self._status is not RunStatus.RUNNING:
            return self._status
        return self._state.status

    @property
    def finished(self) -> bool:
        if self._state is None or self._status is not RunStatus.RUNNING:
            return self._status is not RunStatus.RUNNING
        return self._state.finished

    @property
    def on_error(self) -> str:
        """``"warn"`` or ``"raise"``, as given to ``init()``."""
        return self._state.on_error if self._state else "warn"

    @property
    def attached(self) -> bool:
        """Whether ``init(id=...)`` attached this handle to a run a launcher created."""
        return bool(self._state and self._state.description.get("attached"))

    @property
    def config(self) -> dict[str, Any]:
        """The run's config as stored on the platform (a file given by path sits under
        ``CONFIG_SOURCE_KEY``). As in 0.1.4, changes made before ``finish()`` are sent with
        the close-out of a run this process registered."""
        return self._state.config if self._state else self._disabled_config

    @property
    def config_source(self) -> ConfigSource | None:
        """The config file the run was started from (``init(config=path)``), if any."""
        return ConfigSource.from_stored(self.config.get(CONFIG_SOURCE_KEY))

    @property
    def summary(self) -> dict[str, Any]:
        """Before ``finish()``: what ``update_summary()`` gathered (0.1.4 callers may also
        write into it). After: the summary the run was closed with."""
        return _compat.summary_view(self._state, self._disabled_summary)

    def update_summary(self, values: Mapping[str, Any]) -> None:
        """Merge run-level outputs (e.g. ``{"pass@1": 0.62}``) into the summary ``finish()``
        sends, over the one computed from the episodes; a ``finish(summary)`` wins over
        them. Non-finite numbers are dropped. ``TypeError`` for a non-mapping or a value
        JSON cannot hold; after ``finish()`` it is reported (raised under
        ``on_error="raise"``) and changes nothing."""
        _compat.update_summary(self._state, values, self._disabled_summary)

    @property
    def span(self) -> trace.Span:
        """The run's root OpenTelemetry span."""
        return self._span

    def context(self, env: bool = False) -> dict[str, str]:
        """The W3C carrier that lets another process or host log into this run.

        ``{"traceparent", "baggage"}`` (the baggage carries ``prime.run.id`` and
        ``prime.run.mode``, and ``prime.run.kind`` for a training run), or with
        ``env=True`` the ``TRACEPARENT``/``BAGGAGE`` environment form for a subprocess.
        ``prime_runs.init()`` in a process whose environment or context carries it, or
        ``init(join=carrier)``, joins this run instead of creating another; only this
        process closes it.
        Empty for a disabled run. While a registration that outlasted ``register_timeout``
        is under way, it waits for it (at most 300 s): a carrier names the platform's id.
        """
        pending = self._state.registering if self._state is not None else None
        if pending is not None:  # a worker joined under the local id would upload to no run
            pending.wait(time.monotonic() + DEFAULT_FINISH_TIMEOUT)
        return carrier(self._span, self.id, self.mode, env=env, kind=self.kind)

    @property
    def archive_path(self) -> str | None:
        """Where the run's local archive is, if it has one."""
        if self._state is None or self._state.archive is None:
            return None
        return str(self._state.archive.path)

    # -- accounting ------------------------------------------------------------------

    @property
    def dropped_records(self) -> int:
        """Records that reached no sink: the upload queue was full (they are still in the
        archive for ``prime-runs sync``), the record was invalid or logged after
        ``finish()`` (see ``errors``), or, offline, the journal could not store it."""
        if self._state is None:
            return 0
        c = self._state.counters
        return c.dropped + c.invalid + (0 if self._state.workers else c.unjournaled)

    @property
    def failed_records(self) -> dict[str, int]:
        """Per sink, records that sink did not store. Never sum across sinks."""
        if self._state is None:
            return {}
        return dict(self._state.counters.failed)

    @property
    def acknowledged_records(self) -> dict[str, int]:
        """Per sink, records the platform acknowledged."""
        return dict(self._state.counters.acked) if self._state else {}

    @property
    def logged_records(self) -> int:
        return self._state.counters.logged if self._state else 0

    @property
    def errors(self) -> list[str]:
        """Contained failures, oldest first."""
        return list(self._state.counters.errors) if self._state else []

    # -- logging ---------------------------------------------------------------------

    def log_episodes(self, episodes: object) -> None:
        """Log episode records: ``to_record()`` objects or mappings, one or many.

        Each record is encoded once, now, and written to the archive before this
        returns; the producer may reuse its objects afterwards.
        """
        self._log(episodes)

    def log_traces(self, traces: object) -> None:
        """Log bare trace records (same forms as ``log_episodes``)."""
        self._log(traces)

    def log_metrics(self, values: Mapping[str, Any], *, step: int | None = None) -> None:
        """Log one step's metrics of a training run: one row on the platform per call,
        sent off this thread and journaled first. ``step`` becomes ``values["step"]``
        unless set; every row gets a ``_timestamp``; non-finite numbers are dropped. Bad
        values are handled as bad records are, and so is a call after ``finish()``. An
        evaluation refuses the row: ``RecordError`` under ``on_error="raise"``, otherwise one
        warning and one ``errors`` entry per run. See ``docs/training.md``."""
        if self._state is not None and self._status is not RunStatus.RUNNING:
            refuse_late(self._state, 1, "metrics")  # this handle of a shared join finished
            return
        _training.log_metrics(self._state, values, step)

    def _log(self, records: object) -> None:
        state = self._state
        if state is None:
            return
        try:
            items = as_records(records)
        except PrimeRunsError as exc:
            refuse_bad(state, exc, "a record")
            return
        gate = state.gate
        if self._status is not RunStatus.RUNNING or not gate.enter():
            refuse_late(state, sum(1 for _ in items))
            return
        try:
            iterator = iter(items)
            for record in iterator:
                if gate.sealed:  # finish() stopped waiting for this call
                    refuse_late(state, 1 + sum(1 for _ in iterator))
                    return
                try:
                    encoded = state.encode(record)
                except RecordError as exc:
                    refuse_bad(state, exc, "a record")
                    continue
                state.ingest(encoded)
                self._record_span(encoded.kind, encoded.record, len(encoded.data))
        finally:
            gate.leave()

    def _record_span(self, kind: str, record: Mapping[str, Any], size: int) -> None:
        if self._tracer is None:
            return
        # The payload travels beside the span (already journaled and queued), so the
        # user's other exporters are not handed a megabyte attribute.
        span = self._tracer.start_span(
            semconv.EPISODE_SPAN if kind == EPISODE else semconv.TRACE_SPAN,
            context=self._ctx,
            attributes=record_span_attributes(kind, record, size),
        )
        span.end()

    # -- flush and finish --------------------------------------------------------------

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every record logged so far is acknowledged (or ``timeout``).

        Returns whether every record logged so far is stored by every sink: False while
        some wait, or when a sink refused some or stopped for the run (``failed_records``
        says which; the journal keeps them for ``prime-runs sync``). Under
        ``on_error="raise"`` the first contained error is raised here. ``timeout`` is
        seconds ``>= 0`` (``None``: 300 s; ``inf``: up to 24 hours); ``nan`` or a negative
        number raises ``ConfigurationError``.
        """
        seconds = check_timeout(timeout, default=DEFAULT_FINISH_TIMEOUT, what="flush")
        if self._state is None:
            return True
        done = self._state.flush(seconds)
        done = _training.flush(self._state, seconds) and done  # a training run's metrics
        self._state.raise_pending()
        return done

    def finish(
        self,
        summary: Mapping[str, Any] | None = None,
        status: RunStatus | str = RunStatus.COMPLETED,
        error: str | BaseException | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Close the run: drain uploads, then finalize (completed) or close it out.

        Idempotent: the first call's status wins. ``summary`` defaults to one
        computed from the episodes this run saw. ``timeout`` bounds the whole call:
        it returns within ``timeout`` seconds plus half a second (default 300 s;
        ``inf``: up to 24 hours; ``nan`` or a negative number raises
        ``ConfigurationError`` and leaves the run open). When the platform has stored
        nothing all run, it stops waiting after about 10 s and says what is kept
        locally for ``prime-runs sync``.
        """
        if timeout is None:
            timeout = self._finish_timeout
        seconds = check_timeout(timeout, default=DEFAULT_FINISH_TIMEOUT, what="finish")
        status = RunStatus.coerce(status)
        if not status.terminal:
            raise ValueError("finish() takes a terminal status; the run stays open")
        reason = reason_of(error)
        if self._state is None:
            if self._status is RunStatus.RUNNING:
                self._status = status
            return
        if summary is not None and not isinstance(summary, Mapping):
            raise TypeError(f"summary must be a mapping, not {type(summary).__name__}")
        state = self._state
        if self._status is not RunStatus.RUNNING:
            return  # this handle finished already (the first call's status wins)
        if not state.owner and state.release_handle() > 0:
            # Other handles of this process's join of the run still use it: this one only
            # drains what was logged so far (see _join.shared_join).
            self._status = status
            _exit.untrack(self)
            state.flush(seconds)
            state.raise_pending()
            return
        if not state.finish(status, dict(summary) if summary else None, reason, seconds):
            warn_ignored_finish(state.run_id, status, reason, summary)
            return
        if not _training.logged_any(state):  # metrics rows are what a training run logs
            warn_if_empty(state)
        _exit.untrack(self)
        _closeouts.end_span(self._span, status, reason)  # the one way a run span ends
        state.raise_pending()

    def fail(
        self, error: str | BaseException | None = None, *, timeout: float | None = None
    ) -> None:
        """Finish the run as failed with ``error`` as the reason (``timeout`` as in finish)."""
        self.finish(None, RunStatus.FAILED, error, timeout=timeout)

    def crash(self, timeout: float) -> None:
        """Called at interpreter exit for a run that was never finished: it gets
        ``init(finish_timeout=)`` when given (0.1.4 closed it within that), else ``timeout``."""
        if self._finish_timeout is not None:
            timeout = budget(self._finish_timeout, timeout)
        if self._state is not None and not self._state.finished:
            state = self._state
            if state.forked or not state.owner:
                state.finish(state.status, None, None, timeout)  # drain only; never close
                return
            if state.finish(RunStatus.CRASHED, None, CRASH_REASON, timeout):
                _closeouts.end_span(self._span, RunStatus.CRASHED, CRASH_REASON)

    def reset_after_fork(self) -> None:
        """Kept for 0.1.4 code, which had its fork hook call it; forks are handled here
        without it (a child sends what it logs and never closes the run), so it does
        nothing."""

"""Opening a run, the one way for every kind: offline; online, registered within
``register_timeout``; online past it, registered when the platform answers; and a raw
``run`` span's, registered off the thread that started the span (``_runs/registering``).

What differs between an evaluation and a training run is its ``Kind``
(``_runs/eval_kind``, ``_runs/train_kind``): how it is described, registered, given its
sinks and closed, and what a failed registration means (an evaluation goes on offline, a
training run must not run unregistered).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from prime_runs._runs.eval_kind import EvalKind
from prime_runs._runs.options import RunOptions, archive_root, resolve
from prime_runs._runs.registering import (
    Attempt,
    Registered,
    begin,
    landed,
    note_intent,
    record_platform,
    say_registered,
    warn_late,
)
from prime_runs._runs.state import RunState
from prime_runs._runs.train_kind import TrainKind
from prime_runs._runs.training import check_kind
from prime_runs.platform.training import TRAIN, TrainingSpec
from prime_runs.settings import DISABLED, OFFLINE, ONLINE, Settings, register_timeout


class Registration(Protocol):
    """The platform's run, whatever its kind."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str | None: ...


R = TypeVar("R", bound=Registration)


class Kind(Protocol[R]):
    """One run's kind, made for one opening (it keeps the platform client it connects)."""

    opts: RunOptions
    settings: Settings

    @property
    def on_offline(self) -> Callable[[], None] | None: ...  # lets go of what waited for it

    def offline(self) -> RunState: ...
    def check_online(self) -> None: ...  # what the platform requires, before any request
    def connect(self) -> None: ...  # the platform client(s)
    def release(self) -> None: ...
    def attach(self) -> R: ...
    def request(self) -> Callable[[], R]: ...  # the create, its body checked now
    def failed(self, exc: BaseException) -> RunState: ...  # raises, or goes on offline
    def online(self, registration: R) -> RunState: ...
    def local(self) -> RunState: ...  # under a local id, its records held for the sinks
    def registered(self, state: RunState, registration: R) -> Registered: ...
    def not_registered(self, state: RunState, exc: BaseException) -> None: ...
    def create(self, state: RunState) -> R: ...  # a raw span's, registered once


def _kind(opts: RunOptions) -> Kind[Any] | None:
    """The kind ``opts`` asks for, its inputs resolved; ``None`` for a disabled run."""
    spec = check_kind(opts.kind, opts.training)
    settings, config, environments = resolve(opts)
    if settings.mode == DISABLED:
        return None
    root = archive_root(opts.dir)
    if opts.kind == TRAIN:
        return TrainKind(opts, settings, config, environments, root, spec or TrainingSpec())
    return EvalKind(opts, settings, config, environments, root)


def open_run(opts: RunOptions) -> RunState | None:
    """Open the run ``init()`` asked for; ``None`` for a disabled run."""
    kind = _kind(opts)
    return None if kind is None else _opened(kind)


def _opened(kind: Kind[Any]) -> RunState:
    return kind.offline() if kind.settings.mode == OFFLINE else _open_online(kind)


def _open_online(kind: Kind[R]) -> RunState:
    kind.check_online()
    waited = register_timeout(kind.opts.register_timeout)  # a bad setting raises first
    kind.connect()
    try:
        if kind.opts.id:  # attaching sends no request
            registration = kind.attach()
        else:
            attempt = Attempt(kind.request())
            if not attempt.within(waited):
                return _open_late(kind, attempt, waited)
            registration = attempt.result()
    except BaseException as exc:
        kind.release()
        return kind.failed(exc)
    return kind.online(registration)


def _open_late(kind: Kind[R], attempt: Attempt[R], waited: float) -> RunState:
    """``init()`` waited ``register_timeout`` for the create: the run goes on locally, and
    is registered by the request still under way when the platform answers."""
    state = kind.local()
    note_intent(state, attempt)  # a crash before the answer: sync looks it up, never resends
    local_id = state.run_id

    def register() -> Registered:
        try:
            registration = landed(state, attempt)
        except BaseException as exc:
            kind.release()
            kind.not_registered(state, exc)
            raise
        where = {"id": registration.id, "url": registration.url, "name": registration.name}
        record_platform(state, where)
        say_registered(local_id, registration.id, registration.url)
        return kind.registered(state, registration)

    begin(state, register, kind.on_offline)
    warn_late(state, waited)
    return state


def open_raw_run(opts: RunOptions) -> RunState | None:
    """Open a raw ``run`` span's run without waiting on the network: a training run
    (``prime.run.type = "train"``) or an evaluation; ``None`` when disabled."""
    kind = _kind(opts)
    if kind is None:
        return None
    if kind.settings.mode != ONLINE or opts.id:  # offline or attached: no request
        return _opened(kind)
    return _open_raw(kind)


def _open_raw(kind: Kind[R]) -> RunState:
    kind.check_online()  # a span that cannot register is not tracked
    state = kind.local()

    def register() -> Registered:
        kind.connect()
        try:
            registration = kind.create(state)
        except BaseException:
            kind.release()
            raise
        return kind.registered(state, registration)

    begin(state, register, kind.on_offline)
    return state

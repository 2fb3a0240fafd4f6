"""StandInPlatform: the public handle on the stand-in server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from prime_runs.testing._dispatch import Dispatcher
from prime_runs.testing._faults import ANY, Fault, FaultBook
from prime_runs.testing._records import RecordedRequest
from prime_runs.testing._reply import TRACES_MODES, VARIANTS, Settings
from prime_runs.testing._routes import check_route
from prime_runs.testing._server import Server
from prime_runs.testing._state import Rejection, State, utc_now
from prime_runs.testing._training_standin import TrainingStandIn


class StandInPlatform(TrainingStandIn):
    """A real HTTP server on loopback that plays the Prime platform API and Prime Traces.

    One base URL serves both ``/api/v1/...`` platform routes and ``/api/v1/traces``.
    ``variant`` picks how ``PUT /evaluations/{id}`` treats ``status``: "N" applies it
    (409 once terminal), "S" refuses unknown fields with 422, "S-ignore" answers 200 and
    ignores it. ``traces`` is "enabled", "service_not_enabled" or "forbidden" (403 with that
    code on every traces route). ``check_time_window`` enables the service's 365-day
    ``timing.start`` window; it is off by default because recorded fixture data ages out
    of the window, which would make hermetic tests depend on the calendar.
    ``keep_documents=False`` (for benchmarks) keeps only ids of stored traces and episodes
    (``{"id": ...}`` stubs; ``RecordedRequest.lines`` stays empty) so memory stays flat.
    ``on_request`` is called (on the server's thread) with each request's
    ``RecordedRequest`` once it is answered; ``python -m prime_runs.testing -v`` prints
    ``RecordedRequest.summary()`` with it.

    ``stop()`` followed by ``start()`` rebinds the same port and keeps all stored state,
    which simulates a platform restart.

    Training runs (contract Appendix A) are played too: register, metrics, presign with
    a loopback object store, confirm, finalize and status under ``/api/v1/rft``, and the
    monitoring calls under the internal root ``/api/internal/rft`` (see
    ``TrainingStandIn`` and docs/training.md).
    """

    def __init__(
        self,
        variant: str = "N",
        api_key: str = "test-key",
        traces: str = "enabled",
        *,
        check_time_window: bool = False,
        keep_documents: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        on_request: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        self._on_request = on_request
        self._settings = Settings(
            api_key=api_key, check_time_window=check_time_window, keep_documents=keep_documents
        )
        self.variant = variant
        self.traces_mode = traces
        self._state = State()
        self._faults = FaultBook(self._state.lock)
        self._host = host
        self._port = port
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def __repr__(self) -> str:
        where = self._settings.base_url or "not started"
        return f"StandInPlatform({where}, variant={self.variant!r}, traces={self.traces_mode!r})"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> StandInPlatform:
        """Bind and serve in a daemon thread; return self."""
        if self._server is not None:
            raise RuntimeError("the stand-in is already running")
        self._stopping = threading.Event()
        dispatcher = Dispatcher(
            self._state, self._faults, self._settings, self._stopping, self._on_request
        )
        server = Server((self._host, self._port), dispatcher, self._stopping)
        self._port = server.server_address[1]
        self._settings.base_url = f"http://{self._host}:{self._port}"
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"prime-runs-standin-{self._port}",
            daemon=True,
        )
        self._server = server
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection; stalled requests are let go unanswered.

        Returns promptly even while requests are stalled or delayed. Idempotent.
        """
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        self._faults.unstall()
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StandInPlatform:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- configuration -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``; available once started."""
        if not self._settings.base_url:
            raise RuntimeError("start() the stand-in before asking for its URL")
        return self._settings.base_url

    @property
    def api_key(self) -> str:
        return self._settings.api_key

    @property
    def variant(self) -> str:
        return self._settings.variant

    @variant.setter
    def variant(self, value: str) -> None:
        if value not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, not {value!r}")
        self._settings.variant = value

    @property
    def traces_mode(self) -> str:
        """How traces routes answer; settable at run time (e.g. access revoked mid-run)."""
        return self._settings.traces_mode

    @traces_mode.setter
    def traces_mode(self, value: str) -> None:
        if value not in TRACES_MODES:
            raise ValueError(f"traces must be one of {TRACES_MODES}, not {value!r}")
        self._settings.traces_mode = value

    @property
    def check_time_window(self) -> bool:
        return self._settings.check_time_window

    @check_time_window.setter
    def check_time_window(self, value: bool) -> None:
        self._settings.check_time_window = value

    @property
    def samples_order(self) -> str:
        """The sample listing's order: ``"append"`` (what the SDK assumes) or ``"newest"`` first."""
        return self._settings.samples_order

    @samples_order.setter
    def samples_order(self, value: str) -> None:
        if value not in ("append", "newest"):
            raise ValueError(f"samples_order must be 'append' or 'newest', not {value!r}")
        self._settings.samples_order = value

    def env(self) -> dict[str, str]:
        """Environment variables that point the SDK family at this stand-in."""
        url = self.base_url
        return {
            "PRIME_API_KEY": self.api_key,
            "PRIME_API_BASE_URL": url,
            "PRIME_TRACES_URL": url,
            "PRIME_FRONTEND_URL": url,
        }

    # -- fault injection -----------------------------------------------------------------

    def fail(
        self,
        route: str,
        status: int = 503,
        *,
        times: int = 1,
        after_processing: bool = False,
        retry_after: float | str | None = None,
        delay: float | None = None,
        reset: bool = False,
        code: str | None = None,
    ) -> None:
        """Make the next ``times`` requests to ``route`` ("*": any route) fail.

        ``after_processing``: do the real work first (store it), then answer ``status``.
        ``reset``: close the connection without answering (after the work when
        ``after_processing``). ``delay``: wait that long before answering. ``retry_after``
        becomes the Retry-After header (a str is sent verbatim, e.g. an HTTP-date). ``code``
        is the traces error code; without one, 429 answers ``rate_limited`` on traces routes
        and other statuses a FastAPI ``detail`` body. Faults queue up in call order.
        """
        if route != ANY:
            check_route(route)
        if times < 1:
            raise ValueError("times must be at least 1")
        if not 100 <= status <= 599:
            raise ValueError(f"not an HTTP status: {status}")
        fault = Fault(status, after_processing, retry_after, delay, reset, code)
        self._faults.add(route, fault, times)

    def hold(self, route: str, seconds: float, *, times: int = 1) -> None:
        """Hold the next ``times`` requests to ``route`` for ``seconds`` each, then handle
        them as usual: stored whether or not their client is still waiting, as the platform
        stores a slow request whose client gave up, exited or was killed. Later requests to
        the route are not held. ``stop()`` releases a held request unhandled."""
        check_route(route)
        if times < 1 or seconds < 0:
            raise ValueError("times must be at least 1 and seconds not negative")
        self._faults.hold(route, seconds, times)

    def stall(self, route: str | None, seconds: float, *, after: int = 0) -> None:
        """Until ``unstall()``, every request to ``route`` (None: all) waits ``seconds``
        before it is handled, but the first ``after`` of them. ``unstall()`` and ``stop()``
        release waiting requests."""
        if route is not None:
            check_route(route)
        if after < 0:
            raise ValueError("after must be at least 0")
        self._faults.stall(route, seconds, after)

    def unstall(self) -> None:
        self._faults.unstall()

    def outage(self, status: int = 503, *, routes: Iterable[str] | None = None) -> None:
        """Until ``recover()``, every request (to ``routes``, or all) answers ``status``
        without being processed."""
        chosen = None if routes is None else frozenset(check_route(r) for r in routes)
        self._faults.outage(status, chosen)

    def recover(self) -> None:
        self._faults.recover()

    def reject_trace_ids(
        self, ids: Iterable[str], *, code: str = "invalid_trace", status: int = 400
    ) -> None:
        """Refuse (nothing stored) any upload that contains one of these trace or episode
        ids, answering ``status`` with ``code``. Lasts until ``clear_rejections()``."""
        with self._state.lock:
            for record_id in ids:
                self._state.rejections[record_id] = Rejection(status, code)

    def clear_rejections(self) -> None:
        with self._state.lock:
            self._state.rejections.clear()

    def reset(self) -> None:
        """Forget every request, everything stored, every fault and hook."""
        self._faults.clear()
        self._state.clear()

    # -- seeding -------------------------------------------------------------------------

    def add_environment(self, slug: str, id: str | None = None) -> str:
        """Pre-register an environment; return its id.

        ``"owner/name"`` makes it findable by slug lookup only (lookup never creates).
        A bare ``"name"`` makes resolve-by-name return it instead of creating one.
        """
        owner, _, name = slug.rpartition("/")
        if not name or ("/" in slug and not owner):
            raise ValueError(f"not an environment slug or name: {slug!r}")
        env_id = id or (f"env_{owner}_{name}" if owner else f"env_{name}")
        self._state.add_environment(owner or None, name, env_id)
        return env_id

    def add_evaluation(
        self, eval_id: str, *, name: str = "launcher-run", status: str = "RUNNING", **fields: Any
    ) -> str:
        """Pre-create an evaluation, as a launcher would (for ``init(id=...)`` tests)."""
        now = utc_now()
        evaluation = {
            "evaluation_id": eval_id,
            "name": name,
            "environments": [],
            "tags": [],
            "metadata": {},
            "metrics": {},
            "status": status,
            "error_message": None,
            "finalize_count": 0,
            "eval_type": "environment",
            "created_at": now,
            "updated_at": now,
            "finalized_at": None,
            "model_name": None,
            "dataset": None,
            "framework": None,
            "description": None,
            "team_id": None,
            "task_type": None,
            "suite_id": None,
            "run_id": None,
            **fields,
        }
        with self._state.lock:
            self._state.evaluations[eval_id] = evaluation
            self._state.samples.setdefault(eval_id, [])
        return eval_id

    def complete(self, eval_id: str) -> None:
        """Finish the platform's statistics task: PROCESSING becomes COMPLETED."""
        with self._state.lock:
            evaluation = self._state.evaluations[eval_id]
            if evaluation["status"] != "PROCESSING":
                raise ValueError(f"evaluation {eval_id} is {evaluation['status']}, not PROCESSING")
            evaluation["status"] = "COMPLETED"

    # -- inspection (each returns a copy taken under the lock) ---------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        check_route(route)
        with self._state.lock:
            return [r for r in self._state.requests if r.route == route]

    @property
    def evaluations(self) -> dict[str, dict[str, Any]]:
        """Evaluation id -> stored state (snake_case, plus ``finalize_count``)."""
        with self._state.lock:
            return {k: dict(v) for k, v in self._state.evaluations.items()}

    def samples(self, eval_id: str) -> list[dict[str, Any]]:
        """Rows stored for ``eval_id`` in order, duplicates kept; [] for an unknown id."""
        with self._state.lock:
            return list(self._state.samples.get(eval_id, ()))

    @property
    def traces(self) -> dict[str, dict[str, Any]]:
        """Trace id -> the stored document (bare lines and episode members alike)."""
        with self._state.lock:
            return dict(self._state.traces)

    @property
    def trace_writes(self) -> dict[str, int]:
        """Trace id -> how many committed lines stored it (receipt replays do not count)."""
        with self._state.lock:
            return dict(self._state.trace_writes)

    @property
    def episodes(self) -> dict[str, dict[str, Any]]:
        """Episode id -> the stored envelope, ``traces`` reduced to member ids."""
        with self._state.lock:
            return dict(self._state.episodes)

    @property
    def episode_writes(self) -> dict[str, int]:
        with self._state.lock:
            return dict(self._state.episode_writes)

    @property
    def receipts(self) -> list[dict[str, str]]:
        """Receipts of committed uploads, in commit order (replays not repeated)."""
        with self._state.lock:
            return [dict(r) for r in self._state.receipts]

    @property
    def uploads(self) -> list[dict[str, Any]]:
        """Committed uploads in order: upload_id, line_format, context, trace/episode ids."""
        with self._state.lock:
            return [
                {
                    "upload_id": u.upload_id,
                    "line_format": u.line_format,
                    "context": u.context,
                    "trace_ids": list(u.trace_ids),
                    "episode_ids": list(u.episode_ids),
                }
                for u in self._state.uploads.values()
            ]

    @property
    def server_errors(self) -> list[str]:
        """Tracebacks of stand-in bugs (each answered 500). Tests may assert it is empty."""
        with self._state.lock:
            return list(self._state.errors)

"""One request's way through the stand-in: record, stall, faults, auth, handler."""

from __future__ import annotations

import hmac
import json
import threading
import traceback
from collections.abc import Callable
from http import HTTPStatus
from urllib.parse import parse_qsl

import orjson

from prime_runs._records.jsonio import may_hold_long_int
from prime_runs.testing._faults import Fault, FaultBook
from prime_runs.testing._platform_api import SAMPLES_BODY_LIMIT, PlatformApi
from prime_runs.testing._records import RecordedRequest
from prime_runs.testing._reply import Call, Reply, Settings, detail, traces_error
from prime_runs.testing._routes import TRACES_ROUTES, UNKNOWN, match
from prime_runs.testing._state import State
from prime_runs.testing._traces_api import TracesApi
from prime_runs.testing._training_api import TrainingApi
from prime_runs.testing._training_routes import INTERNAL_ROUTES, OBJECT_ROUTE
from prime_runs.testing._validate import Invalid

#: Default error codes for injected traces failures when ``fail(code=None)``.
_DEFAULT_TRACES_CODES = {
    400: "invalid_trace",
    401: "unauthenticated",
    403: "forbidden",
    409: "line_format_conflict",
    429: "rate_limited",
}


class Dispatcher:
    """Turns (method, path, headers, body) into a Reply, or None to drop the connection."""

    def __init__(
        self,
        state: State,
        faults: FaultBook,
        settings: Settings,
        stopping: threading.Event,
        on_request: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        self._on_request = on_request
        self._state = state
        self._faults = faults
        self._settings = settings
        self._stopping = stopping
        platform = PlatformApi(state, settings)
        traces = TracesApi(state, settings)
        training = TrainingApi(state, settings)
        self._handlers: dict[str, Callable[[Call], Reply]] = {
            "env_resolve": platform.env_resolve,
            "env_lookup": platform.env_lookup,
            "eval_create": platform.eval_create,
            "eval_list": platform.eval_list,
            "eval_get": platform.eval_get,
            "eval_update": platform.eval_update,
            "eval_finalize": platform.eval_finalize,
            "samples_append": platform.samples_append,
            "samples_list": platform.samples_list,
            "traces_upload": traces.upload,
            "traces_get": traces.get_trace,
            "episodes_get": traces.get_episode,
            "rft_register": training.register,
            "rft_status": training.status,
            "object_put": training.object_put,
        }
        for monitoring in ("metrics", "presign", "confirm", "finalize"):
            handler = getattr(training, monitoring)
            self._handlers[f"rft_{monitoring}"] = handler
            self._handlers[f"internal_rft_{monitoring}"] = handler

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> Reply | None:
        path, _, query_string = raw_path.partition("?")
        found = match(method, path)
        query = dict(parse_qsl(query_string, keep_blank_values=True))
        record = RecordedRequest(method, path, found.route, headers, query, body_size=len(body))
        call = Call(method, found.route, found.params, query, headers, body, record)
        if found.route not in TRACES_ROUTES and body and len(body) <= SAMPLES_BODY_LIMIT:
            try:
                call.json = record.json = _loads(body)
            except ValueError:
                pass  # the handler answers 422
        with self._state.lock:
            self._state.requests.append(record)
        try:
            reply = self._pipeline(call, found.wrong_method)
        except Exception:  # a stand-in bug must not hang the client; keep it for the test
            with self._state.lock:
                self._state.errors.append(traceback.format_exc())
            reply = detail(500, "Internal Server Error")
        if reply is not None:
            record.status = reply.status
            if found.route in TRACES_ROUTES and isinstance(reply.body, dict):
                error = reply.body.get("error")
                if isinstance(error, dict):
                    record.error_code = error.get("code")
        if self._on_request is not None:
            try:
                self._on_request(record)
            except Exception:  # an observer's bug is kept for the test, never answered
                with self._state.lock:
                    self._state.errors.append(traceback.format_exc())
        return reply

    def _pipeline(self, call: Call, wrong_method: bool) -> Reply | None:
        route = call.route
        held = self._faults.take_hold(route)
        if held is not None:
            self._stopping.wait(held)  # then stored, whether its client still waits or not
        stall = self._faults.stall_for(route)
        if stall is not None:
            stall.released.wait(stall.seconds)
        if self._stopping.is_set():
            return None
        outage = self._faults.outage_for(route)
        if outage is not None:
            return self._fault_reply(route, Fault(outage))
        fault = self._faults.take(route)
        if fault is not None and not fault.after_processing:
            return self._inject(route, fault)
        reply = self._process(call, wrong_method)
        if fault is not None:
            return self._inject(route, fault)
        return reply

    def _process(self, call: Call, wrong_method: bool) -> Reply:
        if call.route == UNKNOWN:
            return detail(405, "Method Not Allowed") if wrong_method else detail(404, "Not Found")
        is_traces = call.route in TRACES_ROUTES
        if call.route == OBJECT_ROUTE:  # a presigned URL authenticates itself
            return self._handlers[call.route](call)
        expected = f"Bearer {self._settings.api_key}"
        given = call.headers.get("authorization", "")
        if call.route in INTERNAL_ROUTES:
            # The internal router reads a hosted run's token from x-api-key.
            token = call.headers.get("x-api-key", "").encode()
            if not hmac.compare_digest(token, self._settings.api_key.encode()):
                return detail(401, "Invalid or missing x-api-key")
        if not hmac.compare_digest(given.encode(), expected.encode()):
            if is_traces:
                return traces_error(401, "unauthenticated", "invalid or missing credentials")
            return detail(401, "Invalid or missing API key")
        mode = self._settings.traces_mode
        if is_traces and mode != "enabled":
            message = (
                "Prime Traces is not enabled for this account"
                if mode == "service_not_enabled"
                else "the token lacks the required traces scope"
            )
            return traces_error(403, mode, message)
        try:
            return self._handlers[call.route](call)
        except Invalid as exc:
            return exc.reply()

    def _inject(self, route: str, fault: Fault) -> Reply | None:
        if fault.delay:
            self._stopping.wait(fault.delay)
            if self._stopping.is_set():
                return None
        if fault.reset:
            return None
        return self._fault_reply(route, fault)

    @staticmethod
    def _fault_reply(route: str, fault: Fault) -> Reply:
        try:
            phrase = HTTPStatus(fault.status).phrase
        except ValueError:
            phrase = "Error"
        message = f"{phrase} (injected by the stand-in)"
        code = fault.code or _DEFAULT_TRACES_CODES.get(fault.status)
        if route in TRACES_ROUTES and code is not None:
            reply = traces_error(fault.status, code, message)
        else:
            reply = detail(fault.status, message)
        if fault.retry_after is not None:
            value = fault.retry_after
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            reply.headers["Retry-After"] = str(value)
        return reply


def _loads(body: bytes) -> object:
    """``json.loads(body)``, with orjson first whatever the size: a stand-in that decodes
    slowly competes with the client it measures (2 cores). The SDK's own decoder keeps to
    the standard library above 4 MiB to bound its memory; a stand-in need not, and a samples
    batch of verifiers-sized rows is larger than that."""
    if not may_hold_long_int(body):  # orjson reads an integer beyond 64 bits as a float
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # NaN, a lone surrogate...: whatever json.loads makes of it
    return json.loads(body)

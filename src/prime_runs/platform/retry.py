"""The one retry policy: every request the SDK sends (the platform API and Prime Traces)
and every sink that sends them follow it, within one budget, the caller's deadline
(contract §2.2 and §12.2).

- **A request** that fails transiently (429, 502, 503, 504, a transport error) is tried
  up to ``ATTEMPTS`` times in all. Before each retry it waits the ``Retry-After`` the
  platform gave (at most ``RETRY_AFTER_CAP``), else :func:`backoff`. A call that must
  not be replayed is not retried after an ambiguous failure (the caller says which).
- **A sink** (``exporters/_channel``) whose request still failed transiently keeps the
  batch and resends the same bytes on its next delivery, after :func:`resend_wait`.
  ``STREAK`` such failures in a row mean the platform is down rather than flaky: the
  sink stops for the run and the journal keeps its records for ``prime-runs sync``.
  A delivery that ran out of its caller's time (a short flush, ``finish()`` giving up)
  is not counted: its batch waits for the next delivery.
- **The budget.** No wait runs past the caller's deadline, each attempt's timeout is
  cut to the time left (at least ``MIN_ATTEMPT_TIMEOUT``), and a deadline cut by its
  owner (``finish()`` giving up, an export timing out) wakes a wait at once.

The values are module attributes read at use, so a test can shrink them with
``monkeypatch``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

ATTEMPTS = 5
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 60.0
MIN_ATTEMPT_TIMEOUT = 1.0
STREAK = 3
RESEND_FIRST = 0.5
RESEND_CAP = 30.0
# A delivery given no deadline (none of the SDK's own paths) still ends some time.
DEFAULT_BUDGET = 600.0

T = TypeVar("T")


class Cuttable(Protocol):
    """A deadline its owner may bring forward (a sink's ``Deadline``)."""

    @property
    def at(self) -> float: ...

    def sleep(self, seconds: float) -> bool: ...


Budget = float | Cuttable


def left(deadline: Budget | None) -> float | None:
    """Seconds until ``deadline`` (a ``time.monotonic()`` value or a cuttable one)."""
    if deadline is None:
        return None
    at = deadline if isinstance(deadline, (int, float)) else deadline.at
    return at - time.monotonic()


def backoff(attempt: int) -> float:
    """``min(30, 2^n) * U(0.5, 1.5)`` seconds before attempt ``n + 1`` (``n`` from 0)."""
    return min(BACKOFF_CAP, 2.0**attempt) * random.uniform(0.5, 1.5)


def wait_before(attempt: int, retry_after: float | None) -> float:
    """Seconds before retry ``attempt`` (from 0): ``Retry-After`` when the platform gave
    one (capped), else :func:`backoff`."""
    if retry_after is not None:
        return min(max(0.0, float(retry_after)), RETRY_AFTER_CAP)
    return backoff(attempt)


def resend_wait(streak: int) -> float:
    """Seconds a sink waits before resending after its ``streak``-th failure in a row."""
    return min(RESEND_FIRST * 2 ** min(max(0, streak - 1), 16), RESEND_CAP)


def attempt_timeout(timeout: float, deadline: Budget | None) -> float:
    remaining = left(deadline)
    return timeout if remaining is None else max(MIN_ATTEMPT_TIMEOUT, min(timeout, remaining))


def retrying(
    send: Callable[[float], T],
    *,
    timeout: float,
    deadline: Budget | None,
    retryable: Callable[[BaseException], bool],
    attempts: int | None = None,
    on_retry: Callable[[BaseException, int, int, float, float | None], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``send(attempt_timeout)`` under the policy; the first attempt is always made. The
    last failure propagates. ``on_retry(error, attempt, attempts, wait, time_left)`` hears
    each retry before its wait."""
    total = max(1, attempts or ATTEMPTS)
    for attempt in range(total):
        try:
            return send(attempt_timeout(timeout, deadline))
        except Exception as error:
            if attempt == total - 1 or not retryable(error):
                raise
            wait = wait_before(attempt, getattr(error, "retry_after", None))
            remaining = left(deadline)
            if remaining is not None and wait >= remaining:
                raise
            if on_retry is not None:
                on_retry(error, attempt, total, wait, remaining)
            if deadline is None or isinstance(deadline, (int, float)):
                sleep(wait)
            elif not deadline.sleep(wait):
                raise  # the deadline was cut meanwhile
    raise AssertionError("unreachable")  # pragma: no cover

"""The training metrics sink: one ``POST /rft/metrics`` per logged step (contract App. A).

Each item's ``data`` is the request body itself, encoded on the producer's thread. Rows go
one request each, in the order they were logged; a replay after an ambiguous failure is
safe (the platform keeps one row per step), so a transient failure keeps the rest of the
batch for a resend.
"""

from __future__ import annotations

from prime_runs._records.item import Deadline, Item, Outcome, as_deadline
from prime_runs.errors import (
    APIError,
    ConflictError,
    RetryableAPIError,
    TransportError,
    ValidationRejectedError,
)
from prime_runs.platform.training import TrainingPlatform

SINK_NAME = "train_metrics"


class MetricsSink:
    """Sends metrics rows of one training run. Never raises from ``export``."""

    name = SINK_NAME

    def __init__(self, platform: TrainingPlatform, run_id: str, *, owns_client: bool) -> None:
        self._platform = platform
        self._run_id = run_id
        self._owns_client = owns_client

    def __repr__(self) -> str:
        return f"MetricsSink({self._run_id!r})"

    def export(self, items: list[Item], deadline: float | Deadline) -> Outcome:
        deadline = as_deadline(deadline)
        outcome = Outcome()
        for index, item in enumerate(items):
            if deadline.expired():
                outcome.retry.extend(items[index:])
                outcome.retry_reason = "out of time"
                return outcome
            try:
                self._platform.send_metrics(self._run_id, item.data, deadline)
            except (ValidationRejectedError, ConflictError) as exc:
                outcome.rejected.append((item, str(exc)))  # this row, never the sink
            except (RetryableAPIError, TransportError) as exc:
                outcome.retry.extend(items[index:])
                outcome.retry_reason = str(exc)
                outcome.retry_after = getattr(exc, "retry_after", None)
                return outcome
            except APIError as exc:
                outcome.retry.extend(items[index:])
                if exc.status_code is not None and exc.status_code >= 500:
                    # A training run outlives a server error: pause (see _training_metrics).
                    outcome.retry_reason = str(exc)
                else:  # 401, 403, 404: nothing later can succeed
                    outcome.retire = f"{type(exc).__name__}: {exc}"
                return outcome
            else:
                outcome.acked.append(item)
        return outcome

    def close(self) -> None:
        if self._owns_client:
            self._platform.shutdown()

    def after_fork(self) -> None:
        """The client drops inherited sockets by itself (see ``PlatformClient._pool``)."""

"""The run's status vocabulary."""

from __future__ import annotations

import enum


class RunStatus(str, enum.Enum):
    """Where a run stands. Members are singletons: compare with ``is``.

    ``RunStatus("failed")`` and ``RunStatus.coerce("FAILED")`` both give ``RunStatus.FAILED``.
    """

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CRASHED = "crashed"

    @property
    def terminal(self) -> bool:
        return self is not RunStatus.RUNNING

    def is_terminal(self) -> bool:
        """0.1.4's spelling of :attr:`terminal`."""
        return self.terminal

    @classmethod
    def coerce(cls, value: RunStatus | str) -> RunStatus:
        """Accept a member or its value in any case; anything else is a ValueError."""
        if isinstance(value, RunStatus):
            return value
        if isinstance(value, str):
            try:
                return cls(value.strip().lower())
            except ValueError:
                pass
        allowed = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown run status {value!r}; expected one of: {allowed}")

    def __str__(self) -> str:
        return self.value

"""The stand-in's training-run handle: seeding and inspection (contract Appendix A)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prime_runs.testing._reply import Settings
from prime_runs.testing._state import State
from prime_runs.testing._training_api import new_run


class TrainingStandIn:
    """Mixed into ``StandInPlatform``: what a training loop's test seeds and reads back."""

    _state: State
    _settings: Settings

    @property
    def train_teams(self) -> frozenset[str] | None:
        """Teams allowed to register training runs; None (the default) allows every team."""
        return self._settings.train_teams

    @train_teams.setter
    def train_teams(self, teams: Iterable[str] | None) -> None:
        self._settings.train_teams = None if teams is None else frozenset(teams)

    def add_training_run(
        self,
        run_id: str,
        *,
        name: str = "launcher-run",
        team_id: str = "team-standin",
        hosted: bool = False,
    ) -> str:
        """Pre-create a training run, as a launcher would (for ``init(id=...)`` tests).
        A ``hosted`` run is monitored through the internal root only; the public root
        answers 400 for it."""
        body = {"team_id": team_id, "base_model": "launcher-model", "max_steps": 0}
        with self._state.lock:
            self._state.train_runs[run_id] = new_run(run_id, name, body=body, hosted=hosted)
        return run_id

    @property
    def training_runs(self) -> dict[str, dict[str, Any]]:
        """Run id -> stored run: the register body, ``status`` (running, completed, failed),
        ``error_message``, ``finalize_count``, ``hosted``."""
        with self._state.lock:
            return {k: dict(v) for k, v in self._state.train_runs.items()}

    def training_metrics(self, run_id: str) -> list[dict[str, Any]]:
        """Every metrics row received for ``run_id``, in arrival order, replays kept."""
        with self._state.lock:
            return [dict(row) for row in self._state.train_metrics.get(run_id, ())]

    def training_steps(self, run_id: str) -> dict[int, dict[str, Any]]:
        """The platform's view: one row per step (a replayed step replaces its row)."""
        return {
            row["step"]: row for row in self.training_metrics(run_id) if row.get("step") is not None
        }

    def training_samples(self, run_id: str) -> list[dict[str, Any]]:
        """Confirmed sample objects of ``run_id``: ``{"step", "s3_key"}`` in confirm order."""
        with self._state.lock:
            return [dict(c) for c in self._state.train_samples.get(run_id, ())]

    def object_bytes(self, key: str) -> bytes:
        """The bytes uploaded under ``key`` to the loopback object store (KeyError if none)."""
        with self._state.lock:
            return self._state.objects[key]

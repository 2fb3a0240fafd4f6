"""Stand-in eval results for the examples: real verifiers episode records, given fresh ids.

``data/episodes.jsonl`` holds 20 episodes recorded from verifiers (two environments,
best-of-n and a simulated user, a few failed episodes among them). Each call hands out
copies with new episode and trace ids, so running an example twice never produces two
runs that share record ids.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
EPISODES_FILE = DATA / "episodes.jsonl"


def _recorded() -> list[dict[str, Any]]:
    with EPISODES_FILE.open("rb") as f:
        return [json.loads(line) for line in f if line.strip()]


def fresh_episodes(count: int) -> list[dict[str, Any]]:
    """``count`` episode records (cycling through the recorded ones) with fresh ids.

    The recorded ``run`` block is dropped: the SDK stamps each record with the id of the
    run it is logged into.
    """
    episodes = []
    for recorded in itertools.islice(itertools.cycle(_recorded()), count):
        episode = dict(recorded)
        episode.pop("run", None)
        episode["id"] = uuid.uuid4().hex
        episode["traces"] = [dict(trace, id=uuid.uuid4().hex) for trace in recorded["traces"]]
        episodes.append(episode)
    return episodes


def reward_of(episode: dict[str, Any]) -> float:
    """The first trace's reward: the weighted sum of its sub-reward scores."""
    rewards = episode["traces"][0].get("rewards") or {}
    return sum(
        (r.get("score") or 0.0) * r.get("weight", 1.0) for r in rewards.values() if r is not None
    )

"""How the report tells its runs apart: by name, and where two runs share a name, by a
tag after it (the end of the run id, which for a local run is its random part).

The page shows a run as ``name (tag)`` in every place it names one: the header, the
legends, the column headers, the comparison and the episode browser's run filter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

SHORT_ID = 8  # ``run-20261129-184455-0c9d716e`` -> ``0c9d716e``


def name_tags(runs: Sequence[tuple[str, str]]) -> list[str | None]:
    """Per ``(run id, name)``: None when no other run has the name, else a tag that makes
    ``name (tag)`` unique: the id's last characters, the whole id when those collide, and
    a number after it for a run given twice."""
    names = Counter(name for _, name in runs)
    tags: list[str | None] = [
        run_id[-SHORT_ID:] if names[name] > 1 else None for run_id, name in runs
    ]
    labels = Counter(zip((name for _, name in runs), tags, strict=True))
    tags = [
        run_id if tag is not None and labels[name, tag] > 1 else tag
        for (run_id, name), tag in zip(runs, tags, strict=True)
    ]
    seen: Counter[tuple[str, str | None]] = Counter()
    repeated = Counter(zip((name for _, name in runs), tags, strict=True))
    for i, ((_, name), tag) in enumerate(zip(runs, tags, strict=True)):
        if tag is not None and repeated[name, tag] > 1:
            seen[name, tag] += 1
            tags[i] = f"{tag} #{seen[name, tag]}"
    return tags

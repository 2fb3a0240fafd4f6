"""``RUN`` as the CLI takes it: a run folder's path, a run id, a unique prefix of one or
the platform id of a synced run, found in the local archive."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from prime_runs._journal.archive import RUN_FILE, RunArchive, list_runs, run_folder
from prime_runs._plural import quantity
from prime_runs._runid import check_run_id


class RunNotFound(LookupError):
    """``RUN`` names no single run; the message says what was found instead."""


def _exists(path: Path, test: Callable[[Path], bool] = Path.is_file) -> bool:
    try:
        return test(path)
    except OSError:  # a name too long for a path, say: no such folder
        return False


def lookup_run(root: Path, ref: str, *, command: str = "show") -> RunArchive:
    """A run by folder path, by id under ``root``, by platform id, or by a unique id prefix.
    Raises ``RunNotFound`` with a message for the user (an ambiguous prefix lists its
    matches; a folder that is not a run says so, and an archive root given as a run names
    the ``--dir`` form of ``command``), ``ConfigurationError`` for a ``ref`` that is neither
    a path nor a run id (``..``, a NUL)."""
    path = Path(ref)
    if _exists(path / RUN_FILE):  # a folder the user named by its path
        return RunArchive(path)
    if _exists(path, Path.is_dir):
        raise RunNotFound(_not_a_run_folder(path, ref, command))
    if os.sep in ref or (os.altsep and os.altsep in ref):
        raise RunNotFound(f"no run folder at {ref}")
    # Anything else is an id (or an id's prefix): never a path out of the root.
    check_run_id(
        ref,
        source="RUN",
        fix="give a run id, a unique prefix of one or a run folder's path "
        "(`prime-runs ls` lists the runs)",
    )
    direct = run_folder(root, ref)
    if (direct / RUN_FILE).is_file():
        return RunArchive(direct)
    runs = list_runs(root)
    for archive in runs:
        for doc in (archive.sync_state(), archive.description()):
            platform = doc.get("platform")
            if isinstance(platform, dict) and platform.get("id") == ref:
                return archive
    prefixed = [a for a in runs if a.run_id.startswith(ref)]
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        shown = "\n  ".join(a.run_id for a in prefixed[:20])
        more = f"\n  ... and {len(prefixed) - 20} more" if len(prefixed) > 20 else ""
        raise RunNotFound(
            f"{ref!r} matches {len(prefixed)} runs under {root}; give more of the id:"
            f"\n  {shown}{more}"
        )
    raise RunNotFound(
        f"no run {ref!r} under {root} (RUN is a run folder path, a run id or a unique prefix "
        "of one, or the platform id of a synced run; `prime-runs ls` lists the runs)"
    )


def _not_a_run_folder(path: Path, ref: str, command: str) -> str:
    try:
        held = len(list_runs(path))
    except OSError:
        held = 0
    if not held:
        return f"{ref} is a folder but not a run folder (it has no {RUN_FILE})"
    where = shlex.quote(ref)
    return (
        f"{ref} is an archive root holding {quantity(held, 'run')}, not a run folder: "
        f"`prime-runs ls --dir {where}` lists them, and "
        f"`prime-runs {command} --dir {where} RUN` names one"
    )

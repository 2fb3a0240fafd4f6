"""Reading a run folder without following a symbolic link inside it.

A link inside a run folder can point at any file on the machine (``/etc/passwd``, another
user's archive), and that file is not the run's: ``ls`` would count it, ``report`` embed it
and ``sync`` upload it. So every reader opens with ``O_NOFOLLOW`` and lists only real files;
:func:`links_in` names the links so the commands can report them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_RECORD_DIRS = ("records", "acks")


def open_for_reading(path: Path) -> BinaryIO:
    """Open ``path`` for reading; an ``OSError`` when its last component is a link (on
    platforms without ``O_NOFOLLOW``, when it is a link at open time)."""
    if not _NOFOLLOW and Path(path).is_symlink():
        raise OSError(f"{path} is a symbolic link")
    return os.fdopen(os.open(path, os.O_RDONLY | _NOFOLLOW), "rb")


def segment_paths(directory: Path) -> list[Path]:
    """The ``*.jsonl`` files of ``directory`` (``records/``, ``acks/``), links left out; none
    when the directory itself is a link."""
    if directory.is_symlink() or not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.jsonl") if not p.is_symlink())


def links_in(run_dir: Path) -> list[str]:
    """The symbolic links in a run folder and its record folders, relative to it, sorted."""
    run_dir = Path(run_dir)
    found = []
    for directory in (run_dir, *(run_dir / name for name in _RECORD_DIRS)):
        if directory != run_dir and directory.is_symlink():
            continue  # already listed as an entry of the run folder
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        found.extend(str(Path(e.path).relative_to(run_dir)) for e in entries if e.is_symlink())
    return sorted(found)

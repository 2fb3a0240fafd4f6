"""Opening files of a run folder without following a symbolic link inside it.

A link inside a run folder can point at any file on the machine (``/etc/passwd``, another
user's archive), and that file is not the run's: ``ls`` would count it, ``report`` embed it,
``sync`` upload it, and a writer would write through it. So every reader opens with
``O_NOFOLLOW`` and lists only real files, every writer opens with :func:`open_in_run`, and
:func:`links_in` names the links so the commands can report them.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from prime_runs.errors import JournalError

_RECORD_DIRS = ("records", "acks", "stamps")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_WALK_AT = os.open in os.supports_dir_fd and bool(_NOFOLLOW)
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)  # what O_NOFOLLOW meets


def _first_link(run_dir: Path, relative: str) -> tuple[Path, bool] | None:
    """The first symbolic link on the way to ``relative`` below ``run_dir``, and whether
    it is the last component; None when there is none."""
    parts = Path(relative).parts
    for depth in range(1, len(parts) + 1):
        path = run_dir.joinpath(*parts[:depth])
        if path.is_symlink():
            return path, depth == len(parts)
    return None


def _link_error(path: Path, last: bool) -> JournalError:
    error = JournalError(
        f"refusing to write through the symbolic link {path} inside the run folder; "
        f"replace it with a real {'file' if last else 'directory'} (nothing was written)"
    )
    error.errno = errno.ELOOP
    return error


def open_in_run(run_dir: Path, relative: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of ``relative`` (e.g. ``"acks/x.jsonl"``) inside a run folder, following
    no symbolic link below the folder itself (the folder is the user's choice). Raises a
    ``JournalError`` naming the link when one is in the way."""
    run_dir = Path(run_dir)
    *dirs, name = Path(relative).parts
    if not _WALK_AT:  # no openat here: check, then open (a race is possible)
        link = _first_link(run_dir, relative)
        if link is not None:
            raise _link_error(*link)
        return os.open(run_dir / relative, flags | _NOFOLLOW, mode)
    try:
        dir_fd = os.open(run_dir, os.O_RDONLY | _DIRECTORY)
        try:
            for part in dirs:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)
                os.close(dir_fd)
                dir_fd = inner
            return os.open(name, flags | _NOFOLLOW, mode, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        link = _first_link(run_dir, relative) if exc.errno in _LINK_ERRNOS else None
        if link is not None:
            raise _link_error(*link) from exc
        raise


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


def entries(directory: Path) -> Iterator[Any]:
    """The JSON value of every whole line of ``directory``'s segments (notes, acks): a
    line a kill tore mid-write, an unreadable segment and a line that is not JSON are
    left out."""
    for path in segment_paths(directory):
        try:
            with open_for_reading(path) as f:
                lines = f.read().splitlines(keepends=True)
        except OSError:
            continue
        for line in lines:
            if line.endswith(b"\n"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def links_in(run_dir: Path) -> list[str]:
    """The symbolic links in a run folder and its record folders, relative to it, sorted."""
    run_dir = Path(run_dir)
    found: list[str] = []
    for directory in (run_dir, *(run_dir / name for name in _RECORD_DIRS)):
        if directory != run_dir and directory.is_symlink():
            continue  # already listed as an entry of the run folder
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        found.extend(str(Path(e.path).relative_to(run_dir)) for e in entries if e.is_symlink())
    return sorted(found)

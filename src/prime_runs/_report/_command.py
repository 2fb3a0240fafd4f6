"""The ``prime-runs report`` command: find the runs, write the file, say where it is."""

from __future__ import annotations

import argparse
import os
import sys
import webbrowser
from collections.abc import Sequence
from pathlib import Path

from prime_runs._journal.archive import RunArchive
from prime_runs._journal.lookup import RunNotFound, lookup_run
from prime_runs._journal.nofollow import open_in_run
from prime_runs._report._build import DEFAULT_BUDGET, build
from prime_runs._report._html import render
from prime_runs._report._load import load_run
from prime_runs.errors import ConfigurationError

REPORT_FILE = "report.html"
OK, FAILED, USAGE = 0, 1, 2


def default_output(archives: Sequence[RunArchive]) -> Path:
    """One run: ``report.html`` in its folder. Several: a file named after them here."""
    if len(archives) == 1:
        return archives[0].path / REPORT_FILE
    return Path(f"report-{archives[0].run_id}-and-{len(archives) - 1}-more.html")


def write_report(
    archives: Sequence[RunArchive], output: Path, *, budget: int = DEFAULT_BUDGET
) -> Path:
    """Write the report of ``archives`` to ``output``; returns the path written.

    The file is written next to its final name and renamed, so a reader never sees half
    a report. Raises ``OSError`` when the file cannot be written.
    """
    page = render(build([load_run(archive) for archive in archives], budget))
    output = Path(output)
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # a leftover, or a planted link: never written through
        fd = open_in_run(tmp.parent, tmp.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        tmp.replace(output)  # replaces a link at ``output`` itself, not its target
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return output


def add_parser(commands: argparse._SubParsersAction, dir_help: str) -> None:
    """Register ``report`` on the CLI's subcommands."""
    report = commands.add_parser(
        "report", help="write a self-contained HTML report of one run or several side by side"
    )
    report.add_argument("runs", metavar="RUN", nargs="+", help="run folders or ids")
    report.add_argument(
        "-o",
        "--output",
        help=f"the HTML file to write (default: {REPORT_FILE} in the run's folder; for "
        "several runs, report-<first id>-and-<n>-more.html here)",
    )
    report.add_argument("--open", action="store_true", help="open the report in a browser")
    report.add_argument(
        "--embed-mb",
        type=float,
        default=DEFAULT_BUDGET / (1024 * 1024),
        help="megabytes of episode messages to embed for the episode browser "
        "(default: %(default)g; tables and charts always cover every episode)",
    )
    report.add_argument("--dir", help=dir_help)


def run_command(root: Path, args: argparse.Namespace) -> int:
    """``prime-runs report``; returns the exit status."""
    refs: Sequence[str] = args.runs
    output: str | None = args.output
    embed_mb: float = args.embed_mb
    archives = []
    for ref in refs:
        try:
            archives.append(lookup_run(root, ref, command="report"))  # as `show` finds it
        except (RunNotFound, ConfigurationError) as exc:
            print(f"prime-runs: {exc}", file=sys.stderr)
            return USAGE
    if embed_mb < 0:
        print("prime-runs: --embed-mb must be 0 or more", file=sys.stderr)
        return USAGE
    target = Path(output) if output else default_output(archives)
    try:
        path = write_report(archives, target, budget=int(embed_mb * 1024 * 1024))
    except OSError as exc:
        print(
            f"prime-runs: cannot write the report to {target}: {exc.strerror or exc} "
            "(choose another file with -o)",
            file=sys.stderr,
        )
        return FAILED
    print(path)
    if args.open and not webbrowser.open(path.resolve().as_uri()):
        print(f"prime-runs: no browser to open; open {path} yourself", file=sys.stderr)
    return OK

"""The ``prime-runs`` command: ``ls``, ``show RUN`` and ``sync [RUN ...]`` over the local
run archive (``--dir`` > ``PRIME_RUNS_DIR`` > ``./prime-runs``).

Exit status: 0 when the command did everything it was asked; 1 when a run could not be
(fully) synced or was skipped although named; 2 for usage errors, an unknown run, or a
missing API key. Output cut short by its reader (``prime-runs ls | head``) is not an error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from prime_runs._journal.archive import RunArchive, list_runs
from prime_runs._journal.lookup import RunNotFound, lookup_run
from prime_runs._journal.metrics_series import read as read_metrics
from prime_runs._journal.runinfo import RunInfo, inspect
from prime_runs._progress import Progress
from prime_runs._report import add_parser as add_report_parser
from prime_runs._report import run_command as run_report
from prime_runs._runs.options import archive_root
from prime_runs._runs.register_once import fill_in
from prime_runs._show import episode_rewards, render_ls, render_show
from prime_runs._show_training import EpisodeTally, episode_lines, is_training, metric_lines
from prime_runs._sync.syncer import SyncReport, sync_run
from prime_runs._version import __version__
from prime_runs.errors import ConfigurationError
from prime_runs.settings import API_KEY_ENV, DIR_ENV, MODE_ENV, Settings

OK, FAILED, USAGE = 0, 1, 2
RUN_HELP = (
    "a run folder path, a run id under the root or a unique prefix of one, or the platform "
    "id of a synced run"
)
SYNC_KEY_HELP = (
    f"The API key comes from `{API_KEY_ENV}`, else from `api_key` in `~/.prime/config.json` "
    f"(the file `prime login` writes); the run's mode and `{MODE_ENV}` do not matter. The "
    "key is never printed."
)
SYNC_EXIT_HELP = """exit status:
  0    all runs landed everything and are closed, or nothing needed a sync
  1    a run failed or was skipped although named, or a record was rejected
  2    usage error, unknown or ambiguous RUN, or no API key
  130  interrupted: run sync again and it resumes"""


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its error, with its usage
    (argparse leaves it to the top-level parser, whose usage does not name the option)."""

    # typeshed overloads it on the namespace's type; this one signature serves both.
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed, extra


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prime-runs",
        description="Inspect the local run archive and upload runs to the Prime platform.",
    )
    parser.add_argument("--version", action="version", version=f"prime-runs {__version__}")
    dir_help = f"archive root (default: ${DIR_ENV}, else ./prime-runs)"
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    ls = commands.add_parser("ls", help="list local runs")
    ls.add_argument("--dir", help=dir_help)
    show = commands.add_parser("show", help="describe one run")
    show.add_argument("run", metavar="RUN", help=RUN_HELP)
    show.add_argument("--dir", help=dir_help)
    sync = commands.add_parser(
        "sync",
        help="upload what runs still owe the platform and close them",
        description=textwrap.fill(
            f"Upload what runs still owe the platform and close them. {SYNC_KEY_HELP}", 78
        ),
        epilog=SYNC_EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sync.add_argument(
        "runs",
        metavar="RUN",
        nargs="*",
        help=f"{RUN_HELP} (default: every run under the root with anything pending)",
    )
    sync.add_argument("--dir", help=dir_help)
    sync.add_argument(
        "--environment",
        metavar="NAME",
        action="append",
        help="register the named RUNs that have no environment under NAME (repeatable); "
        "stored in their run.json",
    )
    sync.add_argument(
        "--model",
        metavar="NAME",
        help="register the named training RUNs that have no model with NAME as their base "
        "model; stored in their run.json",
    )
    sync.add_argument(
        "--team-id",
        metavar="TEAM",
        help="register the named training RUNs that have no team under TEAM; stored in "
        "their run.json",
    )
    sync.add_argument("-v", "--verbose", action="store_true", help="log each request step")
    sync.set_defaults(usage_error=sync.error)  # prints sync's usage, not the top-level one
    add_report_parser(commands, dir_help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE
    root = archive_root(args.dir)
    try:
        status = _command(args, root)
        sys.stdout.flush()  # here, where a reader that went away can still be handled
        return status
    except KeyboardInterrupt:
        print("prime-runs: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader stopped early (``| head``): what it read is all it wanted. Point stdout
        # at /dev/null so the interpreter's final flush cannot fail again.
        _quiet_stdout()
        return OK


def _command(args: argparse.Namespace, root: Path) -> int:
    if args.command == "ls":
        return _ls(root)
    if args.command == "show":
        return _show(root, args.run)
    if args.command == "report":
        return run_report(root, args)
    given = Registration(args.environment or [], args.model, args.team_id)
    flags = zip(("--environment", "--model", "--team-id"), given, strict=True)
    for flag in [flag for flag, value in flags if value and not args.runs][:1]:
        args.usage_error(f"{flag} needs the RUNs it is for")
    return _sync(root, args.runs, verbose=args.verbose, given=given)


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _ls(root: Path) -> int:
    runs = _inspect_all(list_runs(root))
    if not runs:
        print(
            f"No runs under {root}. Runs appear here once prime_runs.init() records one "
            f"(set {DIR_ENV} or pass --dir to look elsewhere)."
        )
        return OK
    print(render_ls(runs))
    return OK


def _show(root: Path, ref: str) -> int:
    try:
        archive = lookup_run(root, ref)
    except (RunNotFound, ConfigurationError) as exc:
        print(f"prime-runs: {exc}", file=sys.stderr)
        return USAGE
    info = inspect(archive)
    if not is_training(info):
        print(render_show(info, episode_rewards(info)))
        return OK
    tally = EpisodeTally(info)
    rewards = episode_rewards(info, tally)
    tally.refine(info)
    lines = [*metric_lines(read_metrics(archive.path)), *episode_lines(tally)]
    print(render_show(info, rewards, lines))
    return OK


class Registration(NamedTuple):
    """What ``sync`` was given to register runs whose run.json lacks it."""

    environments: list[str]
    model: str | None
    team_id: str | None


def _sync(root: Path, refs: Sequence[str], *, verbose: bool, given: Registration) -> int:
    with _logging(verbose):
        return _sync_runs(root, refs, given)


def _sync_runs(root: Path, refs: Sequence[str], given: Registration) -> int:
    try:
        # Any mode will do: sync only needs the key and the URLs.
        settings = Settings.resolve(mode="offline")
    except ConfigurationError as exc:
        print(f"prime-runs: {exc}", file=sys.stderr)
        return USAGE
    if not settings.api_key:
        print(
            f"prime-runs: sync needs an API key: set {API_KEY_ENV} or run `prime login`",
            file=sys.stderr,
        )
        return USAGE
    explicit = bool(refs)
    targets: list[RunArchive] = []
    for ref in refs:
        try:
            targets.append(lookup_run(root, ref, command="sync"))
        except (RunNotFound, ConfigurationError) as exc:
            print(f"prime-runs: {exc}", file=sys.stderr)
            return USAGE
    everything = _inspect_all(list_runs(root))
    if not explicit:
        targets = [info.archive for info in everything if info.needs_sync or info.running]
        if not targets:
            print(f"Nothing to sync under {root}.")
            return OK
    progress = Progress(sys.stderr, interactive=_isatty(sys.stderr))
    status = OK
    for archive in targets:
        claimed = {
            str(other.platform["id"])
            for other in everything
            if other.run_id != archive.run_id and other.platform.get("id")
        }
        report = _sync_one(archive, settings, progress, claimed, given)
        if report.skipped:
            _say(f"{report.run_id}: skipped: {report.message}")
            if explicit:
                status = FAILED
        elif report.ok:
            _say(f"{report.run_id}: ok: {report.message}")
        else:
            _say(f"{report.run_id}: FAILED: {report.message}")
            status = FAILED
    return status


def _say(line: str) -> None:
    """Print a result line; a reader that went away must not stop the uploads."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        _quiet_stdout()


def _inspect_all(archives: Sequence[RunArchive]) -> list[RunInfo]:
    infos = []
    for archive in archives:
        try:
            infos.append(inspect(archive))
        except OSError as exc:
            print(f"prime-runs: cannot read {archive.path}: {exc}", file=sys.stderr)
    return infos


def _sync_one(
    archive: RunArchive,
    settings: Settings,
    progress: Progress,
    claimed: set[str],
    given: Registration,
) -> SyncReport:
    """Sync one run; whatever goes wrong with it is its report, so the next run still syncs."""
    try:
        info = inspect(archive)
        # A training run's registration reads them from run.json (an evaluation's sync
        # takes its environments as an argument).
        if not info.running and fill_in(
            archive, model=given.model, team_id=given.team_id, environments=given.environments
        ):
            info = inspect(archive)
        environments = given.environments
        return sync_run(info, settings, progress, claimed=claimed, environments=environments)
    except ConfigurationError as exc:  # a value given to sync that cannot be used
        return SyncReport(archive.run_id, False, str(exc))
    except Exception as exc:  # one broken run must not stop a sync of many
        logging.getLogger("prime_runs").debug("sync of %s failed", archive.path, exc_info=True)
        return SyncReport(archive.run_id, False, f"unexpected error: {type(exc).__name__}: {exc}")


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)  # any stream: see below
    try:
        return callable(isatty) and bool(isatty())
    except ValueError:  # a closed stream
        return False


class _Prefixed(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if text.startswith("prime-runs:") else f"prime-runs: {text}"


@contextmanager
def _logging(verbose: bool) -> Iterator[None]:
    """Show the SDK's warnings (and with -v its info lines) on stderr for this command only;
    the logger is restored afterwards, so calling ``main()`` in-process leaves no trace."""
    logger = logging.getLogger("prime_runs")
    saved = (logger.level, logger.propagate)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Prefixed("%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


if __name__ == "__main__":
    sys.exit(main())

"""What a newcomer reads from ``prime-runs show`` and ``report`` (issue 23): ``report`` finds
runs exactly as ``show`` does. Real CLI subprocesses over a real offline archive. And the
first hour's nits (issue 32): an archive root given as a run, a subcommand's bad option,
what ``sync --help`` says, counts in the singular, and no reward where there is none."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

import prime_runs as pr
from _support import archive_root, offline_run, run_cli
from prime_runs.cli import main


def _newcomer_run(episodes: list[dict], **init: object) -> pr.Run:
    return offline_run(episodes, "newcomer", **init)


def test_report_lists_the_runs_an_ambiguous_prefix_matches_as_show_does(episodes):
    first, second = _newcomer_run(episodes[:1]), _newcomer_run(episodes[:1])
    prefix = "run-"  # every offline run id starts so

    show, report = run_cli("show", prefix), run_cli("report", prefix)

    assert show.returncode == report.returncode == 2
    for result in (show, report):
        assert f"{prefix!r} matches 2 runs" in result.stderr, result.stderr
        assert first.id in result.stderr and second.id in result.stderr
    assert "give more of the id" in report.stderr


def test_report_names_what_run_accepts_for_an_unknown_run(episodes):
    _newcomer_run(episodes[:1])

    report = run_cli("report", "no-such-run")

    assert report.returncode == 2
    assert "no run 'no-such-run'" in report.stderr
    assert "`prime-runs ls` lists the runs" in report.stderr


def test_show_prints_config_values_and_folds_a_long_one(episodes):
    config = {"temperature": 0.0, "model": "m", "prompt": "x" * 500}
    run = _newcomer_run(episodes[:1], config=config)

    show = run_cli("show", run.id)

    lines = show.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  config:"))
    assert lines[start] == "  config:       temperature=0.0"
    assert lines[start + 1].strip() == 'model="m"'
    folded = lines[start + 2].strip()
    assert folded.startswith('prompt="xxx') and folded.endswith("… (502 characters)")
    assert len(folded) < 150


def test_show_prints_the_launch_file_a_config_came_from(episodes, tmp_path):
    launch = tmp_path / "eval.toml"
    text = 'model = "Qwen/Qwen3-8B"\n[sampling]\ntemperature = 0.0\n'
    launch.write_text(text)
    run = _newcomer_run(episodes[:1], config=str(launch))

    show = run_cli("show", run.id)

    lines = show.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  config:"))
    assert lines[start] == f"  config:       eval.toml (toml, {len(text)} bytes)"
    assert [line.strip() for line in lines[start + 1 : start + 4]] == [
        '| model = "Qwen/Qwen3-8B"',
        "| [sampling]",
        "| temperature = 0.0",
    ]


def test_show_of_an_archive_root_says_so_and_gives_the_dir_form(episodes):
    run = _newcomer_run(episodes[:1])
    _newcomer_run(episodes[:1])
    root = str(archive_root())

    show, report = run_cli("show", root), run_cli("report", root)

    assert show.returncode == report.returncode == 2
    assert f"{root} is an archive root holding 2 runs, not a run folder" in show.stderr
    assert f"`prime-runs ls --dir {root}` lists them" in show.stderr
    assert f"`prime-runs show --dir {root} RUN` names one" in show.stderr
    assert f"`prime-runs report --dir {root} RUN` names one" in report.stderr
    # What it suggests works as written.
    assert run_cli("ls", "--dir", root).returncode == 0
    follow = run_cli("show", "--dir", root, run.id)
    assert follow.returncode == 0 and follow.stdout.startswith(f"run {run.id}\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["ls", "--bogus"],
        ["show", "some-run", "--bogus"],
        ["sync", "--bogus"],
        ["report", "some-run", "--bogus"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_bad_option_prints_its_subcommands_usage(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: prime-runs {argv[0]} "), err
    assert f"prime-runs {argv[0]}: error: unrecognized arguments: --bogus" in err


def test_a_sync_flag_without_its_runs_prints_syncs_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["sync", "--environment", "gsm8k"])

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: prime-runs sync ")
    assert "prime-runs sync: error: --environment needs the RUNs it is for" in err


def _exit_codes(text: str) -> set[str]:
    """The codes of an exit-status list: help's ``  0    ...`` lines, or a docs table's
    ``| 0 | ...`` rows."""
    return set(re.findall(r"^ *\|? *(\d+) +\|? *\S", text, re.M))


def test_sync_help_names_where_the_key_comes_from_and_the_exit_codes(capsys):
    from prime_runs.cli import SYNC_KEY_HELP

    with pytest.raises(SystemExit) as exited:
        main(["sync", "--help"])

    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    flat = " ".join(help_text.split())
    assert "PRIME_API_KEY" in flat and "~/.prime/config.json" in flat
    assert "`prime login`" in flat and SYNC_KEY_HELP in flat
    codes = help_text.split("exit status:", 1)[1]
    assert _exit_codes(codes) == {"0", "1", "2", "130"}
    # docs/cli.md says the same.
    docs = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    sync_docs = docs.split("## `prime-runs sync", 1)[1]
    assert SYNC_KEY_HELP in " ".join(sync_docs.split())
    table = sync_docs.split("### Exit status", 1)[1].split("###", 1)[0]
    assert _exit_codes(table) == {"0", "1", "2", "130"}


def test_counts_of_one_are_singular_in_ls_and_sync(prime_env, episodes):
    run = _newcomer_run(episodes[:1])

    listing = run_cli("ls")
    synced = run_cli("sync", run.id)

    assert listing.returncode == 0 and "1 trace, 1 sample, close" in listing.stdout
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "uploaded 1 trace, 1 sample; finalized" in synced.stdout, synced.stdout
    assert f"{run.id}: uploading 1 trace, 1 sample" in synced.stderr


def test_a_record_logged_after_finish_is_counted_in_the_singular(episodes):
    run = _newcomer_run(episodes[:1])

    run.log_episodes(copy.deepcopy(episodes[1]))

    (late,) = [e for e in run.errors if "after finish()" in e]
    assert "1 record logged after finish() was not recorded" in late


def _unscored(episode: dict) -> dict:
    record = copy.deepcopy(episode)
    for trace in record["traces"]:
        trace["rewards"], trace["metrics"] = {}, {}
    return record


def test_ls_shows_no_reward_for_a_run_nothing_scored(episodes):
    unscored = offline_run([_unscored(e) for e in episodes[:3]], "unscored")
    empty = pr.init(name="empty", environments=["gsm8k"], mode="offline", dir=archive_root())
    empty.finish()
    zero = [_unscored(e) for e in episodes[:3]]
    for record in zero:
        for trace in record["traces"]:
            trace["rewards"] = {"exact": {"score": 0.0, "weight": 1.0}}
    scored_zero = offline_run(zero, "scored-zero")

    listing = run_cli("ls")

    assert listing.returncode == 0, listing.stderr
    reward = {row.split()[0]: row.split()[5] for row in listing.stdout.splitlines()[1:]}
    assert reward == {unscored.id: "-", empty.id: "-", scored_zero.id: "0"}

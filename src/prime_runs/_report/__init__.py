"""``prime-runs report``: one self-contained HTML file that shows one run, or several side by
side (header, reward distribution, reward functions, per-example table with pass@k, errors
and stop conditions, tokens and latency, and an episode browser).

Layers: ``_episode`` reduces one record to its figures, ``_load`` reads a run's archive,
``_stats`` aggregates, ``_browse`` extracts conversations, ``_build`` assembles the page's
data, ``_html`` puts it into the template with the scripts and styles (package data), and
``_command`` is the CLI front. See docs/report.md.
"""

from prime_runs._report._build import DEFAULT_BUDGET, build
from prime_runs._report._command import add_parser, run_command, write_report
from prime_runs._report._html import render
from prime_runs._report._load import LoadedRun, load_run

__all__ = [
    "DEFAULT_BUDGET",
    "LoadedRun",
    "add_parser",
    "build",
    "load_run",
    "render",
    "run_command",
    "write_report",
]

"""Where prime-runs cannot see a tool's spans, it says so, naming the tool and the fix: Logfire
set up after ``pr.configure_exporter()`` (which installs the global provider at once, as raw
``run`` spans need) is refused as the global one by OpenTelemetry."""

from __future__ import annotations

from pathlib import Path

from _collector import OtlpReceiver
from conftest import run_recipe

SCRIPT = """
import logfire
import prime_runs as pr

pr.configure_exporter(mode="offline")
logfire.configure(service_name="adder")
"""


def test_logfire_after_configure_exporter_is_named_with_the_fix(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    env = {"LOGFIRE_TOKEN": "pylf_v1_us_test", "LOGFIRE_BASE_URL": receiver.url,
           "LOGFIRE_CONSOLE": "false"}  # fmt: skip
    done = run_recipe(tmp_path, SCRIPT, env)
    said = [line for line in done.stderr.splitlines() if line.startswith("prime-runs:")]
    (line,) = said
    assert line.startswith("prime-runs: logfire.")
    assert "logfire.configure(additional_span_processors=[pr.RunProcessor()])" in line

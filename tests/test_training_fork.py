"""A training run across os.fork: the child's metrics rows are its own (journal file,
delivery), the parent's queue is never resent by it, and only the parent finalizes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys
    import prime_runs as pr
    run = pr.init(kind="train", model="m", team_id="t", environments=["gsm8k"],
                  training=pr.TrainingSpec(max_steps=3))
    run.log_metrics({"loss": 1.0}, step=0)
    pid = os.fork()
    if pid == 0:
        run.log_metrics({"loss": 0.5}, step=1)
        ok = run.flush(30)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    run.log_metrics({"loss": 0.25}, step=2)
    run.finish()
    print(run.id, run.archive_path, os.waitstatus_to_exitcode(status), flush=True)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_sends_its_own_rows_once(prime_env):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    run_id, folder, child_exit = done.stdout.split()
    assert child_exit == "0", done.stderr
    rows = prime_env.training_metrics(run_id)
    assert Counter(r["step"] for r in rows) == {0: 1, 1: 1, 2: 1}  # nothing sent twice
    run = prime_env.training_runs[run_id]
    assert run["status"] == "completed" and run["finalize_count"] == 1
    journals = sorted(Path(folder).glob("train_metrics-*.jsonl"))
    assert len(journals) == 2  # the parent's and the child's

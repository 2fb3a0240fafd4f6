"""Figure 6: how long ``import prime_runs`` takes, in fresh interpreters.

Three packages: this project (the project's virtualenv), the peer (its own
virtualenv) and 0.2.0, whose source (commit ``b39397e`` of this repository) is
exported into ``.bench/v020`` with ``git archive`` and imported from the
project's interpreter with ``PYTHONPATH`` pointing at its ``src/`` (nothing is
installed). Each figure is the median wall time of a fresh process running
``import prime_runs``, minus the median of the same interpreter running
``pass``; the runs of the two alternate, so both see the same machine.
"""

from __future__ import annotations

import io
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness

V020_COMMIT = "b39397e"
V020_DIR = harness.BENCH_DIR / "v020"
SIDES = ("ours", "peer", "v020")
LABELS = {"ours": "ours", "peer": "peer 0.1.4", "v020": "0.2.0"}
_PROBE = "import prime_runs, sys; print(prime_runs.__version__, prime_runs.__file__)"


def ensure_v020(log: Callable[[str], None]) -> Path:
    """``.bench/v020/src`` holding 0.2.0's package, exported from git on first use."""
    src = V020_DIR / "src"
    if (src / "prime_runs" / "__init__.py").exists():
        return src
    log(f"exporting 0.2.0 (commit {V020_COMMIT}) into {V020_DIR.relative_to(harness.ROOT)} ...")
    archive = subprocess.run(
        ["git", "-C", str(harness.ROOT), "archive", "--format=tar", V020_COMMIT, "src"],
        capture_output=True,
        check=True,
    ).stdout
    V020_DIR.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(V020_DIR, filter="data")
        else:  # Python without extraction filters; the archive is this repository's own
            tar.extractall(V020_DIR)
    return src


def _command(side: str) -> tuple[Path, dict[str, str]]:
    """The interpreter and extra environment that import ``side``'s package."""
    if side == "peer":
        return harness.peer_python(), {}
    if side == "v020":
        return harness.ours_python(), {"PYTHONPATH": str(V020_DIR / "src")}
    return harness.ours_python(), {}


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=str(cwd), check=True, capture_output=True)
    return time.perf_counter() - start


def measure_side(side: str, reps: int) -> dict[str, Any]:
    python, extra = _command(side)
    with tempfile.TemporaryDirectory(prefix="prime-runs-import-") as tmp:
        home = Path(tmp)
        env = harness.child_env(home, extra)
        # One untimed import first: it writes the bytecode caches and says what loaded.
        probe = subprocess.run(
            [str(python), "-c", _PROBE], env=env, cwd=tmp, capture_output=True, text=True
        )
        if probe.returncode != 0:
            return {"error": f"import prime_runs failed: {probe.stderr.strip()[-500:]}"}
        version, _, path = probe.stdout.strip().partition(" ")
        imports, bare = [], []
        for _ in range(reps):
            bare.append(_timed([str(python), "-c", "pass"], env, home))
            imports.append(_timed([str(python), "-c", "import prime_runs"], env, home))
    import_s, bare_s = statistics.median(imports), statistics.median(bare)
    return {
        "version": version,
        "loaded_from": path,
        "reps": reps,
        "import_ms": 1000.0 * import_s,
        "bare_ms": 1000.0 * bare_s,
        "net_ms": 1000.0 * (import_s - bare_s),
        "import_runs_ms": [1000.0 * value for value in imports],
        "bare_runs_ms": [1000.0 * value for value in bare],
    }


def measure(reps: int, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Figure 6 for every side; a side that cannot be measured reports an error."""
    results: dict[str, dict[str, Any]] = {}
    for side in SIDES:
        try:
            if side == "peer":
                harness.ensure_peer_venv(log)
            elif side == "v020":
                ensure_v020(log)
            results[side] = measure_side(side, reps)
        except (OSError, subprocess.CalledProcessError) as exc:
            results[side] = {"error": f"{type(exc).__name__}: {exc}"}
        status = results[side].get("error") or f"{results[side]['net_ms']:.0f} ms"
        log(f"import     {LABELS[side]:<15} {status}")
    return results

"""The parent side of a benchmark: interpreters, stand-in platforms, child processes.

Every measured run is a fresh child process (``child.py``) with its own
stand-in platform, started here from the project's environment. The peer runs
under its own virtual environment, created on first use from the package
registry (``pip install prime-runs==0.1.4``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sides import INTERPRETER, NETWORKED

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
PEER_VENV = BENCH_DIR / "peer-venv"
PEER_REQUIREMENT = "prime-runs==0.1.4"
CHILD = Path(__file__).resolve().parent / "child.py"
#: A child that takes longer than this is killed and its run reported as failed.
CHILD_TIMEOUT_S = 900.0


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ours_python() -> Path:
    """The project's virtualenv (``make`` creates it); else this interpreter."""
    candidate = _venv_python(ROOT / ".venv")
    return candidate if candidate.exists() else Path(sys.executable)


def peer_python() -> Path:
    return _venv_python(PEER_VENV)


def _peer_version() -> str | None:
    python = peer_python()
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import prime_runs; print(prime_runs.__version__)"],
        capture_output=True,
        text=True,
        check=False,
        cwd=str(BENCH_DIR),
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_peer_venv(log: Callable[[str], None]) -> str:
    """Create ``.bench/peer-venv`` with the published peer unless it is already there."""
    BENCH_DIR.mkdir(exist_ok=True)
    version = _peer_version()
    if version == PEER_REQUIREMENT.split("==")[1]:
        return version
    log(f"creating {PEER_VENV.relative_to(ROOT)} with {PEER_REQUIREMENT} ...")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEER_VENV)], check=True)
    subprocess.run(
        [str(peer_python()), "-m", "pip", "install", "--quiet", PEER_REQUIREMENT],
        check=True,
    )
    version = _peer_version()
    if version is None:
        raise RuntimeError("the peer virtualenv was created but prime_runs does not import")
    return version


def calibrate(work_ms: float) -> int:
    """Iterations of the producer's work loop that take ``work_ms`` here."""
    from child import _work

    iterations = 20_000
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            _work(iterations)
        best = min(best, (time.perf_counter() - start) / 20)
    return max(1, round(iterations * (work_ms / 1000.0) / best))


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    memory = 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as handle:
            memory = int(handle.readline().split()[1]) * 1024
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gb": round(memory / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def child_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """A clean environment: nothing of the caller's PRIME_*/OTEL_* settings, and a
    private HOME so no ``~/.prime/config.json`` is read."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(
        {
            "HOME": str(home),
            "PRIME_RUNS_DIR": str(home / "prime-runs"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def platform_counts(stand_in: Any, run_id: str | None) -> dict[str, Any]:
    """What the stand-in stored for ``run_id``: episodes, sample rows, finalize."""
    if run_id is None:
        return {}
    episodes = [
        episode_id
        for episode_id, envelope in stand_in.episodes.items()
        if (envelope.get("run") or {}).get("id") == run_id
    ]
    writes = stand_in.episode_writes
    evaluation = stand_in.evaluations.get(run_id) or {}
    return {
        "episodes": len(episodes),
        "episode_rewrites": sum(writes.get(episode_id, 1) - 1 for episode_id in episodes),
        "samples": len(stand_in.samples(run_id)),
        "uploads": len(stand_in.receipts),
        "requests": len(stand_in.requests),
        "finalize_count": evaluation.get("finalize_count", 0),
        "status": evaluation.get("status"),
        "server_errors": len(stand_in.server_errors),
    }


def py_spy() -> Path | None:
    """py-spy, from ``.bench/tools`` (``pip install --target .bench/tools py-spy``) or PATH."""
    local = BENCH_DIR / "tools" / "bin" / "py-spy"
    if local.exists():
        return local
    found = shutil.which("py-spy")
    return Path(found) if found else None


#: Called after a networked child exited, with its stand-in platform and environment
#: still up (``prime-runs sync`` of an offline run); what it returns joins the result.
After = Callable[[Any, dict[str, str]], dict[str, Any]]


@contextlib.contextmanager
def no_gc_pauses() -> Iterator[None]:
    """The stand-in keeps every upload as Python objects; the cyclic collector would walk
    them again and again (it more than doubled the time to store a run), which is the
    stand-in's cost, not the client's. Reference counting still frees what it drops."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def run_child(
    side: str,
    scenario: str,
    params: dict[str, Any],
    log_dir: Path,
    profile: Path | None = None,
    after: After | None = None,
) -> dict[str, Any]:
    """Run one measured side once; the child's result plus what the platform saw.

    With ``profile``, the child runs under ``py-spy record`` (every thread, collapsed
    stacks written to that path); its timings are then not comparable.
    """
    python = peer_python() if INTERPRETER[side] == "peer" else ours_python()
    command = [str(python), str(CHILD)]
    if profile is not None:
        spy = py_spy()
        if spy is None:
            raise RuntimeError("--profile needs py-spy: pip install --target .bench/tools py-spy")
        profile.parent.mkdir(parents=True, exist_ok=True)
        command = [str(spy), "record", "--format", "raw", "--threads", "--rate", "200"]
        command += ["-o", str(profile.resolve()), "--", str(python), str(CHILD)]
    args = {"side": side, "scenario": scenario, **params}
    log_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="prime-runs-bench-") as tmp:
        home = Path(tmp)
        # This checkout's source, whatever the interpreter has installed (a worktree's
        # bench must measure the worktree).
        own = {} if INTERPRETER[side] == "peer" else {"PYTHONPATH": str(ROOT / "src")}
        if side in NETWORKED:
            from prime_runs.testing import StandInPlatform

            with StandInPlatform() as stand_in, no_gc_pauses():
                env = child_env(home, {**stand_in.env(), **own})
                # The harness idles while the child runs: its CPU is the stand-in's.
                cpu0 = time.process_time()
                result = _drive(command, args, env, stand_in, log_dir)
                result["standin_cpu_s"] = time.process_time() - cpu0
                if after is not None and "error" not in result:
                    result.update(after(stand_in, env))
                if scenario == "burst":
                    stand_in.unstall()
                else:
                    result["platform"] = platform_counts(stand_in, result.get("run_id"))
        else:
            result = _drive(command, args, child_env(home, own), None, log_dir)
    return result


def _act(stand_in: Any, checkpoint: str) -> None:
    if stand_in is None:
        return
    if checkpoint == "outage":
        stand_in.outage(503)
    elif checkpoint == "recover":
        stand_in.recover()
    elif checkpoint == "stall":
        stand_in.stall(None, 3600.0)
    else:
        raise RuntimeError(f"unknown checkpoint {checkpoint!r}")


def _drive(
    command: list[str], args: dict[str, Any], env: dict[str, str], stand_in: Any, log_dir: Path
) -> dict[str, Any]:
    size = args.get("burst") or args.get("count")
    parts = (args["scenario"], args.get("workload"), args["side"], size)
    name = "-".join(str(part) for part in parts if part)
    stderr_path = log_dir / f"{name}.log"
    result: dict[str, Any] | None = None
    with stderr_path.open("w", encoding="utf-8") as stderr:
        child = subprocess.Popen(
            [*command, json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=str(Path(env["HOME"])),
        )
        assert child.stdin is not None and child.stdout is not None
        # A hung child is killed (ours only: this Popen's own process).
        watchdog = threading.Timer(CHILD_TIMEOUT_S, child.kill)
        watchdog.start()
        try:
            for line in child.stdout:
                if line.startswith("@@CHECKPOINT "):
                    _act(stand_in, line.split(maxsplit=1)[1].strip())
                    child.stdin.write("go\n")
                    child.stdin.flush()
                elif line.startswith("@@RESULT "):
                    result = json.loads(line[len("@@RESULT ") :])
            child.wait()
        finally:
            watchdog.cancel()
            if child.poll() is None:
                child.kill()
                child.wait()
    if result is None:
        tail = stderr_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        return {"error": f"{name} exited {child.returncode} without a result", "stderr": tail}
    result["returncode"] = child.returncode
    return result

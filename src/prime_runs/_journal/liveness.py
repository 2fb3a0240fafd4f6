"""Whether the process that owns a run folder still runs: the pid it recorded, told apart
from a later process that reused the pid."""

from __future__ import annotations

import os
from pathlib import Path

# Allowance for the coarse boot-time clock when telling a reused pid from the owner.
_START_SLACK = 2.0


def pid_alive(pid: object, *, since: float | None = None) -> bool:
    """Whether process ``pid`` runs. ``since``: a time the process was known to be alive; a
    process with that pid started later is a different one (the pid was reused). Zombies
    count as dead. Where liveness cannot be checked, the answer is True (never close a run
    that may still be live)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    if os.name == "nt":  # os.kill would terminate the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    except OSError:
        return False
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        if state in ("Z", "X"):
            return False
        if since is not None and started is not None and started > since + _START_SLACK:
            return False
    return True


def _proc_stat(pid: int) -> tuple[str, float | None] | None:
    """(state, start time as a Unix time) from /proc where there is one."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if not fields:
        return None
    started = None
    try:
        ticks = int(fields[19])
        boot = _boot_time()
        if boot is not None:
            started = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        started = None
    return fields[0], started


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None

"""One measured side in a fresh interpreter: ``python bench/child.py '<params json>'``.

CPU time (``time.process_time``, every thread of this process) and RSS are
therefore this side's alone. The harness talks to it over stdin/stdout:

* ``@@CHECKPOINT <name>``: the child waits for one line on stdin, so the
  harness can change the stand-in platform (an outage, a stall) at that point;
* ``@@RESULT <json>``: the measurements, the last thing the child prints.

Scenarios (the numbers refer to the figures in ``docs/benchmarks.md``):

* ``throughput`` (1, 5, 6): log the workload as fast as possible, flush, finish;
* ``producer`` (2): a loop doing fixed CPU work per episode, without and then
  with the SDK, timing every log call;
* ``outage`` (3): the same while the platform answers 503 to everything;
* ``burst`` (4): many small episodes against a stalled platform; peak RSS;
* ``growth`` (7): a run of ~5 KB episodes built one at a time, logged, flushed
  and finished (online), or logged and finished offline for ``prime-runs sync``.

The first three take the workload named by ``params["workload"]`` (``mixed``
or ``verifiers``, see ``workload.py``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import sides
from workload import Generator, as_record, encode


def _checkpoint(name: str) -> None:
    print(f"@@CHECKPOINT {name}", flush=True)
    if not sys.stdin.readline():
        raise SystemExit("harness went away")


def _result(data: dict[str, Any]) -> None:
    print("@@RESULT " + json.dumps(data), flush=True)


def _work(iterations: int, asleep: float = 0.0) -> int:
    """The producer's own CPU work: pure Python, so it holds the GIL throughout; or, with
    ``asleep``, that many seconds of waiting with the GIL released (a model call awaited, a
    GPU step)."""
    if asleep:
        time.sleep(asleep)
        return 0
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (Linux), else 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so the peak is the burst's."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    last = len(ordered) - 1

    def at(q: float) -> float:
        return ordered[min(last, round(q * last))]

    return {"p50": at(0.50), "p99": at(0.99), "max": ordered[-1], "mean": sum(values) / len(values)}


def _baseline(payloads: list[Any], iterations: int, asleep: float) -> tuple[float, float]:
    """The loop with no SDK: its wall time and its CPU time."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in payloads:
        _work(iterations, asleep)
    return time.perf_counter() - start, time.process_time() - cpu


def throughput(side: Any, payloads: list[Any]) -> dict[str, Any]:
    t_init = time.perf_counter()
    info = side.start()
    init_s = time.perf_counter() - t_init  # online: the registration included
    cpu0, t0 = time.process_time(), time.perf_counter()
    own0 = time.thread_time()
    for payload in payloads:
        side.log(payload)
    t_logged = time.perf_counter()
    flushed = side.flush(600.0)
    t_flushed = time.perf_counter()
    counters = side.finish()
    t_done, cpu_done, own_done = time.perf_counter(), time.process_time(), time.thread_time()
    return {
        **info,
        "episodes": len(payloads),
        "cpu_s": cpu_done - cpu0,
        # The producer's own thread; the rest of cpu_s ran on the side's threads.
        "producer_thread_cpu_s": own_done - own0,
        "wall_s": t_done - t0,
        "log_wall_s": t_logged - t0,
        "flush_s": t_flushed - t_logged,
        "finish_s": t_done - t_flushed,
        "init_s": init_s,
        "flushed": flushed,
        "counters": counters,
    }


def producer(
    side: Any,
    payloads: list[Any],
    sizes: list[str],
    iterations: int,
    outage: bool,
    asleep: float = 0.0,
) -> dict[str, Any]:
    # Encode-once times for the same records, measured apart from any loop.
    encode_s = []
    for payload in payloads:
        start = time.perf_counter()
        encode(as_record(payload))
        encode_s.append(time.perf_counter() - start)
    before = _baseline(payloads, iterations, asleep)

    info = side.start()
    if outage:
        _checkpoint("outage")
    latencies = []
    start, cpu0 = time.perf_counter(), time.process_time()
    for payload in payloads:
        _work(iterations, asleep)
        t = time.perf_counter()
        side.log(payload)
        latencies.append(time.perf_counter() - t)
    loop_s = time.perf_counter() - start
    if outage:
        _checkpoint("recover")
    flushed = side.flush(600.0)
    counters = side.finish()
    cpu_s = time.process_time() - cpu0
    after = _baseline(payloads, iterations, asleep)

    baseline_s, baseline_cpu_s = min(before, after)
    by_size: dict[str, dict[str, float]] = {}
    for size in sorted(set(sizes)):
        picked = [i for i, s in enumerate(sizes) if s == size]
        by_size[size] = {
            **_percentiles([latencies[i] for i in picked]),
            "encode_p99": _percentiles([encode_s[i] for i in picked])["p99"],
        }
    ratios = [lat / max(enc, 1e-9) for lat, enc in zip(latencies, encode_s, strict=True)]
    return {
        **info,
        "episodes": len(payloads),
        "baseline_s": baseline_s,
        "baseline_runs_s": [before[0], after[0]],
        # The process's CPU from the first log call to finish() returning, beyond what the
        # same loop costs without the SDK (its work, and the sleeps' wake-ups).
        "sdk_cpu_s": max(0.0, cpu_s - baseline_cpu_s),
        "loop_s": loop_s,
        "slowdown_pct": 100.0 * (loop_s - baseline_s) / baseline_s,
        "latency": _percentiles(latencies),
        "latency_by_size": by_size,
        "latency_over_encode": _percentiles(ratios),
        "encode": _percentiles(encode_s),
        "flushed": flushed,
        "counters": counters,
    }


def burst(side: Any, generator: Generator, count: int, timebox: float) -> dict[str, Any]:
    info = side.start()
    _checkpoint("stall")
    exact = _reset_peak_rss()
    rss0 = _status("VmRSS")
    logged = 0
    start = time.perf_counter()
    deadline = start + timebox
    slowest = 0.0
    for payload in generator.stream(count, "5KB", start=10_000_000):
        t = time.perf_counter()
        side.log(payload)
        now = time.perf_counter()
        slowest = max(slowest, now - t)
        logged += 1
        if now > deadline:
            break
    wall = time.perf_counter() - start
    run = getattr(side, "_run", None)
    return {
        **info,
        "burst": count,
        "logged": logged,
        "completed": logged == count,
        "wall_s": wall,
        "slowest_call_s": slowest,
        "rss_before": rss0,
        "peak_rss": _status("VmHWM"),
        "peak_above_baseline": _status("VmHWM") - rss0,
        "peak_exact": exact,
        "dropped": getattr(run, "dropped_records", None),
    }


def growth(side: Any, generator: Generator, count: int, flush: bool = True) -> dict[str, Any]:
    """Figure 7: one run of ``count`` ~5 KB episodes, built one at a time so the
    process does not hold the whole run; building them costs CPU, measured here
    apart (the same stream without the SDK) and subtracted. ``flush``: False goes
    straight from the last log call to ``finish()``."""
    cpu_gen = time.process_time()
    for _ in generator.stream(count, "5KB"):
        pass
    generate_cpu_s = time.process_time() - cpu_gen
    info = side.start()
    cpu0, t0 = time.process_time(), time.perf_counter()
    for payload in generator.stream(count, "5KB"):
        side.log(payload)
    t_logged = time.perf_counter()
    flushed = side.flush(3600.0) if flush else None
    t_flushed = time.perf_counter()
    counters = side.finish()
    t_done, cpu_done = time.perf_counter(), time.process_time()
    return {
        **info,
        "episodes": count,
        "cpu_s": cpu_done - cpu0 - generate_cpu_s,
        "generate_cpu_s": generate_cpu_s,
        "wall_s": t_done - t0,
        "log_wall_s": t_logged - t0,
        "flush_s": t_flushed - t_logged,
        "finish_s": t_done - t_flushed,
        "flushed": flushed,
        "counters": counters,
        "peak_rss": _status("VmHWM"),
    }


def main() -> None:
    params = json.loads(sys.argv[1])
    side = sides.make(params["side"], params.get("ours_init"))
    generator = Generator(salt=params.get("salt"))
    scenario = params["scenario"]
    if scenario == "growth":
        _result(growth(side, generator, params["count"], params.get("flush", True)))
        return
    if scenario == "burst":
        result = burst(side, generator, params["burst"], params["timebox"])
        _result(result)
        # The platform is stalled: the run is abandoned rather than drained.
        sys.stdout.flush()
        os._exit(0)
    episodes = generator.workload(params.get("workload", "mixed"), params["count"])
    payloads = [episode.payload for episode in episodes]
    if scenario == "throughput":
        result = throughput(side, payloads)
    elif scenario in ("producer", "outage"):
        sizes = [episode.size for episode in episodes]
        asleep = params.get("work_asleep_s", 0.0)
        result = producer(side, payloads, sizes, params["work_iters"], scenario == "outage", asleep)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    result["bytes"] = sum(episode.nbytes for episode in episodes)
    _result(result)


if __name__ == "__main__":
    main()

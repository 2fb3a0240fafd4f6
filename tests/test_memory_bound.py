"""Memory is bounded in bytes (issue 20): ``finish()`` after a stalled platform reads the
records back from the journal a claim at a time (a claim is bounded by the records' sizes,
which the ledger keeps), instead of every pending record at once; what it holds does not
grow with the run."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from _support import journal_lines, offline_run
from prime_runs.projection import summary_trace_index
from prime_runs.testing import StandInPlatform

RECORDS = 30
RECORD_BYTES = 4 * 1024 * 1024
# Per sink, a live export and a drain each hold one claim (4 MiB, or one larger record) and
# its request body; read-backs are kept a moment for the other sink (8 MiB); the sample
# rows of a claim are encoded beside it. Reading every pending record back at once, as
# finish() once did, took over 390 MiB here (and grows with the run).
BUDGET = 160 * 1024 * 1024


def _producer(data: Path, records: int = RECORDS, size: int = RECORD_BYTES) -> str:
    return textwrap.dedent(
        f"""
        import copy, json, os, sys, threading, time, tracemalloc
        import prime_runs as pr

        page = os.sysconf("SC_PAGE_SIZE")

        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * page

        template = json.load(open({str(data)!r}))
        run = pr.init(name="big", environments=["gsm8k"], model="m", framework="f")
        for i in range({records}):
            record = copy.deepcopy(template)
            record["id"] = f"big-{{i}}"
            for n, member in enumerate(record["traces"]):
                member["id"] = f"big-{{i}}-{{n}}"
            record["traces"][0]["completion"] = [
                {{"role": "assistant", "content": str(i % 10) * {size}}}
            ]
            run.log_episodes(record)
            del record
        print("logged", flush=True)
        sys.stdin.readline()
        tracemalloc.start()
        before, peak, done = rss(), [0], threading.Event()

        def watch():
            while not done.wait(0.005):
                peak[0] = max(peak[0], rss())

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        run.finish(timeout=300)
        done.set()
        watcher.join(5)
        held, held_peak = tracemalloc.get_traced_memory()
        print(json.dumps({{"before": before, "peak": peak[0], "held_peak": held_peak,
                           "acked": run.acknowledged_records}}), flush=True)
        """
    )


def _finish_after_stall(
    prime_env: StandInPlatform, template: dict[str, Any], tmp_path: Path, records: int, size: int
) -> dict[str, Any]:
    data = tmp_path / "template.json"
    data.write_text(json.dumps(template))
    # Traces uploads wait: the run's records pile up in its journal, past the ledger's bound.
    prime_env.stall("traces_upload", 600)
    producer = subprocess.Popen(
        [sys.executable, "-c", _producer(data, records, size)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert producer.stdout.readline().strip() == "logged"
        prime_env.unstall()
        out, _ = producer.communicate("go\n", timeout=300)
    finally:
        prime_env.unstall()
        if producer.poll() is None:
            producer.kill()
            producer.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def test_finish_after_a_stall_reads_the_journal_back_within_a_byte_budget(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]], tmp_path: Path
) -> None:
    result = _finish_after_stall(prime_env, episodes[0], tmp_path, RECORDS, RECORD_BYTES)
    assert result["acked"] == {"traces": RECORDS, "eval_samples": RECORDS}
    # What finish() allocated at its peak (Python's own count: the process's RSS also keeps
    # whatever the C allocator has not handed back to the system).
    held = result["held_peak"]
    assert held <= BUDGET, f"finish() held {held / 2**20:.0f} MiB at its peak"


LARGE_RECORDS = 8
LARGE_BYTES = 19 * 1024 * 1024
# Per sink one claim (here one record) at a time: the sinks hold a record each. The sample
# sink's row is kept as parts of the record's bytes (built from the record's structure with
# its long strings spliced in, not decoded) and its request body is sent from those parts a
# slice at a time; the traces sink's small gzip body is hashed and compressed from the lines,
# never joined. About two records and a quarter; three and a half leave room for noise.
# Before: 4.4 records with the sample body joined (and the transport's copies of what was
# left of it after each partial send); 11 to 20 before that (a whole decode at six times the
# record, rows joined, and finished requests' bodies kept alive by httpx's reference cycles
# until a garbage collection).
LARGE_BUDGET = 7 * LARGE_BYTES // 2


def test_records_of_many_megabytes_cost_a_few_records_at_finish(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]], tmp_path: Path
) -> None:
    # episodes[0] holds non-ASCII text: a whole decode would make a str of four bytes a
    # character of the whole 19 MiB line.
    result = _finish_after_stall(prime_env, episodes[0], tmp_path, LARGE_RECORDS, LARGE_BYTES)

    assert result["acked"] == {"traces": LARGE_RECORDS, "eval_samples": LARGE_RECORDS}
    held = result["held_peak"]
    assert held <= LARGE_BUDGET, f"finish() held {held / LARGE_BYTES:.1f} records at its peak"


_SYNC = textwrap.dedent(
    """
    import json, sys, tracemalloc
    tracemalloc.start()
    from prime_runs.cli import main
    code = main(["sync", sys.argv[1]])
    print(json.dumps({"code": code, "peak": tracemalloc.get_traced_memory()[1]}))
    """
)
OVERSIZE_RECORDS = 6
OVERSIZE_CHARS = 10_000_000  # about 11 MiB of UTF-8: with its copies the row passes 25 MiB
# Sync sends a chunk of up to 16 MiB of records and reads the next record meanwhile: two
# records of this size and a line being read, with slack, is under five. Before: fourteen
# (each per-trace row joined and decoded again for its id, a journal line read as twice
# its size, the line and its copy and the previous record kept while the next was read).
OVERSIZE_BUDGET_RECORDS = 7


def test_sync_of_records_too_large_for_one_sample_request_holds_a_few_records(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]]
) -> None:
    text = ("répondre déjà " * (OVERSIZE_CHARS // 14 + 1))[:OVERSIZE_CHARS]
    records = []
    for n in range(OVERSIZE_RECORDS):
        record = copy.deepcopy(episodes[0])
        record["id"] = f"oversize-{n}"
        for i, trace in enumerate(record["traces"]):
            trace["id"] = f"oversize-{n}-{i}"
        summary = record["traces"][summary_trace_index(record)]
        summary["nodes"][-1]["message"]["content"] = text + str(n)
        records.append(record)
    run = offline_run(records, name="oversize")
    size = max(len(line) for line in journal_lines(run))
    del records

    out = subprocess.run(
        [sys.executable, "-c", _SYNC, run.id], capture_output=True, text=True, timeout=300
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, out.stderr[-2000:]
    platform_id = json.loads((Path(run.archive_path) / "sync.json").read_text())["platform"]["id"]
    rows = prime_env.samples(platform_id)
    # The path this test is about: each episode went as one row per trace.
    assert len(rows) == OVERSIZE_RECORDS * len(episodes[0]["traces"]) > OVERSIZE_RECORDS
    assert {f"oversize-{n}" for n in range(OVERSIZE_RECORDS)} <= set(prime_env.episodes)
    held = result["peak"] / size
    assert held <= OVERSIZE_BUDGET_RECORDS, f"sync held {held:.1f} records at its peak"


_HEALTHY = textwrap.dedent(
    """
    import copy, json, os, sys, threading
    import prime_runs as pr

    page = os.sysconf("SC_PAGE_SIZE")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    template, records, size = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
    run = pr.init(name="big", environments=["gsm8k"], model="m", framework="f")
    start, peak, done = rss(), [0], threading.Event()

    def watch():
        while not done.wait(0.003):
            peak[0] = max(peak[0], rss())

    threading.Thread(target=watch, daemon=True).start()
    for i in range(records):
        record = copy.deepcopy(template)
        record["id"] = f"big-{i}"
        for n, member in enumerate(record["traces"]):
            member["id"] = f"big-{i}-{n}"
            # Spread over the traces: too large for one sample row, one row per trace fits.
            text = str(i % 10) * (size // len(record["traces"]))
            member["nodes"][-1]["message"]["content"] = text
        run.log_episodes(record)
        del record
    run.finish(timeout=300)
    done.set()
    print(json.dumps({"growth": max(peak[0], rss()) - start, "acked": run.acknowledged_records}))
    """
)
HEALTHY_RECORDS = 20
HEALTHY_BYTES = 15 * 1024 * 1024
# The run's whole life, logging and finish(), over the RSS after init(): the records in
# flight through the two sinks (about 80 MiB measured, up to 140 with the C allocator's
# spare), and no read-back: this host stored every sample row, so finish() reads none.
# Before: 360 MiB, a third of it the read-back of the evaluation's 60 rows (53 pages).
HEALTHY_BUDGET = 160 * 1024 * 1024


def test_a_healthy_run_of_large_records_reads_nothing_back_at_finish(
    prime_env: StandInPlatform, episodes: list[dict[str, Any]], tmp_path: Path
) -> None:
    data = tmp_path / "template.json"
    data.write_text(json.dumps(episodes[0]))
    out = subprocess.run(
        [sys.executable, "-c", _HEALTHY, str(data), str(HEALTHY_RECORDS), str(HEALTHY_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["acked"] == {"traces": HEALTHY_RECORDS, "eval_samples": HEALTHY_RECORDS}
    (eval_id,) = prime_env.evaluations
    # The path this test is about: each episode went as one row per trace.
    assert len(prime_env.samples(eval_id)) == HEALTHY_RECORDS * len(episodes[0]["traces"])
    # No read-back at finish: the only listing requests are the appends' row-count reads,
    # each before its append (``platform/samples``), none after the last.
    routes = [r.route for r in prime_env.requests]
    last_append = max(i for i, route in enumerate(routes) if route == "samples_append")
    assert "samples_list" not in routes[last_append:]
    growth = result["growth"]
    assert growth <= HEALTHY_BUDGET, f"peak RSS grew {growth / 2**20:.0f} MiB"

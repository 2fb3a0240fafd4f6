"""One online run of 2,000 episodes against the stand-in platform, then a tally.

Prints what each store holds (Prime Traces and the evaluation's sample table), what the
run's own counters say, and how long the producer spent inside ``log_episodes``. Needs no
account: everything goes to a local stand-in on 127.0.0.1.

    python examples/stress_run.py [--episodes N] [--storm]

``--storm`` answers a share of the uploads with 429/503 (some after storing, so the
answer is lost) to show that every record still lands exactly once.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter

from _fixture_records import fresh_episodes

import prime_runs as pr
from prime_runs.testing import StandInPlatform


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=50, help="episodes per log_episodes call")
    parser.add_argument("--storm", action="store_true", help="inject 429/503 answers")
    args = parser.parse_args()

    episodes = fresh_episodes(args.episodes)
    with StandInPlatform(keep_documents=False) as platform, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(platform.env())
        run = pr.init(
            name="stress",
            environments=["prfix-v1"],
            model="stand-in-model",
            framework="verifiers",
            api_key=platform.api_key,
            base_url=platform.base_url,
            dir=tmp,
        )
        if args.storm:
            platform.fail("traces_upload", 429, times=4, retry_after=0)
            platform.fail("traces_upload", 503, times=2, after_processing=True, retry_after=0)
            platform.fail("samples_append", 429, times=4, retry_after=0)
            platform.fail("samples_append", 503, times=2, after_processing=True)

        logging_seconds = 0.0
        for start in range(0, len(episodes), args.chunk):
            t0 = time.perf_counter()
            run.log_episodes(episodes[start : start + args.chunk])
            logging_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        run.finish()
        finish_seconds = time.perf_counter() - t0

        rows = Counter(row["sample_id"] for row in platform.samples(run.id))
        writes = platform.episode_writes
        wanted = {e["id"] for e in episodes}
        uploads = platform.requests_for("traces_upload")
        appends = platform.requests_for("samples_append")
        routes = [r.route for r in platform.requests]
        last_upload = max(
            i for i, r in enumerate(routes) if r in ("traces_upload", "samples_append")
        )

        print(f"episodes logged:            {run.logged_records}")
        print(
            f"log_episodes total time:    {logging_seconds:.3f} s "
            f"({1e6 * logging_seconds / len(episodes):.0f} us per episode)"
        )
        print(f"finish() time:              {finish_seconds:.3f} s")
        print("Prime Traces")
        print(f"  episodes stored:          {len(set(writes) & wanted)} of {len(wanted)}")
        print(f"  stored more than once:    {sum(1 for n in writes.values() if n > 1)}")
        print(f"  member traces stored:     {len(platform.trace_writes)}")
        print(f"  upload requests:          {len(uploads)} ({Counter(r.status for r in uploads)})")
        print(f"  receipts:                 {len(platform.receipts)}")
        print("Sample table (v0)")
        print(
            f"  rows stored:              {sum(rows.values())} "
            f"({len(set(rows) & wanted)} distinct episodes)"
        )
        print(f"  duplicate rows:           {sum(n - 1 for n in rows.values())}")
        print(
            f"  append requests:          {len(appends)} "
            f"({Counter(r.status for r in appends)}), "
            f"largest body {max(r.body_size for r in appends):,} bytes"
        )
        print("Run counters")
        print(f"  acknowledged_records:     {run.acknowledged_records}")
        print(f"  failed_records:           {run.failed_records}")
        print(f"  dropped_records:          {run.dropped_records}")
        print(f"  errors:                   {len(run.errors)}")
        print("Order")
        print(f"  last upload before finalize: {last_upload < routes.index('eval_finalize')}")
        print(f"  evaluation status:        {platform.evaluations[run.id]['status']}")


if __name__ == "__main__":
    main()

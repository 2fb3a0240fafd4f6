"""Online quickstart against the stand-in platform: nothing leaves this machine.

    make online-demo     # or: python examples/online_quickstart.py

Starts ``prime_runs.testing.StandInPlatform`` (a real HTTP server on 127.0.0.1 that
plays the platform API and Prime Traces) in this process, runs a small eval against
it, and prints what it received: the evaluation, the Prime Traces uploads, the rows of
the evaluation's sample table and the finalize. Against the real platform, drop the
stand-in and the ``api_key``/``base_url`` arguments: ``PRIME_API_KEY`` (or ``prime
login``) is all it takes.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import Counter
from pathlib import Path

from _fixture_records import fresh_episodes

import prime_runs as pr
from prime_runs.testing import StandInPlatform

NUM_EPISODES = 12


def main() -> None:
    episodes = fresh_episodes(NUM_EPISODES)
    with StandInPlatform() as platform, tempfile.TemporaryDirectory() as journal_dir:
        # The stand-in serves the platform API and Prime Traces on one origin.
        os.environ["PRIME_TRACES_URL"] = platform.base_url
        run = pr.init(
            name="online-quickstart",
            environments=["best-of-n", "user-sim"],
            model="scripted/model",
            framework="verifiers",
            config={"num_examples": NUM_EPISODES, "temperature": 0.7},
            mode="online",
            api_key=platform.api_key,  # a made-up key the stand-in accepts
            base_url=platform.base_url,
            dir=journal_dir,  # the run's journal; temporary here, like the platform
        )

        def log_worker() -> None:  # verifiers logs from a worker thread, one at a time
            for episode in episodes:
                run.log_episodes(episode)

        worker = threading.Thread(target=log_worker)
        worker.start()
        worker.join()
        run.finish(pr.metrics.from_episodes(episodes))
        journaled = sum(
            p.read_bytes().count(b"\n") for p in (Path(journal_dir) / run.id).glob("records/*")
        )

        evaluation = platform.evaluations[run.id]
        uploads = platform.requests_for("traces_upload")
        lines = [line for r in uploads for line in r.lines]
        stamped = sum(1 for line in lines if (line.get("run") or {}).get("id") == run.id)
        rows = platform.samples(run.id)
        logged_ids = {e["id"] for e in episodes}
        matched = sum(1 for row in rows if row.get("episode_id") in logged_ids)
        metrics = evaluation["metrics"]
        routes = Counter(r.route for r in platform.requests)

        print(f"stand-in platform at {platform.base_url} (in this process)")
        print(f"run {run.id} ({run.mode}, {run.status}): {run.logged_records} episodes logged")
        print()
        print("What the stand-in received:")
        print(
            f"  evaluation    {evaluation['name']!r}, model {evaluation['model_name']}, "
            f"framework {evaluation['framework']}"
        )
        print(f"                config {evaluation['metadata']}")
        print(
            f"  prime traces  {len(platform.episodes)} episodes ({len(platform.traces)} traces) "
            f"in {len(uploads)} upload{'' if len(uploads) == 1 else 's'}; "
            f"{stamped} of {len(lines)} lines carry run.id"
        )
        print(f"  sample rows   {len(rows)} rows, {matched} matching a logged episode")
        print(
            f"  finalize      {evaluation['finalize_count']}x, status {evaluation['status']}, "
            f"avg_reward {metrics['avg_reward']:.3f}, avg_error {metrics['avg_error']:.3f}"
        )
        print(f"  requests      {', '.join(f'{route} x{n}' for route, n in routes.items())}")
        print()
        print("What the SDK counted:")
        print(f"  acknowledged  {dict(sorted(run.acknowledged_records.items()))}")
        print(f"  failed        {run.failed_records}, dropped {run.dropped_records}")
        print(f"  journal       {journaled} records in the run's local journal")
        if platform.server_errors:
            raise SystemExit(f"the stand-in hit an internal error:\n{platform.server_errors[0]}")


if __name__ == "__main__":
    main()

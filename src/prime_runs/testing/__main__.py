"""``python -m prime_runs.testing``: run the stand-in in the foreground.

Prints ``export VAR=value`` lines for the shell, then serves until Ctrl-C or SIGTERM.
With ``-v``/``--verbose``, each request is one line on stderr once answered: method, path,
route, status, and what it carried (JSON body, upload line count and format, idempotency
key). Headers are never shown (the Authorization header carries the key).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from types import FrameType

from prime_runs.testing._records import RecordedRequest
from prime_runs.testing._reply import TRACES_MODES, VARIANTS
from prime_runs.testing._standin import StandInPlatform


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m prime_runs.testing",
        description="Serve a stand-in Prime platform + Prime Traces on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free)")
    parser.add_argument("--variant", choices=VARIANTS, default="N")
    parser.add_argument("--traces", choices=TRACES_MODES, default="enabled")
    parser.add_argument("--api-key", default="test-key", help="the key the stand-in accepts")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print one line per request to stderr: what it received and what it answered",
    )
    args = parser.parse_args(argv)

    done = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    platform = StandInPlatform(
        variant=args.variant,
        api_key=args.api_key,
        traces=args.traces,
        port=args.port,
        on_request=_print_request if args.verbose else None,
    )
    with platform:
        for name, value in platform.env().items():
            print(f"export {name}={shlex.quote(value)}")
        print(f"# stand-in serving on {platform.base_url}; Ctrl-C to stop", file=sys.stderr)
        sys.stdout.flush()
        while not done.wait(0.5):
            pass
    return 0


def _print_request(record: RecordedRequest) -> None:
    print(f"# {record.summary()}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())

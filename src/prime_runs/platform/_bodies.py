"""Large request bodies are let go as soon as their request is done.

httpx's response and its stream refer to each other, so a finished exchange is cyclic
garbage: the response, its request and the request's body stay alive until the garbage
collector's next pass over them. The collector counts objects, not bytes, and Python skips
most passes over the old generation, so bodies of many megabytes piled up (four of a sample
sink's 19 MiB bodies alive at once). After a large body, the young generations, where the
exchange's objects still are, are collected at once: well under a millisecond, and a few
times per run only (a body is this large only for records of megabytes).
"""

from __future__ import annotations

import gc

#: Bodies at least this large are collected after their request.
COLLECT_ABOVE = 8 * 1024 * 1024


def sent(size: int) -> None:
    """A request with a body of ``size`` bytes is done (whatever its outcome)."""
    if size >= COLLECT_ABOVE and gc.isenabled():
        gc.collect(1)

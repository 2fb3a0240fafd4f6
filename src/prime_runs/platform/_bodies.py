"""Large request bodies: sent in slices from their parts, and let go as soon as their
request is done.

A body kept as its parts (:class:`Body`: views of a record's bytes among them) is never
joined: httpx sends it slice by slice under the ``Content-Length`` it declares (so it is not
sent chunked), and its transport's socket write, which copies what is left of a buffer
after each partial send, then copies at most a slice. A joined body of 19 MiB cost its own
copy plus about 12 MiB of those leftovers at the peak of a ``finish()``.

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
from collections.abc import Iterator

from prime_runs._records.skeleton import Part, Spliced

#: Bodies at least this large are collected after their request.
COLLECT_ABOVE = 8 * 1024 * 1024
#: The largest piece of a body handed to the transport at once.
SLICE = 1024 * 1024


class Body(Spliced):
    """A request body as its parts, sent in order; ``len()`` is its size in bytes.

    Iterable more than once (httpx iterates it again for a retry or a redirect)."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Part]:
        # Small parts are joined into pieces of about a slice: a piece is one write to the
        # socket, and a body of thousands of rows' parts would otherwise be thousands.
        small: list[Part] = []
        size = 0
        for part in self.parts:
            if len(part) < SLICE:
                if size + len(part) > SLICE:
                    yield b"".join(small)
                    small, size = [], 0
                small.append(part)
                size += len(part)
                continue
            if small:
                yield b"".join(small)
                small, size = [], 0
            view = memoryview(part)
            for start in range(0, len(view), SLICE):
                yield view[start : start + SLICE]
        if small:
            yield b"".join(small)


def sent(size: int) -> None:
    """A request with a body of ``size`` bytes is done (whatever its outcome)."""
    if size >= COLLECT_ABOVE and gc.isenabled():
        gc.collect(1)

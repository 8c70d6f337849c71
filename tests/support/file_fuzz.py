"""Graph files damaged at random with their checksum recomputed (what an attacker can do):
each variant decoded, or ``None`` where the reader refused it."""

from __future__ import annotations

import random

import pycudagraph as pcg
from pycudagraph.files import archive as files


def resealed(data: bytes, count: int, seed: int):
    """``count`` variants of the graph file ``data``: 1, 2 or 4 bytes after the header's
    first 24 set to random values, the checksum recomputed (``files.reseal``); yields the
    decoded :class:`~pycudagraph.files.archive.GraphFile` or None when refused."""
    rng = random.Random(seed)
    for _ in range(count):
        buf = bytearray(data)
        for _ in range(rng.choice((1, 2, 4))):
            buf[rng.randrange(24, len(buf))] = rng.randrange(256)
        try:
            yield files.decode(files.reseal(buf))
        except pcg.GraphFileError:
            yield None

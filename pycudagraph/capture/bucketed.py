"""One graph per bucket of sizes: pad to the smallest bucket that fits, replay, slice.

The seeds' Pattern C (variable sequence length) and batch-size pool. The caller gives a
factory ``make(size) -> step``; a step owns static buffers for that size and has

- ``step.load(*inputs)``: copy (and pad) the inputs into its static buffers,
- ``step.run(stream)``: issue the work on ``stream`` (captured once per bucket),
- ``step.read(n)``: return the first ``n`` rows of the result.

Sizes above the largest bucket run eagerly (``make(size)``, then ``run`` without a graph).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .capture import capture
from ..errors import ArgumentError
from ..runtime.stream import Stream
from ..runtime.values import int_arg, require_callable, seq_arg, short_repr

__all__ = ["BucketedGraphs", "BucketStats"]


@dataclass
class BucketStats:
    """Counters: replays of an existing graph, first uses of a bucket, captures, eager runs."""

    hits: int = 0
    misses: int = 0
    captures: int = 0
    fallbacks: int = 0
    per_bucket: dict = field(default_factory=dict)


class BucketedGraphs:
    """A pool of captured graphs keyed by bucket size.

    Parameters
    ----------
    buckets : iterable of int
        Bucket sizes (batch sizes, sequence lengths); sorted and deduplicated.
    make : callable
        ``make(size)`` returns a step object (see the module docstring).
    stream : Stream, optional
        Stream for capture and replay (a new non-blocking stream by default).
    warmup : int
        Eager runs of a bucket's step before capturing it (lets libraries allocate).
    """

    def __init__(self, buckets, make, stream=None, warmup: int = 1):
        given = seq_arg(buckets, "BucketedGraphs: buckets")
        sizes = sorted({int_arg(b, "BucketedGraphs: a bucket size") for b in given})
        if not sizes or sizes[0] <= 0:
            raise ArgumentError(f"BucketedGraphs: buckets must be positive sizes, got "
                                f"{short_repr(list(given))}")
        self.buckets = sizes
        self.make = require_callable(make, "make", "BucketedGraphs")
        self.warmup = int_arg(warmup, "BucketedGraphs: warmup", 0)
        self.stream = Stream.wrap(stream) if stream is not None else Stream()
        self.stats = BucketStats()
        self._graphs: dict[int, tuple] = {}
        self._eager: dict[int, object] = {}

    def bucket_for(self, size: int) -> int | None:
        """The smallest bucket >= ``size``, or ``None`` when ``size`` exceeds them all.
        No CUDA call."""
        return self._bucket(int_arg(size, "BucketedGraphs: size"))

    def _bucket(self, size: int) -> int | None:
        i = bisect.bisect_left(self.buckets, size)
        return self.buckets[i] if i < len(self.buckets) else None

    def _entry(self, bucket: int) -> tuple:
        entry = self._graphs.get(bucket)
        if entry is not None:
            self.stats.hits += 1
            return entry
        self.stats.misses += 1
        step = self.make(bucket)
        for _ in range(self.warmup):
            step.run(self.stream)
        self.stream.synchronize()
        with capture(self.stream) as cap:
            step.run(self.stream)
        cap.keep(step)
        exe = cap.graph.instantiate(upload_stream=self.stream)
        self.stats.captures += 1
        entry = self._graphs[bucket] = (step, exe)
        return entry

    def __call__(self, size: int, *inputs):
        """Run for ``size`` rows: replay the bucket's graph, or run eagerly above the buckets.

        Returns ``step.read(size)`` after the stream has finished.
        """
        size = int_arg(size, "BucketedGraphs: size")
        if size <= 0:
            raise ArgumentError(f"BucketedGraphs: size must be positive, got {size}")
        bucket = self._bucket(size)
        if bucket is None:
            self.stats.fallbacks += 1
            step = self._eager.get(size) or self._eager.setdefault(size, self.make(size))
            step.load(*inputs)
            step.run(self.stream)
        else:
            step, exe = self._entry(bucket)
            self.stats.per_bucket[bucket] = self.stats.per_bucket.get(bucket, 0) + 1
            step.load(*inputs)
            exe.launch(self.stream)
        self.stream.synchronize()
        return step.read(size)

    def __repr__(self) -> str:
        s = self.stats
        return (f"<BucketedGraphs buckets={self.buckets} captured={sorted(self._graphs)} "
                f"hits={s.hits} misses={s.misses} fallbacks={s.fallbacks}>")

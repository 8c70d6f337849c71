"""Peer: CuPy. Graphs come only from stream capture (``stream.begin_capture()`` ...
``stream.end_capture()`` returns an instantiated ``cupy.cuda.Graph``); kernels are
``RawModule`` functions compiled from ``kernels/helpers.cu``, called with CuPy arrays for
pointers and numpy scalars of the parameters' types (CuPy packs a Python float as a double)."""

from __future__ import annotations

from . import argsets
from .common import HELPERS_CU, Entry, NotSupported, Peer, elapsed_us, now
from .timing import eager_round, gpu_round, held_round

_NO_NODE_API = "CuPy builds graphs only by stream capture; it has no node or exec-update API"


class CupyPeer(Peer):
    key = "cupy"
    label = "CuPy"
    unsupported = {"set_arg": _NO_NODE_API, "set_all": _NO_NODE_API, "build": _NO_NODE_API,
                   "instantiate": "CuPy's end_capture instantiates: see the capture figure",
                   "update": _NO_NODE_API}

    def setup(self) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise NotSupported(f"CuPy is not installed ({exc})") from exc
        self.cp = cupy
        cupy.cuda.Device(0).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.s_int = int(self.stream.ptr)
        self.module = cupy.RawModule(code=HELPERS_CU.read_text())
        self.k_empty = self.module.get_function("empty")
        self.kernels = {n: self.module.get_function(argsets.name(n)) for n in argsets.COUNTS}
        self.arrays = [cupy.zeros(16, dtype=cupy.float32) for _ in range(4)]
        with self.stream:
            self.k_empty((1,), (1,), ())
            for n, k in self.kernels.items():
                k((1,), (1,), argsets.numpy_values(n, self.arrays))
        self.stream.synchronize()
        self._chains = {}

    def _capture(self, k: int):
        stream, kern = self.stream, self.k_empty
        with stream:
            stream.begin_capture()
            try:
                for _ in range(k):
                    kern((1,), (1,), ())
            finally:
                graph = stream.end_capture()
        return graph

    def _chain(self, k: int):
        if k not in self._chains:
            graph = self._capture(k)
            graph.upload(self.stream)
            for _ in range(3):
                graph.launch(self.stream)
            self.stream.synchronize()
            self._chains[k] = graph
        return self._chains[k]

    def r_held(self, k: int) -> Entry:
        s = self.settings
        return Entry(held_round(self.env, self._chain(k).launch, (self.stream,), self.s_int,
                                s.held_per_spin[k], s.spin_ms), note="Graph.launch(stream)")

    def r_eager(self, n: int) -> Entry:
        s, stream = self.settings, self.stream
        one = eager_round(self.env, self.kernels[n], ((1,), (1,), argsets.numpy_values(n, self.arrays)),
                          self.s_int, s.eager_batch, s.spin_ms)

        def on_stream() -> float:
            with stream:  # the launches go to the current stream
                return one()

        return Entry(on_stream, note="RawKernel((1,), (1,), args) in `with stream`")

    def r_capture(self, _arg=0) -> Entry:
        count = self.settings.captured

        def one() -> float:
            t0 = now()
            graph = self._capture(count)
            us = elapsed_us(t0)
            del graph
            return us

        return Entry(one, note=f"begin_capture + RawKernel x{count} + end_capture (instantiates)")

    def r_gpu_per_node(self, _arg=0) -> Entry:
        return Entry(gpu_round(self.env, self._chain(1000).launch, (self.stream,), self.s_int,
                               self.settings.gpu_launches, 1000))

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.synchronize()
        self._chains = {}

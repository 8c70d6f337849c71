"""Peer: CuPy. Graphs come only from stream capture (``stream.begin_capture()`` ...
``stream.end_capture()`` returns an instantiated ``cupy.cuda.Graph``); kernels are
``RawModule`` functions compiled from ``kernels/helpers.cu``."""

from __future__ import annotations

from .common import HELPERS_CU, NotSupported, Peer, elapsed_us, now, ok
from .timing import gpu_time_per_launch, held_batch, held_launch, timed_repeats

_NO_NODE_API = "CuPy builds graphs only by stream capture; it has no node or exec-update API"


class CupyPeer(Peer):
    key = "cupy"
    label = "CuPy"
    unsupported = {
        "exec_set_arg": _NO_NODE_API,
        "build": _NO_NODE_API,
        "mlp": "the demo MLP is measured for pycudagraph and PyTorch only",
    }

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
        with self.stream:
            self.k_empty((1,), (1,), ())
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
        if k in self._chains:
            return self._chains[k]
        graph = self._capture(k)
        graph.upload(self.stream)
        for _ in range(3):
            graph.launch(self.stream)
        self.stream.synchronize()
        self._chains[k] = graph
        return graph

    def held_launch(self, k: int):
        s = self.settings
        graph = self._chain(k)
        return held_launch(self.env, graph.launch, (self.stream,), self.s_int,
                           s.held_per_spin[k], s.held_spins[k], s.spin_ms)

    def recapture(self):
        s = self.settings

        def once():
            t0 = now()
            graph = self._capture(1000)
            us = elapsed_us(t0)
            del graph
            return us

        return ok(timed_repeats(once, s.repeats),
                  "begin_capture + RawKernel x1000 + end_capture (instantiates)")

    def gpu_per_node(self):
        s = self.settings
        graph = self._chain(1000)
        us = gpu_time_per_launch(self.env, graph.launch, (self.stream,), self.s_int,
                                 s.gpu_launches, s.gpu_repeats)
        return ok(us / 1000.0, f"events around {s.gpu_launches} launches")

    def eager_launch(self):
        s = self.settings
        with self.stream:
            return held_batch(self.env, self.k_empty, ((1,), (1,), ()), self.s_int,
                              s.eager_batch, s.repeats, s.eager_spin_ms)

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.synchronize()
        self._chains = {}

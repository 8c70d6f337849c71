"""Peer: ``cuda.core`` (1.2): explicit graphs through ``cuda.core.graph.GraphDefinition``
(``gdef.launch`` / ``node.launch`` add kernel nodes, ``instantiate()`` gives an executable
``Graph`` with ``launch``, ``upload``, ``update`` and ``graph[node].update``), capture
through ``Stream.create_graph_builder()``, eager launches through ``cuda.core.launch``.

cuda.core packs a Python ``float`` as a double and an ``int`` as an intptr_t, so scalar
arguments are given as ``numpy.float32`` / ``numpy.int32`` and the pointer as an int.
"""

from __future__ import annotations

from .common import HELPERS_CU, NotSupported, Peer, elapsed_us, na, now, ok
from .timing import (build_instantiate_update, gpu_time_per_launch, held_batch, held_launch,
                     timed_repeats)


class CudaCorePeer(Peer):
    key = "cudacore"
    label = "cuda.core"
    unsupported = {"mlp": "the demo MLP is measured for pycudagraph and PyTorch only"}

    def setup(self) -> None:
        import numpy as np
        try:
            import cuda.core as cc
        except ImportError as exc:
            raise NotSupported(f"cuda.core is not installed ({exc})") from exc
        try:
            from cuda.core.graph import GraphDefinition
        except ImportError:
            GraphDefinition = None  # older cuda.core: capture only
        self.np, self.cc, self.GraphDefinition = np, cc, GraphDefinition
        self.dev = cc.Device(0)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.s_int = int(self.stream.handle)
        prog = cc.Program(HELPERS_CU.read_text(), "c++", cc.ProgramOptions(name="helpers.cu"))
        mod = prog.compile("cubin")
        self.k_empty = mod.get_kernel("empty")
        self.k3 = mod.get_kernel("empty3")
        self.cfg = cc.LaunchConfig(grid=1, block=1)
        self.buf = self.dev.allocate(4, stream=self.stream)
        self.ptr = int(self.buf.handle)
        self.n3 = np.int32(3)
        cc.launch(self.stream, self.cfg, self.k_empty)
        cc.launch(self.stream, self.cfg, self.k3, self.ptr, np.float32(1.0), self.n3)
        self.stream.sync()
        self._chains = {}

    def _need_gdef(self):
        if self.GraphDefinition is None:
            raise NotSupported(f"cuda.core {getattr(self.cc, '__version__', '?')} has no "
                               "cuda.core.graph.GraphDefinition (explicit graph building)")
        return self.GraphDefinition

    def _chain(self, k: int):
        if k in self._chains:
            return self._chains[k]
        gdef = self._need_gdef()()
        node = gdef.launch(self.cfg, self.k_empty)
        for _ in range(k - 1):
            node = node.launch(self.cfg, self.k_empty)
        exe = gdef.instantiate()
        exe.upload(self.stream)
        for _ in range(3):
            exe.launch(self.stream)
        self.stream.sync()
        self._chains[k] = (gdef, exe)
        return self._chains[k]

    def _build3(self, n: int, a: float):
        gdef = self._need_gdef()()
        cfg, k3, ptr, fa, n3 = self.cfg, self.k3, self.ptr, self.np.float32(a), self.n3
        t0 = now()
        node = gdef.launch(cfg, k3, ptr, fa, n3)
        nodes = [node]
        for _ in range(n - 1):
            node = node.launch(cfg, k3, ptr, fa, n3)
            nodes.append(node)
        return gdef, nodes, elapsed_us(t0)

    # Figures ------------------------------------------------------------------------

    def held_launch(self, k: int):
        s = self.settings
        _, exe = self._chain(k)
        return held_launch(self.env, exe.launch, (self.stream,), self.s_int,
                           s.held_per_spin[k], s.held_spins[k], s.spin_ms)

    def exec_set_arg(self):
        s = self.settings
        gdef, nodes, _ = self._build3(s.nodes, 1.0)
        exe = gdef.instantiate()
        view = exe[nodes[len(nodes) // 2]]  # made once, reused (cheaper than exe[node] per call)
        upd, cfg, k3, ptr, n3 = view.update, self.cfg, self.k3, self.ptr, self.n3
        vals = [self.np.float32(i % 997) for i in range(s.setarg_calls)]

        def body():
            t0 = now()
            for v in vals:
                upd(config=cfg, kernel=k3, args=(ptr, v, n3))
            return elapsed_us(t0) / len(vals)

        us = timed_repeats(body, s.repeats)
        exe.launch(self.stream)
        self.stream.sync()
        return {"exec_set_arg": ok(us, "graph[node].update(config=, kernel=, args=) on a cached view"),
                "exec_set_arg_alt": na("cuda.core has one node-update path (shown in the row above)")}

    def build(self):
        return build_instantiate_update(self._build3, self.settings.nodes, self.settings.repeats,
                                        ("gdef.launch / node.launch(cfg, k, ptr, f32, i32)",
                                         "GraphDefinition.instantiate()",
                                         "Graph.update(definition)"))

    def recapture(self):
        s, cc = self.settings, self.cc
        stream, cfg, k = self.stream, self.cfg, self.k_empty
        launch = cc.launch

        def once():
            t0 = now()
            gb = stream.create_graph_builder()
            gb.begin_building("global")
            try:
                for _ in range(1000):
                    launch(gb, cfg, k)
            finally:
                gb.end_building()
            exe = gb.complete()
            us = elapsed_us(t0)
            exe.close()
            gb.close()
            return us

        return ok(timed_repeats(once, s.repeats), "GraphBuilder capture + complete()")

    def gpu_per_node(self):
        s = self.settings
        _, exe = self._chain(1000)
        us = gpu_time_per_launch(self.env, exe.launch, (self.stream,), self.s_int,
                                 s.gpu_launches, s.gpu_repeats)
        return ok(us / 1000.0, f"events around {s.gpu_launches} launches")

    def eager_launch(self):
        s = self.settings
        return held_batch(self.env, self.cc.launch, (self.stream, self.cfg, self.k_empty), self.s_int,
                          s.eager_batch, s.repeats, s.eager_spin_ms)

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.sync()
        for _, exe in getattr(self, "_chains", {}).values():
            exe.close()
        self._chains = {}

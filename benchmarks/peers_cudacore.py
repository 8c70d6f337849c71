"""Peer: ``cuda.core`` (1.2): explicit graphs through ``cuda.core.graph.GraphDefinition``
(``gdef.launch`` / ``node.launch`` add kernel nodes, ``instantiate()`` gives an executable
``Graph`` with ``launch``, ``upload``, ``update`` and ``graph[node].update``), capture
through ``Stream.create_graph_builder()``, eager launches through ``cuda.core.launch``.

cuda.core packs a Python ``float`` as a double and an ``int`` as an intptr_t, so scalar
arguments are numpy scalars of the parameters' types and pointers ints
(``argsets.numpy_values``); a node update takes every argument (its one way), so the
argument tuples of a round are made before it is timed.
"""

from __future__ import annotations

from . import argsets
from .common import HELPERS_CU, Entry, NotSupported, Peer, elapsed_us, now
from .timing import eager_round, gpu_round, held_round


class CudaCorePeer(Peer):
    key = "cudacore"
    label = "cuda.core"

    def setup(self) -> None:
        try:
            import cuda.core as cc
        except ImportError as exc:
            raise NotSupported(f"cuda.core is not installed ({exc})") from exc
        try:
            from cuda.core.graph import GraphDefinition
        except ImportError:
            GraphDefinition = None  # older cuda.core: capture only
        self.cc, self.GraphDefinition = cc, GraphDefinition
        self.dev = cc.Device(0)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.s_int = int(self.stream.handle)
        prog = cc.Program(HELPERS_CU.read_text(), "c++", cc.ProgramOptions(name="helpers.cu"))
        mod = prog.compile("cubin")
        self.k_empty = mod.get_kernel("empty")
        self.kernels = {n: mod.get_kernel(argsets.name(n)) for n in argsets.COUNTS}
        self.cfg = cc.LaunchConfig(grid=1, block=1)
        self.buf = self.dev.allocate(64, stream=self.stream)
        self.ptr = int(self.buf.handle)
        cc.launch(self.stream, self.cfg, self.k_empty)
        for n, k in self.kernels.items():
            cc.launch(self.stream, self.cfg, k, *self.args(n))
        self.stream.sync()
        self._chains = {}

    def args(self, n: int, a: float = 1.0) -> tuple:
        return argsets.numpy_values(n, [self.ptr], a)

    def _gdef(self):
        if self.GraphDefinition is None:
            raise NotSupported(f"cuda.core {getattr(self.cc, '__version__', '?')} has no "
                               "cuda.core.graph.GraphDefinition (explicit graph building)")
        return self.GraphDefinition()

    def _chain(self, k: int):
        if k not in self._chains:
            gdef = self._gdef()
            node = gdef.launch(self.cfg, self.k_empty)
            for _ in range(k - 1):
                node = node.launch(self.cfg, self.k_empty)
            exe = gdef.instantiate()
            exe.upload(self.stream)
            for _ in range(3):
                exe.launch(self.stream)
            self.stream.sync()
            self._chains[k] = (gdef, exe)
        return self._chains[k][1]

    def _build(self, n: int, nodes: int, a: float = 1.0):
        gdef = self._gdef()
        cfg, k, args = self.cfg, self.kernels[n], self.args(n, a)
        node = gdef.launch(cfg, k, *args)
        made = [node]
        for _ in range(nodes - 1):
            node = node.launch(cfg, k, *args)
            made.append(node)
        return gdef, made

    def _exec_of(self, n: int):
        key = ("exec", n)
        if key not in self._chains:
            gdef, made = self._build(n, self.settings.nodes)
            exe = gdef.instantiate()
            self._chains[key] = (gdef, exe, exe[made[len(made) // 2]])  # a view made once
        return self._chains[key][1:]

    # Rounds ------------------------------------------------------------------------

    def r_held(self, k: int) -> Entry:
        s = self.settings
        return Entry(held_round(self.env, self._chain(k).launch, (self.stream,), self.s_int,
                                s.held_per_spin[k], s.spin_ms), note="graph.launch(stream)")

    def r_eager(self, n: int) -> Entry:
        s = self.settings
        return Entry(eager_round(self.env, self.cc.launch,
                                 (self.stream, self.cfg, self.kernels[n], *self.args(n)),
                                 self.s_int, s.eager_batch, s.spin_ms),
                     note="cuda.core.launch(stream, config, kernel, *args)")

    def _update(self, n: int, sets: list, note: str) -> Entry:
        _, view = self._exec_of(n)
        upd, cfg, k = view.update, self.cfg, self.kernels[n]

        def one() -> float:
            t0 = now()
            for a in sets:
                upd(config=cfg, kernel=k, args=a)
            return elapsed_us(t0) / len(sets)

        return Entry(one, note=note)

    def r_set_arg(self, n: int) -> Entry:
        import numpy as np
        base, i = list(self.args(n)), argsets.UPDATE_INDEX
        sets = []
        for j in range(self.settings.calls):
            base[i] = np.float32(j % 997)
            sets.append(tuple(base))
        return self._update(n, sets, "graph[node].update(config=, kernel=, args=) on a cached "
                                     "view (every argument: its one way)")

    def r_set_all(self, n: int) -> Entry:
        sets = [self.args(n, float(j % 997)) for j in range(self.settings.calls)]
        return self._update(n, sets, "graph[node].update(config=, kernel=, args=) on a cached view")

    def r_build(self, n: int) -> Entry:
        nodes = self.settings.nodes
        self._gdef()  # n/a when explicit graphs are missing

        def one() -> float:
            gdef = self._gdef()
            cfg, k, args = self.cfg, self.kernels[n], self.args(n)
            t0 = now()
            node = gdef.launch(cfg, k, *args)
            for _ in range(nodes - 1):
                node = node.launch(cfg, k, *args)
            us = elapsed_us(t0) / nodes
            del node, gdef
            return us

        return Entry(one, note="gdef.launch / node.launch(config, kernel, *args)")

    def r_instantiate(self, _arg=0) -> Entry:
        nodes = self.settings.nodes
        self._gdef()

        def one() -> float:
            gdef, _ = self._build(3, nodes)
            t0 = now()
            exe = gdef.instantiate()
            us = elapsed_us(t0) / nodes
            exe.close()
            return us

        return Entry(one, note="GraphDefinition.instantiate()")

    def r_update(self, _arg=0) -> Entry:
        nodes = self.settings.nodes
        self._gdef()

        def one() -> float:
            g1, _ = self._build(3, nodes, 1.0)
            g2, _ = self._build(3, nodes, 2.0)
            exe = g1.instantiate()
            t0 = now()
            exe.update(g2)
            us = elapsed_us(t0) / nodes
            exe.close()
            return us

        return Entry(one, note="Graph.update(definition)")

    def r_capture(self, _arg=0) -> Entry:
        cc, stream, cfg, k, count = self.cc, self.stream, self.cfg, self.k_empty, self.settings.captured
        launch = cc.launch

        def one() -> float:
            t0 = now()
            gb = stream.create_graph_builder()
            gb.begin_building("global")
            try:
                for _ in range(count):
                    launch(gb, cfg, k)
            finally:
                gb.end_building()
            exe = gb.complete()
            us = elapsed_us(t0)
            exe.close()
            gb.close()
            return us

        return Entry(one, note="GraphBuilder capture + complete()")

    def r_gpu_per_node(self, _arg=0) -> Entry:
        return Entry(gpu_round(self.env, self._chain(1000).launch, (self.stream,), self.s_int,
                               self.settings.gpu_launches, 1000))

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.sync()
        for item in getattr(self, "_chains", {}).values():
            item[1].close()
        self._chains = {}

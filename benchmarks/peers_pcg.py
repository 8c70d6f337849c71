"""Contestant: pycudagraph, through its public API only (``Graph.add_kernel``,
``GraphExec.launch / set_arg / set_params / update``, ``capture``, ``Kernel.launch``).

Kernels of 3, 10 and 30 arguments (``argsets.py``) get :class:`~pycudagraph.DeviceBuffer`
objects for their pointers and Python numbers for their scalars: converted and checked
against the signature on every call, as a user's would be.
"""

from __future__ import annotations

import itertools

from . import argsets
from .common import HELPERS_CU, Entry, Peer, elapsed_us, now
from .timing import eager_round, gpu_round, held_round


class PcgPeer(Peer):
    key = "pcg"
    label = "pycudagraph"

    def setup(self) -> None:
        import pycudagraph as pcg
        self.pcg = pcg
        self.stream = pcg.Stream()
        self.s_int = self.stream.ptr
        self.module = pcg.Module.from_file(HELPERS_CU)
        self.k_empty = self.module["empty"]
        self.kernels = {n: self.module[argsets.name(n)] for n in argsets.COUNTS}
        self.bufs = [pcg.DeviceBuffer(64) for _ in range(4)]
        self.k_empty.launch(1, 1, (), self.stream)  # load the module, warm each path
        for n, k in self.kernels.items():
            k.launch(1, 1, self.args(n), self.stream)
        self.stream.synchronize()
        self._chains = {}
        self.new_graph = pcg.Graph  # what makes a graph (a test's stand-in makes fakes)

    def args(self, n: int, a: float = 1.0) -> tuple:
        return tuple(argsets.values(n, self.bufs, a))

    def chain(self, k: int):
        """An instantiated, uploaded, warmed-up chain of k empty kernels (kept)."""
        if k not in self._chains:
            g = self.new_graph()
            prev = None
            for _ in range(k):
                prev = g.add_kernel(self.k_empty, 1, 1, (), deps=(prev,) if prev else ())
            exe = g.instantiate()
            exe.upload(self.stream)
            for _ in range(3):
                exe.launch(self.stream)
            self.stream.synchronize()
            self._chains[k] = exe
        return self._chains[k]

    def chain_of(self, n: int, nodes: int, a: float = 1.0):
        """A graph of ``nodes`` chained kernel nodes of the n-argument kernel, and its nodes."""
        g = self.new_graph()
        add, k, args = g.add_kernel, self.kernels[n], self.args(n, a)
        prev, made = None, []
        for _ in range(nodes):
            prev = add(k, 1, 1, args, deps=(prev,) if prev is not None else ())
            made.append(prev)
        return g, made

    def exec_of(self, n: int):
        """A 1000-node chain of the n-argument kernel, instantiated; its middle node."""
        key = ("exec", n)
        if key not in self._chains:
            g, made = self.chain_of(n, self.settings.nodes)
            self._chains[key] = (g.instantiate(), made[len(made) // 2])
        return self._chains[key]

    # Rounds ---------------------------------------------------------------------------

    def r_held(self, k: int) -> Entry:
        s = self.settings
        exe = self.chain(k)
        return Entry(held_round(self.env, exe.launch, (self.stream,), self.s_int,
                                s.held_per_spin[k], s.spin_ms), note="exe.launch(stream)")

    def r_eager(self, n: int) -> Entry:
        s = self.settings
        return Entry(eager_round(self.env, self.kernels[n].launch, (1, 1, self.args(n), self.stream),
                                 self.s_int, s.eager_batch, s.spin_ms),
                     note="k.launch(1, 1, args, stream)")

    def r_set_arg(self, n: int) -> Entry:
        exe, node = self.exec_of(n)
        vals = [float(i % 997) for i in range(self.settings.calls)]
        set_arg, i = exe.set_arg, argsets.UPDATE_INDEX

        def one() -> float:
            t0 = now()
            for v in vals:
                set_arg(node, i, v)
            return elapsed_us(t0) / len(vals)

        return Entry(one, note=f"exe.set_arg(node, {i}, v)")

    def r_set_all(self, n: int) -> Entry:
        exe, node = self.exec_of(n)
        sets = [self.args(n, float(i % 997)) for i in range(self.settings.calls)]
        set_params = exe.set_params

        def one() -> float:
            t0 = now()
            for a in sets:
                set_params(node, args=a)
            return elapsed_us(t0) / len(sets)

        return Entry(one, note="exe.set_params(node, args=(...))")

    def r_build(self, n: int) -> Entry:
        nodes, k, args, Graph = self.settings.nodes, self.kernels[n], self.args(n), self.new_graph

        def one() -> float:
            g = Graph()
            add = g.add_kernel
            t0 = now()
            prev = add(k, 1, 1, args)
            for _ in range(nodes - 1):
                prev = add(k, 1, 1, args, deps=(prev,))
            us = elapsed_us(t0) / nodes
            g.close()
            return us

        return Entry(one, note="g.add_kernel(k, 1, 1, args, deps=(prev,))")

    def r_instantiate(self, _arg=0) -> Entry:
        nodes = self.settings.nodes

        values = itertools.cycle((1.0, 2.0))

        def one() -> float:
            # The last round released an exec of this topology: instantiate-or-reuse, as a
            # loop that instantiates and releases graphs of one shape gets it (one
            # cuGraphExecUpdate instead of cuGraphInstantiateWithFlags: graph/exec_reuse.py).
            # Each round's scalars differ from the last one's: the update rewrites every node.
            g, _ = self.chain_of(3, nodes, next(values))
            t0 = now()
            exe = g.instantiate()
            us = elapsed_us(t0) / nodes
            exe.close()
            g.close()
            return us

        return Entry(one, note="g.instantiate(), the last round's exec released (exec reuse)")

    def r_update(self, _arg=0) -> Entry:
        from pycudagraph.graph.exec_reuse import paused
        nodes = self.settings.nodes

        def one() -> float:
            g1, _ = self.chain_of(3, nodes, 1.0)
            g2, _ = self.chain_of(3, nodes, 2.0)
            with paused():  # a freshly instantiated exec, as the peers update
                exe = g1.instantiate()
            t0 = now()
            exe.update(g2)
            us = elapsed_us(t0) / nodes
            exe.close()
            g1.close()
            g2.close()
            return us

        return Entry(one, note="exe.update(graph2)")

    def r_capture(self, _arg=0) -> Entry:
        from pycudagraph.graph.exec_reuse import paused
        pcg, stream, launch, count = self.pcg, self.stream, self.k_empty.launch, self.settings.captured

        def one() -> float:
            with paused():  # a real instantiate, as the peers make
                t0 = now()
                with pcg.capture(stream) as cap:
                    for _ in range(count):
                        launch(1, 1, (), stream)
                exe = cap.graph.instantiate()
                us = elapsed_us(t0)
            exe.close()
            cap.graph.close()
            return us

        return Entry(one, note=f"pcg.capture + k.launch x{count} + instantiate")

    def r_gpu_per_node(self, _arg=0) -> Entry:
        exe = self.chain(1000)
        return Entry(gpu_round(self.env, exe.launch, (self.stream,), self.s_int,
                               self.settings.gpu_launches, 1000))

    def mlp(self):
        from .mlp import pcg_mlp
        return pcg_mlp(self.env, self.settings)

    def tp_step(self):
        from .tp_step import cells
        return cells(300 if self.settings.quick else 2000)

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.synchronize()
        for item in getattr(self, "_chains", {}).values():
            (item[0] if isinstance(item, tuple) else item).close()
        self._chains = {}

"""Peer: pycudagraph, through its public API only (``Graph.add_kernel``,
``GraphExec.launch / set_arg / set_params / update``, ``capture``, ``Kernel.launch``)."""

from __future__ import annotations

from .common import HELPERS_CU, Peer, elapsed_us, now, ok
from .timing import (build_instantiate_update, gpu_time_per_launch, held_batch, held_launch,
                     timed_repeats)


class PcgPeer(Peer):
    key = "pcg"
    label = "pycudagraph"

    def setup(self) -> None:
        import pycudagraph as pcg
        self.pcg = pcg
        self.stream = pcg.Stream()
        self.module = pcg.Module.from_file(HELPERS_CU)
        self.k_empty = self.module["empty"]
        self.k3 = self.module["empty3"]
        self.buf = pcg.DeviceBuffer(4)
        self.ptr = self.buf.ptr
        self.k_empty.launch(1, 1, (), stream=self.stream)  # load the module, warm the path
        self.k3.launch(1, 1, (self.ptr, 1.0, 3), stream=self.stream)
        self.stream.synchronize()
        self._chains = {}

    def _chain(self, k: int):
        if k in self._chains:
            return self._chains[k]
        g = self.pcg.Graph()
        prev = None
        for _ in range(k):
            prev = g.add_kernel(self.k_empty, 1, 1, (), deps=(prev,) if prev is not None else ())
        exe = g.instantiate()
        exe.upload(self.stream)
        for _ in range(3):
            exe.launch(self.stream)
        self.stream.synchronize()
        self._chains[k] = exe
        return exe

    def _build3(self, n: int, a: float):
        """(graph, nodes, microseconds spent in the add_kernel loop)."""
        g = self.pcg.Graph()
        add, k3, ptr = g.add_kernel, self.k3, self.ptr
        nodes, prev = [], None
        t0 = now()
        for _ in range(n):
            prev = add(k3, 1, 1, (ptr, a, 3), deps=(prev,) if prev is not None else ())
            nodes.append(prev)
        return g, nodes, elapsed_us(t0)

    # Figures ------------------------------------------------------------------------

    def held_launch(self, k: int):
        s = self.settings
        exe = self._chain(k)
        return held_launch(self.env, exe.launch, (self.stream,), self.stream.ptr,
                           s.held_per_spin[k], s.held_spins[k], s.spin_ms)

    def exec_set_arg(self):
        s = self.settings
        g, nodes, _ = self._build3(s.nodes, 1.0)
        exe = g.instantiate()
        node = nodes[len(nodes) // 2]
        vals = [float(i % 997) for i in range(s.setarg_calls)]
        set_arg, set_params = exe.set_arg, exe.set_params

        def fast():
            t0 = now()
            for v in vals:
                set_arg(node, 1, v)
            return elapsed_us(t0) / len(vals)

        def general():
            t0 = now()
            for v in vals:
                set_params(node, args={1: v})
            return elapsed_us(t0) / len(vals)

        fast_us = timed_repeats(fast, s.repeats)
        gen_us = timed_repeats(general, s.repeats)
        exe.launch(self.stream)  # the exec must still be valid
        exe.synchronize()
        where = f"node {len(nodes) // 2} of {len(nodes)}"
        return {"exec_set_arg": ok(fast_us, f"exe.set_arg(node, 1, v), {where}"),
                "exec_set_arg_alt": ok(gen_us, f"exe.set_params(node, args={{1: v}}), {where}")}

    def build(self):
        return build_instantiate_update(self._build3, self.settings.nodes, self.settings.repeats,
                                        ("g.add_kernel(k, 1, 1, (ptr, 1.0, 3), deps=(prev,))",
                                         "g.instantiate()",
                                         "exe.update(graph2)"))

    def recapture(self):
        pcg, s = self.pcg, self.settings
        stream, launch = self.stream, self.k_empty.launch

        def once():
            t0 = now()
            with pcg.capture(stream) as cap:
                for _ in range(1000):
                    launch(1, 1, (), stream=stream)
            exe = cap.graph.instantiate()
            us = elapsed_us(t0)
            exe.close()
            return us

        return ok(timed_repeats(once, s.repeats), "pcg.capture + k.launch x1000 + instantiate")

    def gpu_per_node(self):
        s = self.settings
        exe = self._chain(1000)
        us = gpu_time_per_launch(self.env, exe.launch, (self.stream,), self.stream.ptr,
                                 s.gpu_launches, s.gpu_repeats)
        return ok(us / 1000.0, f"events around {s.gpu_launches} launches")

    def eager_launch(self):
        s = self.settings
        return held_batch(self.env, self.k_empty.launch, (1, 1, (), self.stream), self.stream.ptr,
                          s.eager_batch, s.repeats, s.eager_spin_ms)

    def mlp(self):
        from .mlp import pcg_mlp
        return pcg_mlp(self.env, self.settings)

    def tp_step(self):
        from .tp_step import cells
        return cells(300 if self.settings.quick else 2000)

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.synchronize()
        for exe in getattr(self, "_chains", {}).values():
            exe.close()
        self._chains = {}

"""The "driver" column: the bare driver call each pycudagraph figure makes, with everything
prepared beforehand (``bare.c``: ints in, the GIL released around the call), on pycudagraph's
own objects: the same exec, node, graph, ``CUfunction`` and stream. pycudagraph's figure
less this one is what pycudagraph itself costs ("pcg X = driver Y + Z"). It is no peer:
nothing is judged against it.
"""

from __future__ import annotations

from . import argsets
from .bare import Params, load
from .common import Entry, NotSupported, Peer, elapsed_us, now
from .timing import eager_round, held_round


class DriverPeer(Peer):
    key = "driver"
    label = "driver call"
    unsupported = {"gpu_per_node": "the GPU runs pycudagraph's own graph: the same time"}

    def __init__(self, env, settings, pcg_peer=None, library: str | None = None):
        super().__init__(env, settings)
        self.pcg_peer = pcg_peer
        self.library = library

    def setup(self) -> None:
        if self.pcg_peer is None or not hasattr(self.pcg_peer, "kernels"):
            raise NotSupported("needs pycudagraph's objects, and pycudagraph was not set up")
        self.bare, self.how = load(self.library)
        p = self.pcg_peer
        self.s_int = p.s_int
        self.func = {n: self.function(k) for n, k in p.kernels.items()}
        self.func_empty = self.function(p.k_empty)
        ptrs = [b.ptr for b in p.bufs]
        self.params = {n: Params(self.func[n], argsets.CtypesArgs(n, ptrs)) for n in argsets.COUNTS}
        self.note = "bare.c" if self.how == "C" else self.how

    def function(self, kernel) -> int:
        """The ``CUfunction`` pycudagraph's launches and nodes name (``Kernel.function``)."""
        return kernel.function()

    # Rounds ---------------------------------------------------------------------------

    def r_held(self, k: int) -> Entry:
        s = self.settings
        exe = self.pcg_peer.chain(k)
        return Entry(held_round(self.env, self.bare.graph_launch, (int(exe.handle), self.s_int),
                                self.s_int, s.held_per_spin[k], s.spin_ms),
                     note=f"cuGraphLaunch ({self.note})")

    def r_eager(self, n: int) -> Entry:
        s = self.settings
        return Entry(eager_round(self.env, self.bare.launch_kernel,
                                 (self.func[n], self.s_int, self.params[n].args.address),
                                 self.s_int, s.eager_batch, s.spin_ms),
                     note=f"cuLaunchKernel, prepacked ({self.note})")

    def _exec_set(self, n: int) -> Entry:
        exe, node = self.pcg_peer.exec_of(n)
        e, h, params, calls = int(exe.handle), int(node), self.params[n].address, self.settings.calls
        exec_set = self.bare.exec_set

        def one() -> float:
            t0 = now()
            for _ in range(calls):
                exec_set(e, h, params)
            return elapsed_us(t0) / calls

        return Entry(one, note=f"cuGraphExecKernelNodeSetParams, prepacked ({self.note})")

    def r_set_arg(self, n: int) -> Entry:
        return self._exec_set(n)

    def r_set_all(self, n: int) -> Entry:
        return self._exec_set(n)

    def r_build(self, n: int) -> Entry:
        bare, params, nodes = self.bare, self.params[n].address, self.settings.nodes

        def one() -> float:
            g = bare.graph_create()
            add = bare.add_kernel
            t0 = now()
            prev = 0
            for _ in range(nodes):
                prev = add(g, prev, params)
            us = elapsed_us(t0) / nodes
            bare.graph_destroy(g)
            return us

        return Entry(one, note=f"cuGraphAddKernelNode, prepacked ({self.note})")

    def r_instantiate(self, _arg=0) -> Entry:
        bare, nodes = self.bare, self.settings.nodes

        def one() -> float:
            g, _ = self.pcg_peer.chain_of(3, nodes)
            h = int(g.handle)
            t0 = now()
            e = bare.instantiate(h)
            us = elapsed_us(t0) / nodes
            bare.exec_destroy(e)
            g.close()
            return us

        return Entry(one, note=f"cuGraphInstantiateWithFlags on pycudagraph's graph ({self.note})")

    def r_update(self, _arg=0) -> Entry:
        bare, nodes = self.bare, self.settings.nodes

        def one() -> float:
            g1, _ = self.pcg_peer.chain_of(3, nodes, 1.0)
            g2, _ = self.pcg_peer.chain_of(3, nodes, 2.0)
            e = bare.instantiate(int(g1.handle))
            h2 = int(g2.handle)
            t0 = now()
            bare.exec_update(e, h2)
            us = elapsed_us(t0) / nodes
            bare.exec_destroy(e)
            g1.close()
            g2.close()
            return us

        return Entry(one, note=f"cuGraphExecUpdate on pycudagraph's graphs ({self.note})")

    def r_capture(self, _arg=0) -> Entry:
        bare, s, f, count = self.bare, self.s_int, self.func_empty, self.settings.captured
        launch = bare.launch_kernel

        def one() -> float:
            t0 = now()
            bare.begin_capture(s)
            try:
                for _ in range(count):
                    launch(f, s, 0)
            finally:
                g = bare.end_capture(s)
            e = bare.instantiate(g)
            us = elapsed_us(t0)
            bare.exec_destroy(e)
            bare.graph_destroy(g)
            return us

        return Entry(one, note=f"cuStreamBeginCapture, cuLaunchKernel x{count}, "
                               f"cuStreamEndCapture, cuGraphInstantiateWithFlags ({self.note})")


def profile_peers():
    """``(env, pcg_peer, driver_peer)`` set up with the suite's full settings: what the
    profiles that compare pycudagraph's calls with the bare ones start from."""
    from .cudaenv import RawEnv
    from .common import Settings
    from .peers_pcg import PcgPeer
    env = RawEnv()
    settings = Settings.make(quick=False)
    pcg_peer = PcgPeer(env, settings)
    pcg_peer.setup()
    driver = DriverPeer(env, settings, pcg_peer)
    driver.setup()
    return env, pcg_peer, driver

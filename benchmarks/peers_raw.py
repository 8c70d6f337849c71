"""Peer: raw ``cuda.bindings`` (runtime API; the driver's ``cuLaunchKernel`` for launches),
written the way a user of the bindings who cares for speed would.

Kernel arguments are *prepacked*: one ctypes object per parameter and the ``void*[]`` of
their addresses are made once (``argsets.CtypesArgs``), ``kernelParams`` is that array's
address, and each call writes only the values it changes (one for a one-argument update,
all of them for an all-argument update and for each node built). The bindings' other form,
a ``(values, ctypes types)`` tuple packed per call, is slower; it is not the one compared.
"""

from __future__ import annotations

from . import argsets
from .common import CudaCallError, Entry, Peer, elapsed_us, now
from .cudaenv import check
from .timing import eager_round, gpu_round, held_round


def _check_rc(res):
    if res[0]:
        raise CudaCallError(f"CUDA call failed: {getattr(res[0], 'name', res[0])}")


class RawPeer(Peer):
    key = "raw"
    label = "raw cuda.bindings"

    def setup(self) -> None:
        from cuda.bindings import driver as dr
        from cuda.bindings import runtime as rt
        self.rt, self.dr = rt, dr
        self.stream = check(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking))
        self.s_int = int(self.stream)
        self.k_empty = self.env.kernels["empty"]
        names = {3: "empty3", 10: "args10", 30: "args30"}
        self.kernels = {n: self.env.kernels[names[n]] for n in argsets.COUNTS}
        self.dptr = int(check(rt.cudaMalloc(64), "cudaMalloc"))
        self.cargs = {n: argsets.CtypesArgs(n, [self.dptr]) for n in argsets.COUNTS}
        self._owned = []  # (destroy function, handle)
        self._chains = {}
        self.func_kind, conv = self._probe_func()
        self.f_empty = conv(self.k_empty)
        self.func = {n: conv(k) for n, k in self.kernels.items()}

    # Helpers -----------------------------------------------------------------------

    def _params(self, func, kernel_params=None):
        p = self.rt.cudaKernelNodeParams()
        p.func = func
        for d in (p.gridDim, p.blockDim):
            d.x, d.y, d.z = 1, 1, 1
        p.sharedMemBytes = 0
        p.kernelParams = kernel_params
        p.extra = 0
        return p

    def _probe_func(self):
        """What ``cudaKernelNodeParams.func`` takes for a library kernel: the
        ``cudaKernel_t`` itself, else the context's ``CUfunction`` for it."""
        rt, dr = self.rt, self.dr
        candidates = (
            ("cudaKernel_t", lambda k: int(k)),
            ("CUfunction", lambda k: int(check(dr.cuKernelGetFunction(dr.CUkernel(int(k))),
                                               "cuKernelGetFunction"))),
        )
        last = None
        for name, conv in candidates:
            g = e = None
            try:
                g = check(rt.cudaGraphCreate(0))
                p = self._params(conv(self.kernels[3]), self.cargs[3].address)
                check(rt.cudaGraphAddKernelNode(g, None, 0, p), "cudaGraphAddKernelNode")
                e = check(rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
                check(rt.cudaGraphLaunch(e, self.stream), "cudaGraphLaunch")
                check(rt.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")
                return name, conv
            except Exception as exc:  # noqa: BLE001 - try the next form
                last = exc
                rt.cudaGetLastError()
            finally:
                if e is not None:
                    rt.cudaGraphExecDestroy(e)
                if g is not None:
                    rt.cudaGraphDestroy(g)
        raise CudaCallError(f"no kernel handle form works in cudaKernelNodeParams.func: {last}")

    def _chain(self, k: int):
        """Instantiated, uploaded, warmed-up chain of k empty kernels."""
        if k in self._chains:
            return self._chains[k]
        rt = self.rt
        g = check(rt.cudaGraphCreate(0))
        self._owned.append((rt.cudaGraphDestroy, g))
        p = self._params(self.f_empty)
        prev = None
        for _ in range(k):
            deps = [prev] if prev is not None else None
            prev = check(rt.cudaGraphAddKernelNode(g, deps, len(deps or ()), p))
        e = check(rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
        self._owned.append((rt.cudaGraphExecDestroy, e))
        check(rt.cudaGraphUpload(e, self.stream), "cudaGraphUpload")
        for _ in range(3):
            check(rt.cudaGraphLaunch(e, self.stream), "cudaGraphLaunch")
        check(rt.cudaStreamSynchronize(self.stream))
        self._chains[k] = e
        return e

    def _build(self, g, n: int, nodes: int, a: float = 1.0):
        """Add ``nodes`` chained n-argument kernel nodes to g, each node's values written."""
        add, cargs = self.rt.cudaGraphAddKernelNode, self.cargs[n]
        p = self._params(self.func[n], cargs.address)
        vals, write_all = argsets.values(n, [self.dptr], a), cargs.write_all
        write_all(vals)
        res = add(g, None, 0, p)
        _check_rc(res)
        prev, made = res[1], [res[1]]
        for _ in range(nodes - 1):
            write_all(vals)
            res = add(g, [prev], 1, p)
            if res[0]:
                _check_rc(res)
            prev = res[1]
            made.append(prev)
        return made

    def _exec_of(self, n: int):
        key = ("exec", n)
        if key not in self._chains:
            rt = self.rt
            g = check(rt.cudaGraphCreate(0))
            self._owned.append((rt.cudaGraphDestroy, g))
            made = self._build(g, n, self.settings.nodes)
            e = check(rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
            self._owned.append((rt.cudaGraphExecDestroy, e))
            self._chains[key] = (e, made[len(made) // 2])
        return self._chains[key]

    # Rounds ------------------------------------------------------------------------

    def r_held(self, k: int) -> Entry:
        s = self.settings
        return Entry(held_round(self.env, self.rt.cudaGraphLaunch, (self._chain(k), self.stream),
                                self.s_int, s.held_per_spin[k], s.spin_ms, _check_rc),
                     note="cudaGraphLaunch(exec, stream)")

    def r_eager(self, n: int) -> Entry:
        s, dr = self.settings, self.dr
        f = dr.CUfunction(int(self.kernels[n]))  # a CUkernel works as a CUfunction
        args = (f, 1, 1, 1, 1, 1, 1, 0, dr.CUstream(self.s_int), self.cargs[n].address, 0)
        return Entry(eager_round(self.env, dr.cuLaunchKernel, args, self.s_int, s.eager_batch,
                                 s.spin_ms, _check_rc),
                     note="cuLaunchKernel(..., kernelParams=prepacked address)")

    def r_set_arg(self, n: int) -> Entry:
        e, node = self._exec_of(n)
        q = self._params(self.func[n], self.cargs[n].address)
        obj = self.cargs[n].objs[argsets.UPDATE_INDEX]
        setp, vals = self.rt.cudaGraphExecKernelNodeSetParams, [float(i % 997)
                                                                for i in range(self.settings.calls)]

        def one() -> float:
            t0 = now()
            for v in vals:
                obj.value = v
                res = setp(e, node, q)
                if res[0]:
                    _check_rc(res)
            return elapsed_us(t0) / len(vals)

        return Entry(one, note="one ctypes value written, cudaGraphExecKernelNodeSetParams")

    def r_set_all(self, n: int) -> Entry:
        e, node = self._exec_of(n)
        q = self._params(self.func[n], self.cargs[n].address)
        sets = [argsets.values(n, [self.dptr], float(i % 997)) for i in range(self.settings.calls)]
        setp, write_all = self.rt.cudaGraphExecKernelNodeSetParams, self.cargs[n].write_all

        def one() -> float:
            t0 = now()
            for vals in sets:
                write_all(vals)
                res = setp(e, node, q)
                if res[0]:
                    _check_rc(res)
            return elapsed_us(t0) / len(sets)

        return Entry(one, note="every ctypes value written, cudaGraphExecKernelNodeSetParams")

    def r_build(self, n: int) -> Entry:
        rt, nodes = self.rt, self.settings.nodes

        def one() -> float:
            g = check(rt.cudaGraphCreate(0))
            try:
                t0 = now()
                self._build(g, n, nodes)
                return elapsed_us(t0) / nodes
            finally:
                rt.cudaGraphDestroy(g)

        return Entry(one, note="values written, cudaGraphAddKernelNode(g, [prev], 1, params)")

    def r_instantiate(self, _arg=0) -> Entry:
        rt, nodes = self.rt, self.settings.nodes

        def one() -> float:
            g = check(rt.cudaGraphCreate(0))
            try:
                self._build(g, 3, nodes)
                t0 = now()
                e = check(rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
                us = elapsed_us(t0) / nodes
                rt.cudaGraphExecDestroy(e)
                return us
            finally:
                rt.cudaGraphDestroy(g)

        return Entry(one, note="cudaGraphInstantiate")

    def r_update(self, _arg=0) -> Entry:
        rt, nodes = self.rt, self.settings.nodes

        def one() -> float:
            g1, g2 = check(rt.cudaGraphCreate(0)), check(rt.cudaGraphCreate(0))
            e = None
            try:
                self._build(g1, 3, nodes, 1.0)
                self._build(g2, 3, nodes, 2.0)
                e = check(rt.cudaGraphInstantiate(g1, 0), "cudaGraphInstantiate")
                t0 = now()
                err, info = rt.cudaGraphExecUpdate(e, g2)
                us = elapsed_us(t0) / nodes
                if err or int(info.result) != 0:
                    raise CudaCallError(f"cudaGraphExecUpdate failed: {err} / {info.result}")
                return us
            finally:
                if e is not None:
                    rt.cudaGraphExecDestroy(e)
                rt.cudaGraphDestroy(g1)
                rt.cudaGraphDestroy(g2)

        return Entry(one, note="cudaGraphExecUpdate")

    def r_capture(self, _arg=0) -> Entry:
        rt, dr, count = self.rt, self.dr, self.settings.captured
        f = dr.CUfunction(int(self.k_empty))
        launch, stream, ds = dr.cuLaunchKernel, self.stream, dr.CUstream(self.s_int)
        mode = rt.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal

        def one() -> float:
            t0 = now()
            check(rt.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")
            try:
                for _ in range(count):
                    res = launch(f, 1, 1, 1, 1, 1, 1, 0, ds, 0, 0)
                    if res[0]:
                        _check_rc(res)
            finally:
                g = check(rt.cudaStreamEndCapture(stream), "cudaStreamEndCapture")
            e = check(rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
            us = elapsed_us(t0)
            rt.cudaGraphExecDestroy(e)
            rt.cudaGraphDestroy(g)
            return us

        return Entry(one, note=f"cuLaunchKernel x{count} in a global capture + cudaGraphInstantiate")

    def r_gpu_per_node(self, _arg=0) -> Entry:
        return Entry(gpu_round(self.env, self.rt.cudaGraphLaunch, (self._chain(1000), self.stream),
                               self.s_int, self.settings.gpu_launches, 1000))

    def close(self) -> None:
        rt = getattr(self, "rt", None)
        if rt is None:
            return
        rt.cudaStreamSynchronize(self.stream)
        for fn, h in reversed(self._owned):
            fn(h)
        self._owned.clear()
        self._chains.clear()
        rt.cudaFree(self.dptr)
        rt.cudaStreamDestroy(self.stream)

"""Peer: raw ``cuda.bindings`` (runtime API), written the way a user of the bindings would.

Kernel nodes use ``cudaGraphAddKernelNode`` with a ``cudaKernelNodeParams`` whose
``kernelParams`` is the bindings' ``(values, ctypes types)`` tuple (the "tuple path"),
or the address of a ``void*[]`` built once with ctypes (the "prepacked path").
The runtime bindings have no ``cudaLaunchKernel``, so eager launches and stream capture
use the driver's ``cuLaunchKernel`` (a ``cudaKernel_t`` is accepted as its function).
"""

from __future__ import annotations

import ctypes

from .common import CudaCallError, Peer, elapsed_us, median, now, ok
from .cudaenv import check
from .timing import gpu_time_per_launch, held_batch, held_launch, timed_repeats

_ARG_TYPES = (ctypes.c_void_p, ctypes.c_float, ctypes.c_int)


def _check_rc(res):
    if res[0]:
        raise CudaCallError(f"CUDA call failed: {getattr(res[0], 'name', res[0])}")


class RawPeer(Peer):
    key = "raw"
    label = "raw cuda.bindings"
    unsupported = {"mlp": "the demo MLP is measured for pycudagraph and PyTorch only"}

    def setup(self) -> None:
        from cuda.bindings import driver as dr
        from cuda.bindings import runtime as rt
        self.rt, self.dr = rt, dr
        self.stream = check(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking))
        self.s_int = int(self.stream)
        self.k_empty = self.env.kernels["empty"]
        self.k3 = self.env.kernels["empty3"]
        self.dptr = int(check(rt.cudaMalloc(4), "cudaMalloc"))
        self._owned = []  # (destroy function, handle)
        self._chains = {}
        self.func_kind, conv = self._probe_func()
        self.f_empty, self.f3 = conv(self.k_empty), conv(self.k3)

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
                p = self._params(conv(self.k3), ((self.dptr, 1.0, 3), _ARG_TYPES))
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
            prev = check(rt.cudaGraphAddKernelNode(g, deps, len(deps or ()), p), "cudaGraphAddKernelNode")
        e = check(rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
        self._owned.append((rt.cudaGraphExecDestroy, e))
        check(rt.cudaGraphUpload(e, self.stream), "cudaGraphUpload")
        for _ in range(3):
            check(rt.cudaGraphLaunch(e, self.stream), "cudaGraphLaunch")
        check(rt.cudaStreamSynchronize(self.stream))
        self._chains[k] = e
        return e

    def _build3(self, g, n: int, a: float):
        """Add n chained empty3 nodes to g (tuple path, args packed per node); return nodes."""
        add = self.rt.cudaGraphAddKernelNode
        p = self._params(self.f3)
        ptr, nodes, prev = self.dptr, [], None
        for _ in range(n):
            p.kernelParams = ((ptr, a, 3), _ARG_TYPES)
            res = add(g, None, 0, p) if prev is None else add(g, [prev], 1, p)
            if res[0]:
                _check_rc(res)
            prev = res[1]
            nodes.append(prev)
        return nodes

    # Figures ------------------------------------------------------------------------

    def held_launch(self, k: int):
        s = self.settings
        e = self._chain(k)
        return held_launch(self.env, self.rt.cudaGraphLaunch, (e, self.stream), self.s_int,
                           s.held_per_spin[k], s.held_spins[k], s.spin_ms, check_result=_check_rc)

    def exec_set_arg(self):
        rt, s = self.rt, self.settings
        g = check(rt.cudaGraphCreate(0))
        self._owned.append((rt.cudaGraphDestroy, g))
        nodes = self._build3(g, s.nodes, 1.0)
        e = check(rt.cudaGraphInstantiate(g, 0))
        self._owned.append((rt.cudaGraphExecDestroy, e))
        node = nodes[len(nodes) // 2]
        vals = [float(i % 997) for i in range(s.setarg_calls)]
        setp, ptr = rt.cudaGraphExecKernelNodeSetParams, self.dptr

        p = self._params(self.f3)

        def tuple_path():
            t0 = now()
            for v in vals:
                p.kernelParams = ((ptr, v, 3), _ARG_TYPES)
                res = setp(e, node, p)
                if res[0]:
                    _check_rc(res)
            return elapsed_us(t0) / len(vals)

        a_ptr, a_val, a_n = ctypes.c_void_p(ptr), ctypes.c_float(0.0), ctypes.c_int(3)
        arr = (ctypes.c_void_p * 3)(ctypes.addressof(a_ptr), ctypes.addressof(a_val),
                                    ctypes.addressof(a_n))
        q = self._params(self.f3, ctypes.addressof(arr))

        def prepacked_path():
            t0 = now()
            for v in vals:
                a_val.value = v
                res = setp(e, node, q)
                if res[0]:
                    _check_rc(res)
            return elapsed_us(t0) / len(vals)

        tuple_us = timed_repeats(tuple_path, s.repeats)
        pre_us = timed_repeats(prepacked_path, s.repeats)
        check(rt.cudaGraphLaunch(e, self.stream))  # the exec must still be valid
        check(rt.cudaStreamSynchronize(self.stream))
        where = f"node {len(nodes) // 2} of {len(nodes)}; func as {self.func_kind}"
        return {"exec_set_arg": ok(tuple_us, f"tuple path, {where}"),
                "exec_set_arg_alt": ok(pre_us, f"prepacked kernelParams, {where}")}

    def build(self):
        rt, s = self.rt, self.settings
        n = s.nodes
        res = {"build": [], "inst": [], "upd": []}
        for r in range(s.repeats + 1):
            g1 = check(rt.cudaGraphCreate(0))
            g2 = check(rt.cudaGraphCreate(0))
            e = None
            try:
                t0 = now()
                self._build3(g1, n, 1.0)
                b = elapsed_us(t0)
                t0 = now()
                e = check(rt.cudaGraphInstantiate(g1, 0), "cudaGraphInstantiate")
                i = elapsed_us(t0)
                self._build3(g2, n, 2.0)
                t0 = now()
                err, info = rt.cudaGraphExecUpdate(e, g2)
                u = elapsed_us(t0)
                if err or int(info.result) != 0:
                    raise CudaCallError(f"cudaGraphExecUpdate failed: {err} / {info.result}")
            finally:
                if e is not None:
                    rt.cudaGraphExecDestroy(e)
                rt.cudaGraphDestroy(g1)
                rt.cudaGraphDestroy(g2)
            if r:
                res["build"].append(b / n)
                res["inst"].append(i / n)
                res["upd"].append(u / n)
        return {"build_per_node": ok(median(res["build"]), "tuple kernelParams set per node"),
                "instantiate_per_node": ok(median(res["inst"]), "cudaGraphInstantiate"),
                "exec_update_per_node": ok(median(res["upd"]), "cudaGraphExecUpdate")}

    def recapture(self):
        rt, dr, s = self.rt, self.dr, self.settings
        f = dr.CUfunction(int(self.k_empty))
        launch, stream = dr.cuLaunchKernel, self.stream
        ds = dr.CUstream(self.s_int)
        mode = rt.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal

        def once():
            t0 = now()
            check(rt.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")
            g = None
            try:
                for _ in range(1000):
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

        return ok(timed_repeats(once, s.repeats), "cuLaunchKernel x1000 in a global capture")

    def gpu_per_node(self):
        s = self.settings
        e = self._chain(1000)
        us = gpu_time_per_launch(self.env, self.rt.cudaGraphLaunch, (e, self.stream), self.s_int,
                                 s.gpu_launches, s.gpu_repeats, check_result=_check_rc)
        return ok(us / 1000.0, f"events around {s.gpu_launches} launches")

    def eager_launch(self):
        s, dr = self.settings, self.dr
        f = dr.CUfunction(int(self.k_empty))
        args = (f, 1, 1, 1, 1, 1, 1, 0, dr.CUstream(self.s_int), 0, 0)
        return held_batch(self.env, dr.cuLaunchKernel, args, self.s_int, s.eager_batch, s.repeats,
                          s.eager_spin_ms, check_result=_check_rc)

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

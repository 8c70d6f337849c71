"""Profile 2: per-node add cost and FIRST instantiate / update cost by how a kernel node names
its kernel and by API (fresh graphs, gc off). Run from the repository root on a GPU."""
import ctypes, gc, statistics, struct, sys, time
import pycudagraph as pcg
from cuda.bindings import runtime as rt
sys.path.insert(0, ".")
from benchmarks.cudaenv import c_function

N = 1000
lib = ctypes.CDLL("libcuda.so.1")
VP = ctypes.c_void_p
fn = c_function
cuGraphCreate = fn(lib, "cuGraphCreate", [VP, ctypes.c_uint])
cuGraphDestroy = fn(lib, "cuGraphDestroy", [VP])
cuAdd = fn(lib, "cuGraphAddKernelNode_v2", [VP, VP, VP, ctypes.c_size_t, VP])
cuInst = fn(lib, "cuGraphInstantiateWithFlags", [VP, VP, ctypes.c_ulonglong])
cuExecDestroy = fn(lib, "cuGraphExecDestroy", [VP])
cuUpdate = fn(lib, "cuGraphExecUpdate_v2", [VP, VP, VP])
cuCtxGetCurrent = fn(lib, "cuCtxGetCurrent", [VP])
def ok(rc, what):
    if rc: raise RuntimeError(f"{what} -> {rc}")
def med(xs): return statistics.median(xs)

mod = pcg.Module.from_file("kernels/helpers.cu")
k3 = mod["empty3"]; s = pcg.Stream(); buf = pcg.DeviceBuffer(4)
k3.launch(1, 1, (buf, 1.0, 3), stream=s); s.synchronize()
func, kern = k3._func_int, int(k3.handle)
ctx = VP(); ok(cuCtxGetCurrent(ctypes.byref(ctx)), "ctx"); ctx = ctx.value
vals = (ctypes.c_uint64(buf.ptr), ctypes.c_float(1.0), ctypes.c_int(3))
arr = (VP * 3)(*[ctypes.addressof(v) for v in vals])
# the runtime's cudaGraphAddKernelNode, from the libcudart cuda.bindings uses
import cuda.bindings.runtime as _r
rtlib = None
for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
    try:
        rtlib = ctypes.CDLL(name); break
    except OSError:
        pass
rtAdd = fn(rtlib, "cudaGraphAddKernelNode", [VP, VP, VP, ctypes.c_size_t, VP]) if rtlib else None

def params(variant):
    if variant.startswith("rt"):
        f = func if variant == "rt func" else kern
        # cudaKernelNodeParams: func, gridDim, blockDim, sharedMemBytes, kernelParams, extra
        return ctypes.create_string_buffer(struct.pack("<Q3I3II4xQQ", f, 1, 1, 1, 1, 1, 1, 0, ctypes.addressof(arr), 0))
    f, k, c = {"drv func": (func, 0, 0), "drv func+ctx": (func, 0, ctx), "drv kern": (0, kern, 0),
               "drv kern+ctx": (0, kern, ctx)}[variant]
    return ctypes.create_string_buffer(struct.pack("<Q7I4xQQQQ", f, 1, 1, 1, 1, 1, 1, 0, ctypes.addressof(arr), 0, k, c))

def build(variant):
    g = VP(); ok(cuGraphCreate(ctypes.byref(g), 0), "create")
    p = params(variant); add = rtAdd if variant.startswith("rt") else cuAdd
    prev = VP(); t0 = time.perf_counter()
    for i in range(N):
        node = VP(); ok(add(ctypes.byref(node), g, ctypes.byref(prev) if i else None, 1 if i else 0, p), variant); prev = node
    return g, (time.perf_counter() - t0) * 1e6 / N

def inst(g, api):
    if api == "cuWithFlags":
        e = VP(); ok(cuInst(ctypes.byref(e), g, 0), api); return e.value
    if api == "rtWithParams":
        p = rt.cudaGraphInstantiateParams(); p.flags = 0
        err, e = rt.cudaGraphInstantiateWithParams(rt.cudaGraph_t(g.value), p); ok(int(err), api); return int(e)
    err, e = rt.cudaGraphInstantiate(rt.cudaGraph_t(g.value), 0); ok(int(err), api); return int(e)

gc.disable()
print("== per node (us): add (chain, prepacked, ctypes) / FIRST instantiate of that fresh graph / update ==")
for variant in ("drv func", "drv func+ctx", "drv kern", "drv kern+ctx", "rt func", "rt kern"):
    for api in ("cuWithFlags", "rtWithParams", "rtInstantiate"):
        try:
            ta, ti, tu = [], [], []
            for r in range(6):
                g1, a = build(variant)
                t0 = time.perf_counter(); e = inst(g1, api); t1 = time.perf_counter()
                g2, _ = build(variant)
                info = (ctypes.c_byte * 32)()
                t2 = time.perf_counter(); ok(cuUpdate(VP(e), g2, info), "update"); t3 = time.perf_counter()
                cuExecDestroy(VP(e)); cuGraphDestroy(g1); cuGraphDestroy(g2)
                if r:
                    ta.append(a); ti.append((t1 - t0) * 1e6 / N); tu.append((t3 - t2) * 1e6 / N)
            print(f"{variant:13s} {api:13s} add {med(ta):.3f}  inst {med(ti):.3f}  update {med(tu):.3f}", flush=True)
        except Exception as exc:
            print(f"{variant:13s} {api:13s} failed: {exc}", flush=True)

print("\n== pycudagraph's own, fresh graphs (gc off) ==")
def pcg_build(a):
    g = pcg.Graph(); prev = None; t0 = time.perf_counter()
    for _ in range(N):
        prev = g.add_kernel(k3, 1, 1, (buf.ptr, a, 3), deps=(prev,) if prev is not None else ())
    return g, (time.perf_counter() - t0) * 1e6 / N
for api in ("pcg", "cuWithFlags", "rtWithParams"):
    ta, ti = [], []
    for r in range(6):
        g1, a = pcg_build(1.0)
        t0 = time.perf_counter()
        if api == "pcg":
            e = g1.instantiate(); t1 = time.perf_counter(); e.close()
        else:
            eh = inst(VP(g1._h), api); t1 = time.perf_counter(); cuExecDestroy(VP(eh))
        if r: ta.append(a); ti.append((t1 - t0) * 1e6 / N)
        del g1
    print(f"pcg graph, {api:13s} add {med(ta):.3f}  inst {med(ti):.3f}", flush=True)

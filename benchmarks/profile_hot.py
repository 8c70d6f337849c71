"""Profile: why instantiate / whole-graph update cost what they cost (driver-level variants),
and where pycudagraph's Python time goes. Run from the repository root on a GPU."""
import cProfile, ctypes, io, pstats, statistics, struct, sys, time, traceback
import numpy as np
import pycudagraph as pcg
from pycudagraph._cuda import fast
sys.path.insert(0, ".")
from benchmarks.cudaenv import c_function

N = 1000
lib = ctypes.CDLL("libcuda.so.1")
VP = ctypes.c_void_p
def fn(name, argtypes): return c_function(lib, name, argtypes)
cuGraphCreate = fn("cuGraphCreate", [VP, ctypes.c_uint])
cuGraphDestroy = fn("cuGraphDestroy", [VP])
cuGraphAdd = fn("cuGraphAddKernelNode_v2", [VP, VP, VP, ctypes.c_size_t, VP])
cuInst = fn("cuGraphInstantiateWithFlags", [VP, VP, ctypes.c_ulonglong])
cuExecDestroy = fn("cuGraphExecDestroy", [VP])
cuUpdate = fn("cuGraphExecUpdate_v2", [VP, VP, VP])
cuCtxGetCurrent = fn("cuCtxGetCurrent", [VP])
cuGetParams = fn("cuGraphKernelNodeGetParams_v2", [VP, VP])
cuGraphGetNodes = fn("cuGraphGetNodes", [VP, VP, VP])

def ok(rc, what):
    if rc: raise RuntimeError(f"{what} -> {rc}")

mod = pcg.Module.from_file("kernels/helpers.cu")
k3 = mod["empty3"]
s = pcg.Stream()
buf = pcg.DeviceBuffer(4)
k3.launch(1, 1, (buf, 1.0, 3), stream=s); s.synchronize()
func = k3.last_function[0]  # the CUfunction the launch above used
kern = int(k3.handle)
ctx = VP(); ok(cuCtxGetCurrent(ctypes.byref(ctx)), "ctx"); ctx = ctx.value or 0
print(f"func=0x{func:x} kern=0x{kern:x} ctx=0x{ctx:x}", flush=True)

def build(variant, a):
    g = VP(); ok(cuGraphCreate(ctypes.byref(g), 0), "create")
    vals = (ctypes.c_uint64(buf.ptr), ctypes.c_float(a), ctypes.c_int(3))
    arr = (VP * 3)(*[ctypes.addressof(v) for v in vals])
    f, k, c = {"func": (func, 0, 0), "kern": (0, kern, 0), "kern+ctx": (0, kern, ctx),
               "kern-as-func": (kern, 0, 0), "func+ctx": (func, 0, ctx)}[variant]
    p = ctypes.create_string_buffer(struct.pack("<Q7I4xQQQQ", f, 1, 1, 1, 1, 1, 1, 0,
                                                ctypes.addressof(arr), 0, k, c))
    prev = VP()
    for i in range(N):
        node = VP()
        ok(cuGraphAdd(ctypes.byref(node), g, ctypes.byref(prev) if i else None, 1 if i else 0, p), "add")
        prev = node
    return g

def med(xs): return statistics.median(xs)

print("\n== driver-level instantiate / update per node (us), 1000-node empty3 chain, median of 7 ==")
for variant in ("func", "kern", "kern+ctx", "func+ctx"):
    try:
        ti, tu = [], []
        for r in range(8):
            g1 = build(variant, 1.0)
            e = VP()
            t0 = time.perf_counter(); ok(cuInst(ctypes.byref(e), g1, 0), "inst"); t1 = time.perf_counter()
            g2 = build(variant, 2.0)
            info = (ctypes.c_byte * 32)()
            t2 = time.perf_counter(); ok(cuUpdate(e, g2, info), "update"); t3 = time.perf_counter()
            if r:
                ti.append((t1 - t0) * 1e6 / N); tu.append((t3 - t2) * 1e6 / N)
            cuExecDestroy(e); cuGraphDestroy(g1); cuGraphDestroy(g2)
        print(f"{variant:14s} instantiate {med(ti):.3f}  update {med(tu):.3f}", flush=True)
    except Exception:
        traceback.print_exc()


from cuda.bindings import runtime as rt
cuInstP = fn("cuGraphInstantiateWithFlags", [VP, VP, ctypes.c_ulonglong])

def pcg_build(a, n=N):
    g = pcg.Graph(); prev = None
    for _ in range(n):
        prev = g.add_kernel(k3, 1, 1, (buf.ptr, a, 3), deps=(prev,) if prev is not None else ())
    return g

def inst_apis(graph_h, label):
    res = {"rt.WithParams": [], "cuWithFlags": [], "rt.Instantiate": []}
    for r in range(6):
        for api in res:
            t0 = time.perf_counter()
            if api == "rt.WithParams":
                p = rt.cudaGraphInstantiateParams(); p.flags = 0
                err, e = rt.cudaGraphInstantiateWithParams(graph_h, p); ok(int(err), api); eh = int(e)
            elif api == "cuWithFlags":
                e = VP(); ok(cuInstP(ctypes.byref(e), VP(int(graph_h)), 0), api); eh = e.value
            else:
                err, e = rt.cudaGraphInstantiate(graph_h, 0); ok(int(err), api); eh = int(e)
            dt = (time.perf_counter() - t0) * 1e6 / N
            cuExecDestroy(VP(eh))
            if r: res[api].append(dt)
    print(label, "  ".join(f"{k} {med(v):.3f}" for k, v in res.items()), flush=True)

print("\n== instantiate per node by API, same graph (us) ==")
try:
    gp = pcg_build(1.0)
    inst_apis(gp._raw, "pcg-built graph :")
    graw = build("func", 1.0)
    inst_apis(rt.cudaGraph_t(graw.value), "raw-built graph :")
    try:
        import cuda.core as cc
        from cuda.core.graph import GraphDefinition
        dev = cc.Device(0); dev.set_current()
        prog = cc.Program(open("kernels/helpers.cu").read(), "c++", cc.ProgramOptions(name="helpers.cu"))
        ck3 = prog.compile("cubin").get_kernel("empty3")
        cfg = cc.LaunchConfig(grid=1, block=1)
        gdef = GraphDefinition(); node = gdef.launch(cfg, ck3, buf.ptr, np.float32(1.0), np.int32(3))
        for _ in range(N - 1): node = node.launch(cfg, ck3, buf.ptr, np.float32(1.0), np.int32(3))
        inst_apis(rt.cudaGraph_t(int(gdef.handle)), "cuda.core graph :")
        xs = []
        for r in range(6):
            t0 = time.perf_counter(); ex = gdef.instantiate(); xs.append((time.perf_counter() - t0) * 1e6 / N); ex.close() if hasattr(ex, "close") else None
        print("cuda.core gdef.instantiate()", med(xs[1:]))
    except Exception:
        traceback.print_exc()
except Exception:
    traceback.print_exc()

print(f"\n== pycudagraph ({fast.native_status()}): instantiate / update per node ==")
ti, tu = [], []
for r in range(6):
    g1 = pcg_build(1.0)
    t0 = time.perf_counter(); e = g1.instantiate(); t1 = time.perf_counter()
    g2 = pcg_build(2.0)
    t2 = time.perf_counter(); e.update(g2); t3 = time.perf_counter()
    if r: ti.append((t1 - t0) * 1e6 / N); tu.append((t3 - t2) * 1e6 / N)
    e.close()
print(f"pcg instantiate {med(ti):.3f}  update {med(tu):.3f}")
g1 = pcg_build(1.0); g2 = pcg_build(2.0)
pr = cProfile.Profile(); pr.enable(); e = g1.instantiate(); e.update(g2); pr.disable()
out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(8); print(out.getvalue()[:2000])

def per_call(f, n=2000, reps=6):
    xs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n): f()
        xs.append((time.perf_counter() - t0) * 1e6 / n)
    return med(xs[1:])

print("\n== build per node, 1000-node chain (us) ==")
def chain_ctypes():
    g = VP(); ok(cuGraphCreate(ctypes.byref(g), 0), "create")
    pk = pcg.Graph().add_kernel(k3, 1, 1, (buf.ptr, 1.0, 3))._pack  # a prepacked params struct
    prev = VP(); t0 = time.perf_counter()
    for i in range(N):
        node = VP(); ok(cuGraphAdd(ctypes.byref(node), g, ctypes.byref(prev) if i else None, 1 if i else 0, pk.address), "add"); prev = node
    dt = (time.perf_counter() - t0) * 1e6 / N; cuGraphDestroy(g); return dt
def chain_fast():
    """fast.add_kernel alone (compiled route when built): no node objects, no dependencies."""
    g = pcg.Graph(); hot, gh = k3._hot, g.table.h
    t0 = time.perf_counter()
    for _ in range(N):
        fast.add_kernel(hot, 1, 1, (buf.ptr, 1.0, 3), 0, gh, (), {}, k3, g, None)
    return (time.perf_counter() - t0) * 1e6 / N
def chain_pcg():
    g = pcg.Graph(); prev = None; add = g.add_kernel; t0 = time.perf_counter()
    for _ in range(N):
        prev = add(k3, 1, 1, (buf.ptr, 1.0, 3), deps=(prev,) if prev is not None else ())
    return (time.perf_counter() - t0) * 1e6 / N
for name, f in (("ctypes driver call, prepacked", chain_ctypes), ("fast.add_kernel direct", chain_fast), ("g.add_kernel", chain_pcg)):
    try:
        print(f"{name:32s} {med([f() for _ in range(7)][1:]):.3f}", flush=True)
    except Exception:
        traceback.print_exc()

print("\n== one-argument exec update (us) ==")
for n in (1, N):
    gg = pcg_build(1.0, n); nodes = list(gg.table.nodes.values()); node = nodes[len(nodes) // 2]
    exe = gg.instantiate()
    exe.set_arg(node, 1, 2.0)
    rec = exe.exec_node(node)
    pack, h = rec.args, rec.node_h
    f = fast._f.exec_set; eh, addr = exe._h, pack.address
    vals = [float(i % 997) for i in range(2000)]
    print(f"graph of {n}: ctypes prepacked {per_call(lambda: f(eh, h, addr)):.3f}", end="")
    fs, hot, refs = fast.set_arg, pack.layout.hot, pack.refs
    print(f"  fast.set_arg direct {per_call(lambda: fs(eh, h, hot, addr, refs, 1, 2.5, pack, exe, node)):.3f}",
          end="")
    sa = exe.set_arg
    print(f"  exe.set_arg {per_call(lambda: sa(node, 1, 2.5)):.3f}", flush=True)

print("\n== launch / eager (us) ==")
ke = mod["empty"]
g = pcg.Graph(); g.add_kernel(ke, 1, 1, ()); exe = g.instantiate(); exe.launch(s); s.synchronize()
print("exe.launch (1 node)      ", per_call(lambda: exe.launch(s), 300)); s.synchronize()
flaunch, eh, sh = fast.launch_graph, exe._h, s.ptr
print("fast.launch_graph        ", per_call(lambda: flaunch(eh, sh, exe), 300)); s.synchronize()
fl = fast._f.launch
print("ctypes cuGraphLaunch     ", per_call(lambda: fl(eh, sh), 300)); s.synchronize()
print("eager launch empty       ", per_call(lambda: ke.launch(1, 1, (), stream=s), 300)); s.synchronize()

print("\n== does each hot call take the compiled path? (calls made by the ctypes route counted) ==")
counts = {"exe.launch": 0, "kernel.launch": 0, "add_kernel": 0}
def counting(name, fn):
    def wrapped(*a, **k):
        counts[name] += 1
        return fn(*a, **k)
    return wrapped
orig = (fast._f.launch, fast._f.launch_kernel, fast._f.add_kernel)
fast._f.launch = counting("exe.launch", orig[0])
fast._f.launch_kernel = counting("kernel.launch", orig[1])
fast._f.add_kernel = counting("add_kernel", orig[2])
try:
    for _ in range(1000):
        exe.launch(s)
        ke.launch(1, 1, (), stream=s)
    s.synchronize()
    chain_pcg()
    print(f"hot path {fast.native_status()}; of 1000 calls each, fell back to ctypes: {counts}")
finally:
    fast._f.launch, fast._f.launch_kernel, fast._f.add_kernel = orig

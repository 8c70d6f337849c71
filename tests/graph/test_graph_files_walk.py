"""Graph files on the CPU: the save walk and the load rebuild with stand-in graphs.

A stand-in graph (every node type, nested bodies, a child graph, edge ports, a kernel of a
real NVRTC module and a "captured" one) is walked into a manifest by the code ``Graph.save``
runs; the manifest must pass the format's own check; the loader then rebuilds it into a
recording graph with other buffers bound, and every address must come back as the same
offset in the new buffer, every handle as the new handle. The stand-in nodes write their
records with the code of the node class of their type (``to_record``); the CUDA calls
the walk makes (the device's architecture, a memcpy node's parameters, "is this device
memory") are stood in for."""

import struct
import types
import warnings

import numpy as np
import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.compile.args import Layout
from pycudagraph.compile.kernel import Kernel
from pycudagraph.compile.reconcile import check_declared
from pycudagraph.files import load as file_load
from pycudagraph.files import save as file_save
from pycudagraph.files import archive as files
from pycudagraph.files.slots import Address, DeviceView, HeldBytes
from pycudagraph.nodes import kernel_file, memory_file
from pycudagraph.nodes.captured_kernel import CapturedKernelNode
from pycudagraph.nodes.registry import REGISTRY
from pycudagraph.nodes.conditional import ConditionalHandle, ConditionalParams
from pycudagraph.nodes.memory_nodes import MemsetParams

SRC = r'''
struct Pair { float* p; int n; };
extern "C" __global__ void step(float* y, const float* x, float a, int n,
                                cudaGraphConditionalHandle h, Pair pr, bool b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i] + pr.p[0];
    if (i == 0 && b) cudaGraphSetConditional(h, 0);
}
'''


@pytest.fixture(scope="module")
def kernel():
    mod = pcg.Program(SRC, name="walk.cu").compile("sm_90")
    k = Kernel(mod, "step", mod["step"].params)
    params = check_declared("step", k.params, mod.entries["step"])
    k._layout = Layout("step", params)  # what Kernel.layout finds on a GPU
    return k


class Dev:
    """Device memory stand-in (``__cuda_array_interface__``): no CUDA call to locate it."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (nbytes,),
                                         "typestr": "|u1", "version": 3}


class Ev:
    def __init__(self, h):
        self.handle = rt.cudaEvent_t(h)


def _real(t):
    """The node class that writes records of type ``t``."""
    return next(c for c in REGISTRY.values() if t in getattr(c, "file_types", ()))


class N:
    """A node stand-in: its type, what Graph.save reads, and describe(); its record is
    written by its type's node class."""

    def __init__(self, type, **kw):
        self.type = type
        self.__dict__.update(kw)

    @property
    def file_types(self):
        return _real(self.type).file_types

    def file_declare(self, out):
        return _real(self.type).file_declare(self, out)

    def to_record(self, out, where, nid):
        return _real(self.type).to_record(self, out, where, nid)

    def subgraphs(self):
        return (self.child,) if self.type == "child_graph" else getattr(self, "bodies", ())

    def describe(self):
        return self.type

    def get_attribute(self, name):
        if name in getattr(self, "attrs", {}):
            return self.attrs[name]
        raise pcg.NotSupportedError(name, "99.0", "a stand-in")


class G:
    def __init__(self, h):
        self.handle, self.nodes, self.edge_data = h, [], {}
        self.table = self

    def walk(self, depth=0, owner=None):
        for n in self.nodes:
            yield n, depth, owner
            for g in n.subgraphs():
                yield from g.walk(depth + 1, n)

    def add(self, node, deps=(), port="default"):
        self.nodes.append(node)
        for d in deps:
            self.edge_data[(d, node)] = port
        return node


def _kernel_node(k, values, grid=(2, 1, 1), block=(128, 1, 1), attrs=None):
    data = [struct.pack("<" + p.fmt, v) for p, v in zip(k.layout.params, values)]
    offsets = [0, 8, 16, 20, 24, 32, 48]
    return N("kernel", kernel=k, function=0x5000, arg_bytes=tuple(zip(offsets, data)),
             params=types.SimpleNamespace(grid=grid, block=block, shared_mem=0),
             attrs=attrs or {})


def _memcpy_params(dst, src, nbytes, height=1, depth=1, pitch=None):
    p = rt.cudaMemcpy3DParms()
    p.dstPtr = rt.make_cudaPitchedPtr(dst, pitch or nbytes, nbytes, height)
    p.srcPtr = rt.make_cudaPitchedPtr(src, pitch or nbytes, nbytes, height)
    p.extent = rt.make_cudaExtent(nbytes, height, depth)
    return p


X, Y, W = 0x7F00_0000_0000, 0x7F00_0010_0000, 0x7F00_0020_0000  # saved buffers
ALLOC, STRAY = 0x7E00_0000_0000, 0x7D00_0000_0000


@pytest.fixture
def stand_ins(monkeypatch, kernel):
    """The stand-in graph, its slots, and the CUDA calls the walk makes."""
    host = np.arange(256, dtype=np.uint8)
    slots = {"x": Dev(X, 1024), "y": Dev(Y, 1024), "w": Dev(W, 4096), "h": host, "ev": Ev(0xE1)}
    root, body, child = G(1), G(2), G(3)
    h = ConditionalHandle(root, 0xC0DE, default=1)
    marks = []
    pcg.register_host_fn("walk.mark", marks.append)
    up = root.add(N("memcpy", handle="up"))
    zero = root.add(N("memset", params=MemsetParams(Y + 64, 0, 4, 16, 1, 0)), [up])
    k1 = root.add(_kernel_node(kernel, (Y, X + 8, 2.5, 200, 0xC0DE, struct.pack("<QI4x", W + 16, 3), True),
                               attrs={"priority": -1, "cluster": (1, 1, 1)}), [zero])
    loop = root.add(N("conditional", kind="while", condition=h, bodies=(body,),
                      params=ConditionalParams("while", h, (body,))), [k1])
    body.add(_kernel_node(kernel, (X, Y, -1.0, 1, 0xC0DE, bytes(16), False)))
    alloc = root.add(N("mem_alloc", params={"ptr": ALLOC, "nbytes": 512}), [up])
    k2 = root.add(_kernel_node(kernel, (ALLOC + 128, 0, 0.5, 7, 0xC0DE, bytes(16), False)), [alloc])
    root.add(N("kernel", kernel=None, function=0x6000, mangled_name="_Z3libPf",
               arg_bytes=((0, struct.pack("<Q", W + 1024)), (8, struct.pack("<QQ", 5, X)),
                          (24, struct.pack("<Q", 0xC0DE))),
               params=types.SimpleNamespace(grid=(1, 1, 1), block=(32, 1, 1), shared_mem=64)),
             [k2], "default")
    root.add(N("mem_free", params={"ptr": ALLOC}), [k2])
    child.add(N("empty"))
    ch = root.add(N("child_graph", child=child), [loop])
    hn = root.add(N("host", params={"fn": marks.append, "args": ("done", (1, 2), None)}), [ch])
    root.add(N("event_record", event=slots["ev"]), [hn])
    root.add(N("memcpy", handle="box"), [up])
    root.edge_data[(k1, k2)] = "programmatic"
    copies = {"up": _memcpy_params(X, host.ctypes.data, 256),
              "box": _memcpy_params(W + 256, Y, 16, height=4, depth=2, pitch=64)}
    monkeypatch.setattr(memory_file, "call", lambda fn, node_handle: copies[node_handle])
    monkeypatch.setattr(file_save, "device_arch", lambda: "sm_90")
    monkeypatch.setattr(file_save, "is_device_address", lambda v: v == STRAY)
    return types.SimpleNamespace(root=root, slots=slots, kernel=kernel, handle=h, marks=marks,
                                 k1=k1, body=body)


def test_the_walk_writes_a_manifest_the_format_accepts(stand_ins):
    saver = file_save._Saver(stand_ins.slots)
    m = saver.run(stand_ins.root)
    gf = files.decode(files.encode(m, saver.sections))  # the schema check passes
    assert gf.manifest == m
    assert [t for t, _ in saver.sections] == ["CUBN", "PTX_"]
    assert m["slots"] == {"x": {"kind": "device", "nbytes": 1024}, "y": {"kind": "device", "nbytes": 1024},
                          "w": {"kind": "device", "nbytes": 4096}, "h": {"kind": "host", "nbytes": 256},
                          "ev": {"kind": "event", "nbytes": 0}}
    nodes = m["root"]["nodes"]
    assert [n["type"] for n in nodes][:3] == ["memcpy", "memset", "kernel"]
    k1 = nodes[2]
    assert k1["args"][0]["relocs"] == [[0, {"slot": "y", "offset": 0}]]
    assert k1["args"][1]["relocs"] == [[0, {"slot": "x", "offset": 8}]]
    assert k1["args"][4]["relocs"] == [[0, {"handle": 0}]]
    assert k1["args"][5]["relocs"] == [[0, {"slot": "w", "offset": 16}]]  # inside the struct
    assert k1["attributes"] == {"priority": -1}  # cluster (1, 1, 1) is the default
    assert m["root"]["handles"] == [{"id": 0, "default": 1}]
    kinds = {n["type"] for n in nodes}
    assert kinds >= {"conditional", "mem_alloc", "mem_free", "child_graph", "host",
                     "event_record", "memcpy_3d"}
    lib = next(n for n in nodes if n["type"] == "kernel" and m["kernels"][n["kernel"]]["module"] is None)
    assert [a["relocs"] for a in lib["args"]] == [[[0, {"slot": "w", "offset": 1024}]],
                                                   [[8, {"slot": "x", "offset": 0}]],
                                                   [[0, {"handle": 0}]]]
    assert m["kernels"][0]["signature"].startswith("float* y, float* x, float a, int n")
    assert ["programmatic"] == [p for _, _, p in m["root"]["edges"] if p != "default"]
    host = next(n for n in nodes if n["type"] == "host")
    assert host["fn"] == "walk.mark" and host["args"] == ["done", [1, 2], None]
    box = next(n for n in nodes if n["type"] == "memcpy_3d")
    assert (box["dst"], box["width"], box["height"], box["depth"], box["dst_pitch"]) == (
        {"slot": "w", "offset": 256}, 16, 4, 2, 64)


@pytest.mark.parametrize("change, match", [
    ("stray_pointer", r"node 2 \(kernel\): argument 1 'x' holds 0x7d0000000000, which belongs to no slot"),
    ("stray_in_struct", r"argument 5 'pr' holds device address 0x7d0000000000 \(at byte 0\)"),
    ("no_event_slot", r"node \d+ \(event_record\): its event is in no slot"),
    ("unregistered", r"runs '[\w.<>]*unregistered', which is not registered"),
    ("bad_host_arg", r"host argument 0 \(object\) is not a JSON value"),
    ("exec_handle", r"cudaGraphExec_t, which a graph file cannot hold"),
])
def test_the_walk_refuses_what_it_cannot_save(stand_ins, kernel, change, match):
    nodes, slots = stand_ins.root.nodes, dict(stand_ins.slots)
    k1 = stand_ins.k1
    data = list(k1.arg_bytes)
    if change == "stray_pointer":
        data[1] = (8, struct.pack("<Q", STRAY))
    elif change == "stray_in_struct":
        data[5] = (32, struct.pack("<QI4x", STRAY, 1))
    elif change == "no_event_slot":
        del slots["ev"]
    elif change == "unregistered":
        def unregistered():
            pass
        next(n for n in nodes if n.type == "host").params = {"fn": unregistered, "args": ()}
    elif change == "bad_host_arg":
        next(n for n in nodes if n.type == "host").params = {"fn": stand_ins.marks.append,
                                                             "args": (object(),)}
    elif change == "exec_handle":
        k = Kernel(kernel.module, "step", kernel.params)
        params = list(kernel.layout.params)
        params[4] = params[4].__class__(4, "h", "cudaGraphExec_t", "handle", 8, 8, "Q")
        k._layout = Layout("step", tuple(params))
        k1.kernel = k
    k1.arg_bytes = tuple(data)
    with pytest.raises(pcg.GraphFileError, match=match):
        file_save._Saver(slots).run(stand_ins.root)


def test_a_value_named_a_number_is_saved_as_one_inside_a_struct_only(stand_ins):
    """A by-value struct's left-over bytes that happen to lie in device memory (graphed's
    save names them after a second capture): a number in the file, no relocation; the
    same value in a pointer parameter still refuses."""
    k1 = stand_ins.k1
    data = list(k1.arg_bytes)
    data[5] = (32, struct.pack("<QI4x", STRAY, 1))
    k1.arg_bytes = tuple(data)
    m = file_save._Saver(stand_ins.slots, frozenset({STRAY})).run(stand_ins.root)
    rec = m["root"]["nodes"][2]["args"][5]
    assert rec["relocs"] == [] and bytes.fromhex(rec["hex"])[:8] == struct.pack("<Q", STRAY)
    data[1] = (8, struct.pack("<Q", STRAY))
    k1.arg_bytes = tuple(data)
    with pytest.raises(pcg.GraphFileError, match="argument 1 'x' holds 0x7d0000000000"):
        file_save._Saver(stand_ins.slots, frozenset({STRAY})).run(stand_ins.root)


def test_save_writes_the_file_and_warns_about_resolvers(stand_ins, tmp_path):
    path = tmp_path / "walk.pcgraph"
    with pytest.warns(pcg.errors.GraphFileWarning, match=r"kernel node\(s\) 7 run kernels pycudagraph "
                                                         r"did not compile \(_Z3libPf\)"):
        file_save.save_graph(stand_ins.root, path, stand_ins.slots)
    assert files.read_file(path).manifest["format"] == "pycudagraph.graph"


class Rec:
    """A recording graph: each builder call is kept as (name, args, kwargs)."""

    made = []

    def __init__(self):
        self.calls, self.handles, self.table = [], [], None
        Rec.made.append(self)

    def conditional_handle(self, default=None):
        h = ConditionalHandle(self, 0xD000 + len(self.handles), default)
        self.handles.append(h)
        return h

    def __getattr__(self, name):
        if not name.startswith("add_"):
            raise AttributeError(name)

        def add(*args, **kw):
            node = types.SimpleNamespace(name=name, args=args, kw=kw, ptr=0x7C00_0000_0000)
            if name in ("add_while", "add_if", "add_if_else", "add_switch"):
                node.bodies = (Rec(),)
            self.calls.append(node)
            return node
        return add


def test_load_rebuilds_every_address_in_the_new_buffers(stand_ins, monkeypatch):
    saver = file_save._Saver(stand_ins.slots)
    gf = files.decode(files.encode(saver.run(stand_ins.root), saver.sections))
    X2, Y2, W2 = 0x7B00_0000_0000, 0x7B00_0001_0000, 0x7B00_0002_0000
    host2 = np.zeros(512, np.uint8)
    bind = {"x": Dev(X2, 1024), "y": Dev(Y2, 2048), "w": Dev(W2, 4096), "h": host2, "ev": Ev(0xE2)}
    raw_adds = []

    class FakeKernelNode:
        @staticmethod
        def build_function(table, deps, func, grid, block, smem, args, keep):
            raw_adds.append((func, grid, block, smem, args, keep))
            return types.SimpleNamespace(set_attribute=None)

    monkeypatch.setattr(CapturedKernelNode, "build_function", FakeKernelNode.build_function)
    monkeypatch.setattr(file_load, "Graph", Rec)
    loader = file_load._Loader(gf, bind, lambda name: 0x6000, "walk.pcgraph")
    loader.check_needs()
    loader.use([stand_ins.kernel if e["module"] is not None else 0x6000
                for e in gf.manifest["kernels"]])
    root = Rec()
    from pycudagraph import _lifetime
    root.table = types.SimpleNamespace(ledger=_lifetime.Ledger())
    loader.fill(root, gf.manifest["root"])
    calls = {c.name: c for c in reversed(root.calls)}  # the first of each kind
    h2 = root.handles[0]
    assert h2.default == 1
    k1 = next(c for c in root.calls if c.name == "add_kernel")
    args = k1.args[3]
    # a slot pointer is a plain int (the compiled add packs it with no Python call); the
    # graph's ledger keeps the bound buffer behind it, once, for the graph as a whole
    assert type(args[0]) is int and args[0] == Y2
    assert [v for v in root.table.ledger.extra if v is bind["y"]] == [bind["y"]]
    assert any(v is bind["y"] for v in _lifetime.contents(root.table.ledger.extra))
    assert int(args[1]) == X2 + 8 and args[2] == 2.5 and args[3] == 200
    assert args[4] is h2
    assert isinstance(args[5], HeldBytes) and struct.unpack_from("<Q", args[5])[0] == W2 + 16
    assert args[5].keep == [bind["w"]] and args[6] is True
    assert k1.kw == {"priority": -1}
    memset = calls["add_memset"]
    assert isinstance(memset.args[0], DeviceView) and memset.args[0].ptr == Y2 + 64
    assert memset.args[0].nbytes == 2048 - 64 and memset.args[1:5] == (0, 16, 4, 1)
    up = calls["add_memcpy"]
    assert up.args[0] is bind["x"] and up.args[1] is host2 and up.args[2] == 256
    box = calls["add_memcpy_3d"]
    assert box.args[0].ptr == W2 + 256 and box.args[1] is bind["y"] and box.args[2:5] == (16, 4, 2)
    assert box.kw["dst_pitch"] == 64 and box.kw["dst_pos"] == (0, 0, 0)
    func, grid, block, smem, raw, keep = raw_adds[0]
    assert (func, grid, block, smem) == (0x6000, (1, 1, 1), (32, 1, 1), 64)
    assert raw == [struct.pack("<Q", W2 + 1024), struct.pack("<QQ", 5, X2), struct.pack("<Q", h2.value)]
    assert keep == [bind["w"], bind["x"], h2]
    loop = calls["add_while"]
    assert loop.args[0] is h2
    inner = loop.bodies[0].calls[0]
    assert int(inner.args[3][0]) == X2 and inner.args[3][2] == -1.0
    k2 = [c for c in root.calls if c.name == "add_kernel"][1]
    assert k2.args[3][0] == 0x7C00_0000_0000 + 128 and k2.args[3][1] == 0  # graph memory
    assert calls["add_mem_free"].args[0] == 0x7C00_0000_0000
    assert calls["add_host"].args[:2] == (stand_ins.marks.append, ("done", [1, 2], None))
    assert calls["add_event_record"].args[0] is bind["ev"]
    assert [c.name for c in Rec.made[-1].calls] == ["add_empty"]  # the child graph
    assert calls["add_dependency"].args[2] == "programmatic"
    deps_of_k1 = k1.args[5]
    assert len(deps_of_k1) == 1 and deps_of_k1[0] is memset


def test_load_values_decode_to_the_same_bytes(kernel):
    for p, v in zip(kernel.layout.params, (0x1234, 0, -3.25, -7, 5, bytes(range(16)), True)):
        data = struct.pack("<" + p.fmt, v)
        unpack, kind = kernel_file.reader(p)
        got = kernel_file.value(kind, data, [], unpack)
        assert struct.pack("<" + p.fmt, bytes(got) if isinstance(got, bytes) else got) == data
        if unpack is not None:  # what the loader takes when no relocation applies
            assert unpack(data)[0] == got
    bf = pcg.compile.signature.Param(0, "b", "__nv_bfloat16", "bfloat16", 2, 2, "H")
    from pycudagraph.compile.small_floats import bfloat16_bits as _bfloat16_bits
    for bits in (0x3F80, 0xC2F7, 0x0001, 0x7F80):
        got = kernel_file.value("bfloat16", struct.pack("<H", bits), [])
        assert _bfloat16_bits(got) == bits


def test_warnings_are_not_errors_here():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert file_load.parse_arch("sm_90") == (9, 0, "")

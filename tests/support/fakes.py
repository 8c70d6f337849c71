"""CPU stand-ins for the misuse tests: graphs, nodes, kernels and execs with no GPU behind them.

The checks under test run before any CUDA call, so a fake handle is never passed to CUDA in
a test that expects an error. Device limits are mocked with an H100's values.
"""

from __future__ import annotations

import ctypes
import itertools

from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.compile import limits as validate
from pycudagraph._cuda import versions as _versions
from pycudagraph.compile.args import Layout
from pycudagraph.graph.exec import GraphExec
from pycudagraph.runtime.memory import DeviceBuffer
from pycudagraph.compile.signature import parse_params
from pycudagraph.nodes.captured_args import CapturedArgs

_ids = itertools.count(0x7000_0000, 0x100)

#: cudaDeviceGetAttribute values of an H100 (threads, block, grid, smem, opt-in smem)
H100 = dict(threads=1024, block=(1024, 1024, 64), grid=(2**31 - 1, 65535, 65535),
            smem=49152, smem_optin=232448)


def fake_graph() -> pcg.Graph:
    return pcg.Graph._wrap(rt.cudaGraph_t(next(_ids)))


def fake_node(graph, cls=pcg.EmptyNode):
    """A node added to ``graph`` (registered as a builder would, no CUDA call)."""
    return graph.table.register(cls(graph.table, next(_ids)))


def fake_read_node(graph, cls=pcg.EmptyNode):
    """A node of ``graph`` as if read back from the driver (captured): no ledger entry."""
    node = cls(graph.table, next(_ids))
    graph.table.nodes[int(node)] = node
    return node


def fake_kernel_node(graph, kernel=None, args=(1, 2), sig: str = "int a, int b"):
    """A kernel node of ``graph`` built as ``add_kernel`` would (its pack registered)."""
    kernel = kernel or fake_kernel(sig)
    pack = kernel.pack(args, 1, 32)
    return graph.table.register(pcg.KernelNode(graph.table, next(_ids), pack), pack)


def fake_if_node(graph):
    """An IfNode of ``graph`` with one (fake) body graph."""
    table = graph.table
    node = pcg.IfNode(table, next(_ids), pcg.ConditionalHandle(graph, 1))
    node._bodies = (table.child(rt.cudaGraph_t(next(_ids)), owner=node),)
    return table.register(node, node.condition)


def node_order(monkeypatch, *graphs) -> None:
    """``cudaGraphGetNodes`` of each graph answers its nodes in the order they were made."""
    order = {g.table.h: [rt.cudaGraphNode_t(int(n)) for n in g.table.nodes.values()]
             for g in graphs}
    monkeypatch.setattr(_versions, "graph_nodes", lambda raw: order[int(raw)])


def fake_kernel(sig: str = "float* y, float a, int n", name: str = "k",
                kernel_threads: int = 1024, smem: int = 49152, static_smem: int = 0) -> pcg.Kernel:
    """A 'loaded' Kernel whose limits come from the mocked table."""
    k = pcg.Kernel(None, name, parse_params(sig))
    k._handle = object()
    func = next(_ids)
    k._func = (func, 0)  # the function of device 0, the (pretended) current device
    k._funcs[0] = func
    k._layout = Layout(name, k._declared)
    dev = validate.DeviceLimits(0, **H100)
    validate.KERNEL_LIMITS[func] = validate.KernelLimits(
        name, func, dev, kernel_threads, smem, static_smem)
    k._refresh_hot()  # the compiled route's view, as loading the kernel makes it
    return k


def fake_exec(graph) -> GraphExec:
    """An exec of ``graph`` made by the one constructor, with a fake handle it never destroys."""
    return GraphExec(rt.cudaGraphExec_t(next(_ids)), graph, owned=False)


def fake_buffer(nbytes: int) -> DeviceBuffer:
    """A DeviceBuffer object with an address and a size (no memory behind it)."""
    buf = DeviceBuffer.__new__(DeviceBuffer)
    buf.ptr, buf.nbytes = next(_ids), nbytes
    buf._fin = lambda: None
    return buf


class Edges:
    """A host model of a graph's edges standing in for the driver's edge queries."""

    def __init__(self):
        self.out: dict[int, list[int]] = {}
        self.inc: dict[int, list[int]] = {}

    def add(self, a, b) -> None:
        self.out.setdefault(a._h, []).append(b._h)
        self.inc.setdefault(b._h, []).append(a._h)

    def install(self, monkeypatch) -> "Edges":
        monkeypatch.setattr(_versions, "node_dependencies",
                            lambda handle: list(self.inc.get(int(handle), [])))
        monkeypatch.setattr(_versions, "node_dependents",
                            lambda handle: list(self.out.get(int(handle), [])))
        return self


def fake_edges(monkeypatch, *edges) -> None:
    """``cudaGraphGetEdges`` (with edge data) answers ``edges`` (``(a, b)`` node pairs),
    each graph its own, every edge a default one; a graph not named has none."""
    by_graph: dict[int, list] = {}
    for a, b in edges:
        by_graph.setdefault(a.graph.table.h, []).append((a, b))

    def get(raw):
        pairs = by_graph.get(int(raw), [])
        return ([rt.cudaGraphNode_t(int(a)) for a, _ in pairs],
                [rt.cudaGraphNode_t(int(b)) for _, b in pairs],
                [rt.cudaGraphEdgeData() for _ in pairs])
    monkeypatch.setattr(_versions, "graph_get_edges_with_data", get)


class KernelArgs:
    """The driver's view of one captured kernel node: argument buffers and their layout."""

    def __init__(self, *args):  # (offset, bytes) per argument
        self.info = [(off, len(data)) for off, data in args]
        self.bufs = [ctypes.create_string_buffer(data, len(data)) for _, data in args]
        self.ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(b) for b in self.bufs])

    def read(self):
        p = dr.CUDA_KERNEL_NODE_PARAMS()
        p.kernelParams = ctypes.addressof(self.ptrs)
        return CapturedArgs(p, self.info)

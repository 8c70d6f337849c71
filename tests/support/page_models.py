"""CPU stand-ins for the page tests: a fake graph the page's model reads like a real one
(``nodes``, ``edge_data``, each node's ``type``, ``params``, ``describe``, bodies), a fake
profile and findings, a 10,000-node model, and a PNG reader that counts colours."""

from __future__ import annotations

import struct
import types
import zlib

from pycudagraph.nodes.kernel_node import KernelParams
from pycudagraph.nodes.memory_nodes import MemcpyParams, MemsetParams


class FakeKernel:
    """A kernel built here, as the page reads it: its parameters' names and kinds."""

    def __init__(self, args: dict):
        self.params = [types.SimpleNamespace(name=k, kind="pointer" if isinstance(v, int) and
                                             v > 0xFFFFFFFF else "scalar") for k, v in args.items()]


class FakeNode:
    """A node as the page reads it: its type, label and facets (``fields``, ``sites``,
    ``subgraphs`` with their names, ``work``), each answered as the real class would."""

    def __init__(self, type_, label, params=None, mangled=None, kind=""):
        self.type = type_
        self.kernel_name = label
        self.mangled_name = mangled or label
        self.params = params
        self.kind = kind
        self.child = None
        self.bodies = ()
        self.kernel = None
        self.arguments = []  # a captured kernel's argument bytes
        self.graph = None
        self.repeats_bodies = type_ == "conditional"

    def describe(self) -> str:
        return self.kernel_name

    def label(self) -> str:
        return self.kernel_name

    def fields(self) -> dict:
        p = self.params
        if self.type == "kernel":
            args = (dict(p.args) if self.kernel is not None
                    else dict(enumerate(self.arguments)))
            return {"function": 0x7F00, "grid": tuple(p.grid), "block": tuple(p.block),
                    "shared_mem": p.shared_mem, "args": args}
        if self.type == "child_graph":
            return {"graph": self.child}
        if self.type == "conditional":
            return {"kind": self.kind, "handle": None}
        return dict(vars(p)) if p is not None else {}

    def sites(self) -> list:
        if self.kernel is None:
            return []
        return [types.SimpleNamespace(arg=i) for i, q in enumerate(self.kernel.params)
                if q.kind == "pointer"]

    def subgraphs(self) -> tuple:
        return (self.child,) if self.child is not None else tuple(self.bodies)

    def subgraph_names(self) -> list:
        return ["child"] if self.type == "child_graph" else ["body"][:len(self.bodies)]

    def work(self):
        p = self.params
        if self.type == "memset":
            return "memset", p.count * p.element_size * p.height
        if self.type == "memcpy":
            return "memcpy", p.nbytes
        return None

    def __repr__(self) -> str:
        return f"<FakeNode {self.kernel_name}>"


class FakeTable:
    """The one walk over a fake graph (``NodeTable.walk``'s protocol)."""

    def __init__(self, graph):
        self.graph = graph

    def walk(self, depth: int = 0, owner=None):
        for node in self.graph.nodes:
            yield node, depth, owner
            for g in node.subgraphs():
                yield from g.table.walk(depth + 1, node)


class FakeGraph:
    handle = 0x5EED

    def __init__(self):
        self.nodes = []
        self.edge_data = {}
        self.table = FakeTable(self)

    def add(self, node, deps=(), port="default"):
        self.nodes.append(node)
        node.graph = self
        for d in deps:
            self.edge_data[(d, node)] = port
        return node

    @property
    def edges(self):
        return list(self.edge_data)


class FakeRow:
    def __init__(self, node, us, runs=1, seen=True):
        self.node, self.us, self.runs, self.seen = node, us, runs, seen


class FakeProfile:
    method = "stamps"
    repeats = 10

    def __init__(self, times: dict, total_us: float, critical=()):
        self.rows = [FakeRow(n, t) for n, t in times.items()]
        self.total_us = total_us
        self.critical_path = list(critical)


class Finding:
    def __init__(self, node, place, address, problem):
        self.node, self.place, self.address, self.problem = node, place, address, problem


def kernel(name, args=None, grid=(4, 1, 1), mangled=None):
    """A kernel node built here (named arguments)."""
    node = FakeNode("kernel", name, KernelParams(name, grid, (256, 1, 1), 0, dict(args or {})),
                    mangled)
    node.kernel = FakeKernel(dict(args or {}))
    return node


def sample_graph():
    """(graph, nodes by name): a copy in, built and captured kernels, a programmatic edge,
    a child graph, a while loop of two kernels, a memset and the copy out."""
    g = FakeGraph()
    n = {}
    n["upload"] = g.add(FakeNode("memcpy", "memcpy 4096 B host->device",
                                 MemcpyParams(0x7F0000001000, 0x600000, 4096, "host->device")))
    n["axpy"] = g.add(kernel("axpy", {"y": 0x7F0000002000, "x": 0x7F0000001000, "a": 2.5,
                                      "n": 1024}), [n["upload"]])
    gemm = FakeNode("kernel", "cutlass::Kernel2", mangled="_ZN7cutlass7Kernel2I...E")
    gemm.params = KernelParams("cutlass::Kernel2", (8, 4, 1), (128, 1, 1), 1024, {})
    gemm.arguments = [struct.pack("<Q", 0x7F0000002000), struct.pack("<i", 1024),
                     struct.pack("<f", 0.5), bytes(range(24))]
    n["gemm"] = g.add(gemm, [n["axpy"]], port="programmatic")
    child = FakeNode("child_graph", "child_graph (2 nodes)", {"graph": None})
    inner = FakeGraph()
    first = inner.add(kernel("add_one"))
    inner.add(kernel("add_one"), [first])
    child.child = inner
    n["child"] = g.add(child, [n["gemm"]])
    loop = FakeNode("conditional", "while handle=0x1 (body nodes: 2)", kind="while")
    body = FakeGraph()
    n["step"] = body.add(kernel("relax_step"))
    body.add(kernel("count_while_below"), [n["step"]])
    loop.bodies = (body,)
    n["loop"] = g.add(loop, [n["child"]])
    n["clear"] = g.add(FakeNode("memset", "memset 256 x 4 B",
                                MemsetParams(0x7F0000003000, 0, 4, 256, 1, 0)))
    n["download"] = g.add(FakeNode("memcpy", "memcpy 4 B device->host",
                                   MemcpyParams(0x600000, 0x7F0000003000, 4, "device->host")),
                          [n["loop"], n["clear"]])
    return g, n


def big_model(count: int = 10_000, width: int = 100) -> dict:
    """A page model of ``count`` kernel nodes: ``width`` chains, one in ten nodes also
    waiting for a node of another chain."""
    from pycudagraph.cli.show_model import ModelBuilder
    b = ModelBuilder(f"{count} nodes")
    prev = [None] * width
    state = 12345
    for i in range(count):
        c = i % width
        deps = [prev[c]] if prev[c] else []
        state = (state * 1103515245 + 12345) % (1 << 31)
        other = prev[state % width]
        if other and other not in deps and state % 10 == 0:
            deps.append(other)
        prev[c] = b.node("root", "kernel", f"k{i // width}_{c}", deps,
                         [("grid", "(1, 1, 1)")], [("y", "0x1000", "")])
    return b.model


def png_colours(data: bytes, limit: int = 1000) -> int:
    """How many distinct colours an 8-bit RGB or RGBA PNG holds (up to ``limit``)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and not interlace, "unexpected PNG format"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    seen = set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:
            for x in range(0, stride, bpp * 3):
                seen.add(bytes(line[x:x + 3]))
            if len(seen) >= limit:
                return len(seen)
        prev = line
    return len(seen)

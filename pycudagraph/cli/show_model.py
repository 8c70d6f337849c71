"""A CPU-side model of the showcase graph (:func:`pycudagraph.cli.show.build_showcase`),
in the page's format (:mod:`pycudagraph.inspect.page_model`), for ``show --model``, the
documentation's picture and the page's tests: no GPU needed. Parameters are typed in as
the real graph has them; addresses are made up; there are no times (a model measures
nothing)."""

from __future__ import annotations

from ..inspect.page_model import node_entry

__all__ = ["showcase_model", "ModelBuilder"]

N = 1 << 16


class ModelBuilder:
    """Builds a page model graph by graph: ``node(...)`` returns the node's id (its path)."""

    def __init__(self, title: str):
        self.model = {"title": title, "root": "root", "graphs": {"root": {"nodes": [], "edges": []}},
                      "nodes": {}, "profile": None, "findings": 0}

    def node(self, graph: str, type_: str, label: str, deps=(), details=(), args=(),
             port: str = "default") -> str:
        g = self.model["graphs"][graph]
        prefix = "" if graph == "root" else graph + "/"
        nid = f"{prefix}{len(g['nodes'])}"
        g["nodes"].append(nid)
        for d in deps:
            g["edges"].append([d, nid, port])
        self.model["nodes"][nid] = node_entry(type_, label, nid, details, args)
        return nid

    def body(self, owner: str, name: str) -> str:
        gid = f"{owner}/{name}"
        self.model["graphs"][gid] = {"nodes": [], "edges": []}
        self.model["nodes"][owner]["bodies"].append({"name": name, "graph": gid})
        return gid


def _kernel(b: ModelBuilder, graph: str, name: str, grid, block, args, deps=()) -> str:
    details = [("kernel_name", name), ("grid", str(tuple(grid))), ("block", str(tuple(block))),
               ("shared_mem", "0")]
    return b.node(graph, "kernel", name, deps, details, [(k, v, "") for k, v in args])


def showcase_model() -> dict:
    """The showcase graph as the page would see it on a GPU, without one."""
    b = ModelBuilder("pycudagraph showcase graph (model, drawn without a GPU)")
    x, y = "DeviceBuffer 0x7f3a40000000, 256.0 KiB (262144 B)", \
        "DeviceBuffer 0x7f3a40040000, 256.0 KiB (262144 B)"
    out, counter = "DeviceBuffer 0x7f3a40080000, 4 B", "DeviceBuffer 0x7f3a40080200, 4 B"
    grid, block = (N // 256, 1, 1), (256, 1, 1)
    copy = [("dst", "0x7f3a40000000"), ("src", "0x7f3a60000000"), ("nbytes", "256.0 KiB (262144 B)"),
            ("kind", "host->device"), ("height", "1"), ("depth", "1")]
    upload = b.node("root", "memcpy", "memcpy 262144 B host->device", details=copy)
    clear = b.node("root", "memset", "memset 65536 x 4 B", details=[
        ("dst", "0x7f3a40040000"), ("value", "0"), ("element_size", "4"), ("count", "65536"),
        ("height", "1"), ("pitch", "0"), ("bytes", "256.0 KiB (262144 B)")])
    fill = _kernel(b, "root", "fill", grid, block, [("y", y), ("v", "1.0"), ("n", str(N))], [clear])
    axpy = _kernel(b, "root", "axpy", grid, block,
                   [("y", y), ("x", x), ("a", "2.0"), ("n", str(N))], [upload, fill])
    scale = _kernel(b, "root", "scale", grid, block, [("y", y), ("a", "2.0"), ("n", str(N))],
                    [axpy])
    child = b.node("root", "child_graph", "child_graph (2 nodes)", [scale])
    sub = b.body(child, "child")
    first = _kernel(b, sub, "add_one", grid, block, [("y", y), ("n", str(N))])
    _kernel(b, sub, "add_one", grid, block, [("y", y), ("n", str(N))], [first])
    zero = b.node("root", "memset", "memset 1 x 4 B", details=[
        ("dst", "0x7f3a40080200"), ("value", "0"), ("element_size", "4"), ("count", "1")])
    loop = b.node("root", "conditional", "while handle=0x1 (body nodes: 2)", [child, zero],
                  details=[("kind", "while"), ("condition", "ConditionalHandle 0x1 default=1")])
    body = b.body(loop, "body")
    step = _kernel(b, body, "add_one", grid, block, [("y", y), ("n", str(N))])
    _kernel(b, body, "count_while_below", (1, 1, 1), (1, 1, 1),
            [("counter", counter), ("limit", "3"), ("handle", "ConditionalHandle 0x1")], [step])
    zero_out = b.node("root", "memset", "memset 1 x 4 B", details=[
        ("dst", "0x7f3a40080000"), ("value", "0"), ("element_size", "4"), ("count", "1")])
    total = _kernel(b, "root", "reduce_sum", (64, 1, 1), block,
                    [("x", y), ("out", out), ("n", str(N))], [loop, zero_out])
    b.node("root", "memcpy", "memcpy 4 B device->host", [total], details=[
        ("dst", "0x7f3a60040000"), ("src", "0x7f3a40080000"), ("nbytes", "4 B"),
        ("kind", "device->host")])
    return b.model

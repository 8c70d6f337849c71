"""Graph nodes: one class per CUDA node type, each with a readable ``params`` view.

A node is a handle into its :class:`~pycudagraph.graph.Graph` and keeps that graph
alive. Nodes compare equal and hash by their CUDA handle, whichever call returned
them (a builder, ``g.nodes``, ``node.dependencies``, ``clone.find``).
"""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass, field

from . import _cuda
from ._cuda import call, dr, rt

__all__ = ["NodeType", "Node", "KernelNode", "MemcpyNode", "MemsetNode", "HostNode",
           "ChildGraphNode", "EmptyNode", "EventRecordNode", "EventWaitNode",
           "MemAllocNode", "MemFreeNode", "ConditionalNode", "node_class"]


class NodeType(str, enum.Enum):
    """Node type names (``cudaGraphNodeType``) as strings: ``node.type == "kernel"``."""

    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    HOST = "host"
    CHILD_GRAPH = "child_graph"
    EMPTY = "empty"
    EVENT_WAIT = "event_wait"
    EVENT_RECORD = "event_record"
    EXT_SEMAPHORE_SIGNAL = "ext_semaphore_signal"
    EXT_SEMAPHORE_WAIT = "ext_semaphore_wait"
    MEM_ALLOC = "mem_alloc"
    MEM_FREE = "mem_free"
    BATCH_MEM_OP = "batch_mem_op"
    CONDITIONAL = "conditional"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


_RAW_TYPES = {0: NodeType.KERNEL, 1: NodeType.MEMCPY, 2: NodeType.MEMSET, 3: NodeType.HOST,
              4: NodeType.CHILD_GRAPH, 5: NodeType.EMPTY, 6: NodeType.EVENT_WAIT,
              7: NodeType.EVENT_RECORD, 8: NodeType.EXT_SEMAPHORE_SIGNAL,
              9: NodeType.EXT_SEMAPHORE_WAIT, 10: NodeType.MEM_ALLOC, 11: NodeType.MEM_FREE,
              12: NodeType.BATCH_MEM_OP, 13: NodeType.CONDITIONAL}


class Node:
    """A node of a graph.

    Attributes
    ----------
    graph : Graph
        The graph the node belongs to (kept alive by the node).
    type : NodeType
    """

    type = NodeType.OTHER
    __slots__ = ("graph", "_h", "_raw", "__weakref__")

    def __init__(self, graph, h: int):
        self.graph = graph
        self._h = h
        self._raw = None

    @property
    def handle(self):
        """The raw ``cudaGraphNode_t`` (cuda.bindings object)."""
        if self._raw is None:
            self._raw = rt.cudaGraphNode_t(self._h)
        return self._raw

    @property
    def dependencies(self) -> list["Node"]:
        """Nodes this one waits for (``cudaGraphNodeGetDependencies``)."""
        return [self.graph._node(h) for h in _cuda.node_dependencies(self.handle)]

    @property
    def dependents(self) -> list["Node"]:
        """Nodes waiting for this one (``cudaGraphNodeGetDependentNodes``)."""
        return [self.graph._node(h) for h in _cuda.node_dependents(self.handle)]

    @property
    def params(self):
        """A readable view of the node's parameters (the type's ``cudaGraph*NodeGetParams``)."""
        return None

    def describe(self) -> str:
        """One line for DOT labels and error messages."""
        return str(self.type)

    def __eq__(self, other) -> bool:
        return isinstance(other, Node) and other._h == self._h

    def __hash__(self) -> int:
        return hash(self._h)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} 0x{self._h:x} {self.describe()}>"


# ----------------------------------------------------------------------------------
# Kernel nodes

def short_kernel_name(name: str) -> str:
    """A readable name for a C++-mangled kernel: ``_ZN2at6native6kernelI...`` -> ``at::native::kernel``."""
    if not name.startswith("_Z"):
        return name
    i = 2
    nested = name[i:i + 1] == "N"
    i += 1 if nested else 0
    while i < len(name) and name[i] in "KVr":
        i += 1
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
        if not nested:
            break
    return "::".join(parts) if parts else name


@dataclass(frozen=True)
class KernelParams:
    """What a kernel node launches."""

    kernel_name: str
    grid: tuple
    block: tuple
    shared_mem: int
    args: dict = field(default_factory=dict)


class KernelNode(Node):
    """A kernel launch node (``cudaGraphAddKernelNode``)."""

    type = NodeType.KERNEL
    __slots__ = ("_pack", "_cvp")

    def __init__(self, graph, h: int, pack=None, cvp=None):
        super().__init__(graph, h)
        self._pack = pack  # ArgPack when built by pycudagraph; None for captured nodes
        self._cvp = cvp if cvp is not None else ctypes.c_void_p(h)  # the handle, addressable

    def _driver_params(self):
        return call(dr.cuGraphKernelNodeGetParams, dr.CUgraphNode(self._h))

    @property
    def kernel_name(self) -> str:
        """The kernel's name; for captured C++ kernels a readable form of the mangled name."""
        if self._pack is not None:
            return self._pack.kernel.name
        return short_kernel_name(self.mangled_name)

    @property
    def mangled_name(self) -> str:
        """The name in the kernel image (``cuFuncGetName`` / ``cuKernelGetName``)."""
        if self._pack is not None:
            return self._pack.kernel.name
        p = self._driver_params()
        if int(p.func):
            name = call(dr.cuFuncGetName, p.func)
        else:
            name = call(dr.cuKernelGetName, p.kern)
        return _cuda._decode(name)

    @property
    def kernel(self):
        """The :class:`~pycudagraph.kernel.Kernel` when the node was built by pycudagraph."""
        return self._pack.kernel if self._pack is not None else None

    @property
    def params(self) -> KernelParams:
        """Kernel name, grid, block, dynamic shared memory and (for our nodes) the arguments.

        Captured nodes are read with ``cuGraphKernelNodeGetParams``.
        """
        if self._pack is not None:
            grid, block, smem = self._pack.dims
            names = [p.name for p in self._pack.layout.params]
            return KernelParams(self.kernel_name, grid, block, smem,
                                dict(zip(names, self._pack.values())))
        p = self._driver_params()
        return KernelParams(self.kernel_name, (p.gridDimX, p.gridDimY, p.gridDimZ),
                            (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes)

    def set_params(self, args=None, grid=None, block=None, shared_mem=None) -> None:
        """Change the node in its graph (``cuGraphKernelNodeSetParams``).

        ``args`` is a full sequence, or a dict ``{index_or_name: value}`` changing only
        those arguments. Fields not given keep their values. Graph execs already
        instantiated are not affected (use :meth:`GraphExec.set_params` for those).
        """
        if self._pack is None:
            raise NotImplementedError("set_params on a captured kernel node needs its kernel "
                                      "signature; rebuild the node with Graph.add_kernel")
        pack = self._pack.updated(args, grid, block, shared_mem)
        rc = _cuda.drv.cuGraphKernelNodeSetParams(self._h, pack.address)
        if _cuda.tracer is not None:
            _cuda.tracer("cuGraphKernelNodeSetParams", (self, pack), (rc,))
        if rc:
            _cuda.raise_driver("cuGraphKernelNodeSetParams", rc)
        self._pack = pack

    def describe(self) -> str:
        p = self.params
        return f"kernel {p.kernel_name} grid={_dim(p.grid)} block={_dim(p.block)}"


def _dim(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return "(" + ",".join(str(x) for x in d) + ")" if len(d) > 1 else str(d[0])


# ----------------------------------------------------------------------------------
# Memory nodes

@dataclass(frozen=True)
class MemcpyParams:
    dst: int
    src: int
    nbytes: int
    kind: str
    height: int = 1
    depth: int = 1


_KIND_NAMES = {0: "host->host", 1: "host->device", 2: "device->host", 3: "device->device", 4: "default"}


class _BufferNode(Node):
    """A node that keeps the Python objects its addresses came from."""

    __slots__ = ("_refs",)

    def __init__(self, graph, h: int, refs=()):
        super().__init__(graph, h)
        self._refs = refs


class MemcpyNode(_BufferNode):
    """A memory copy node (``cudaGraphAddMemcpyNode1D``)."""

    type = NodeType.MEMCPY
    __slots__ = ()

    @property
    def params(self) -> MemcpyParams:
        """Read with ``cudaGraphMemcpyNodeGetParams``."""
        p = call(rt.cudaGraphMemcpyNodeGetParams, self.handle)
        ext = p.extent
        return MemcpyParams(int(p.dstPtr.ptr) + p.dstPos.x, int(p.srcPtr.ptr) + p.srcPos.x,
                            int(ext.width), _KIND_NAMES.get(int(p.kind), str(p.kind)),
                            int(ext.height), int(ext.depth))

    def set_params(self, dst=None, src=None, nbytes=None) -> None:
        """Change the copy in its graph (``cudaGraphMemcpyNodeSetParams1D``); the size
        stays as it was unless ``nbytes`` is given."""
        from .copies import memcpy_args
        cur = self.params
        dst_obj = cur.dst if dst is None else dst
        src_obj = cur.src if src is None else src
        d, s, n, kind = memcpy_args(dst_obj, src_obj, cur.nbytes if nbytes is None else nbytes)
        call(rt.cudaGraphMemcpyNodeSetParams1D, self.handle, d, s, n, kind)
        self._refs = (dst_obj, src_obj)

    def describe(self) -> str:
        p = self.params
        return f"memcpy {p.kind} {p.nbytes * p.height * p.depth} B"


@dataclass(frozen=True)
class MemsetParams:
    dst: int
    value: int
    element_size: int
    count: int
    height: int
    pitch: int


class MemsetNode(_BufferNode):
    """A memset node (``cudaGraphAddMemsetNode``)."""

    type = NodeType.MEMSET
    __slots__ = ()

    @property
    def params(self) -> MemsetParams:
        """Read with ``cudaGraphMemsetNodeGetParams``."""
        p = call(rt.cudaGraphMemsetNodeGetParams, self.handle)
        return MemsetParams(int(p.dst), int(p.value), int(p.elementSize), int(p.width),
                            int(p.height), int(p.pitch))

    def set_params(self, dst=None, value=None, count=None, element_size=None,
                   height=None, pitch=None) -> None:
        """Change the memset in its graph (``cudaGraphMemsetNodeSetParams``)."""
        from .copies import memset_params
        p = memset_params(self.params, dst, value, count, element_size, height, pitch)
        call(rt.cudaGraphMemsetNodeSetParams, self.handle, p)
        if dst is not None:
            self._refs = (dst,)

    def describe(self) -> str:
        p = self.params
        return f"memset {p.count * p.height * p.element_size} B value=0x{p.value:x}"


class MemAllocNode(Node):
    """A graph memory allocation node (``cudaGraphAddMemAllocNode``).

    :attr:`ptr` is the device address, valid from this node until a free node (or,
    with ``auto_free_on_launch``, until the next launch).
    """

    type = NodeType.MEM_ALLOC
    __slots__ = ()

    @property
    def params(self) -> dict:
        """``cudaGraphMemAllocNodeGetParams``: the address and size."""
        p = call(rt.cudaGraphMemAllocNodeGetParams, self.handle)
        return {"ptr": int(p.dptr), "nbytes": int(p.bytesize)}

    @property
    def ptr(self) -> int:
        return self.params["ptr"]

    @property
    def nbytes(self) -> int:
        return self.params["nbytes"]

    def describe(self) -> str:
        return f"mem_alloc {self.nbytes} B"


class MemFreeNode(Node):
    """A graph memory free node (``cudaGraphAddMemFreeNode``)."""

    type = NodeType.MEM_FREE
    __slots__ = ()

    @property
    def params(self) -> dict:
        """``cudaGraphMemFreeNodeGetParams``: the address freed."""
        return {"ptr": int(call(rt.cudaGraphMemFreeNodeGetParams, self.handle))}

    def describe(self) -> str:
        return f"mem_free 0x{self.params['ptr']:x}"


# ----------------------------------------------------------------------------------
# Host, child graph, event, empty and conditional nodes

class HostNode(Node):
    """A node that runs a Python callable on a CUDA host thread (``cudaGraphAddHostNode``).

    The callable must not call CUDA; an exception it raises is raised by the next
    ``GraphExec.launch``/``synchronize`` or ``Stream.synchronize``.
    """

    type = NodeType.HOST
    __slots__ = ("_call",)

    def __init__(self, graph, h: int, hostcall=None):
        super().__init__(graph, h)
        self._call = hostcall

    @property
    def params(self) -> dict:
        """The callable (ours) or raw function pointer (``cudaGraphHostNodeGetParams``)."""
        if self._call is not None:
            return {"fn": self._call.fn, "args": self._call.args}
        p = call(rt.cudaGraphHostNodeGetParams, self.handle)
        return {"fn": int(p.fn), "user_data": int(p.userData)}

    def set_params(self, fn, args=()) -> None:
        """Run another callable (``cudaGraphHostNodeSetParams``)."""
        from .hostfn import HostCall
        hc = HostCall(fn, args)
        call(rt.cudaGraphHostNodeSetParams, self.handle, self.graph._host_params(hc))
        self._call = hc
        self.graph._keep[self._h] = (hc,)

    def describe(self) -> str:
        fn = self._call.name if self._call is not None else "C function"
        return f"host {fn}"


class ChildGraphNode(Node):
    """A node that runs a whole graph (``cudaGraphAddChildGraphNode``)."""

    type = NodeType.CHILD_GRAPH
    __slots__ = ()

    @property
    def child(self):
        """The embedded graph (``cudaGraphChildGraphNodeGetGraph``); owned by this node."""
        from .graph import Graph
        raw = call(rt.cudaGraphChildGraphNodeGetGraph, self.handle)
        return Graph._wrap(raw, owner=self)

    @property
    def params(self) -> dict:
        return {"graph": self.child}

    def describe(self) -> str:
        return f"child_graph ({len(self.child.nodes)} nodes)"


class EmptyNode(Node):
    """A node that does nothing, for joining dependencies (``cudaGraphAddEmptyNode``)."""

    type = NodeType.EMPTY
    __slots__ = ()


class _EventNode(Node):
    __slots__ = ("_event",)
    _get = None
    _set = None

    def __init__(self, graph, h: int, event=None):
        super().__init__(graph, h)
        self._event = event

    @property
    def event(self):
        """The :class:`Event` (ours) or raw ``cudaEvent_t``."""
        if self._event is not None:
            return self._event
        return call(type(self)._get, self.handle)

    @property
    def params(self) -> dict:
        return {"event": self.event}

    def set_params(self, event) -> None:
        """Use another event (``cudaGraphEventRecordNodeSetEvent`` / ``...WaitNodeSetEvent``)."""
        call(type(self)._set, self.handle, event.handle)
        self._event = event
        self.graph._keep[self._h] = (event,)

    def describe(self) -> str:
        return f"{self.type} 0x{int(self.event.handle if self._event else self.event):x}"


class EventRecordNode(_EventNode):
    """Records an event (``cudaGraphAddEventRecordNode``)."""

    type = NodeType.EVENT_RECORD
    __slots__ = ()
    _get = staticmethod(rt.cudaGraphEventRecordNodeGetEvent)
    _set = staticmethod(rt.cudaGraphEventRecordNodeSetEvent)


class EventWaitNode(_EventNode):
    """Waits for an event (``cudaGraphAddEventWaitNode``)."""

    type = NodeType.EVENT_WAIT
    __slots__ = ()
    _get = staticmethod(rt.cudaGraphEventWaitNodeGetEvent)
    _set = staticmethod(rt.cudaGraphEventWaitNodeSetEvent)


class ConditionalNode(Node):
    """A conditional node (if / while / switch); its body graphs are :attr:`bodies`."""

    type = NodeType.CONDITIONAL
    __slots__ = ("bodies", "kind")

    def __init__(self, graph, h: int, bodies=(), kind: str = "conditional"):
        super().__init__(graph, h)
        self.bodies = tuple(bodies)
        self.kind = kind

    def describe(self) -> str:
        return f"conditional {self.kind}"


_CLASSES = {c.type: c for c in (KernelNode, MemcpyNode, MemsetNode, HostNode, ChildGraphNode,
                                 EmptyNode, EventRecordNode, EventWaitNode, MemAllocNode,
                                 MemFreeNode, ConditionalNode)}


def node_class(raw_type) -> type:
    """The Node subclass for a ``cudaGraphNodeType``; ``Node`` for types without one."""
    t = _RAW_TYPES.get(int(raw_type), NodeType.OTHER)
    cls = _CLASSES.get(t)
    if cls is None:
        cls = type(f"{t.name.title().replace('_', '')}Node", (Node,), {"type": t, "__slots__": ()})
        _CLASSES[t] = cls
    return cls


"""Kernel nodes: a packed launch in a stable buffer, updated in place."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from .._cuda import call, check, context, dr, fast, rt, versions
from .._cuda.context import seen
from ..errors import ArgumentError
from ..compile.limits import require_kernel
from . import attributes as _attrs
from .base import REMOVED, Node, NodeType

__all__ = ["KernelNode", "KernelParams", "short_kernel_name"]

_VP = ctypes.c_void_p
_PLAIN = (int, float, bool)
_native_add = fast.native.add_kernel if fast.native is not None else None
if fast.native is not None:
    fast.native.set_removed(REMOVED)  # a removed dependency goes to the Python path's error


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


def _dim(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return "(" + ",".join(str(x) for x in d) + ")" if len(d) > 1 else str(d[0])


class KernelNode(Node):
    """A kernel launch node (``cudaGraphAddKernelNode``)."""

    type = NodeType.KERNEL
    __slots__ = ("_pack", "_cvp")

    def __init__(self, graph, h: int, pack=None, cvp=None):
        super().__init__(graph, h)
        self._pack = pack  # ArgPack when built by pycudagraph; None when read back
        self._cvp = cvp  # the handle as a c_void_p (a one-node dependency array), or None

    @classmethod
    def _add(cls, graph, deps, kernel, grid, block, args=(), shared_mem: int = 0,
             **attributes) -> "KernelNode":
        """Pack the launch and call ``cuGraphAddKernelNode`` (the driver twin of
        ``cudaGraphAddKernelNode``) with a ``CUDA_KERNEL_NODE_PARAMS_v2`` naming the
        kernel's ``CUfunction``; its argument slots live in the node's stable buffer.

        Attributes given (not ``None``) are set with ``cudaGraphKernelNodeSetAttribute``;
        they are all checked before the node is added.
        """
        todo = ([_attrs.prepare(k, v) for k, v in attributes.items() if v is not None]
                if attributes else ())
        nl = getattr(kernel, "_native", None)  # a Kernel's compiled layout, once loaded
        if (nl is not None and not todo and not seen.multi and not (graph._closed or graph._dead)
                and kernel._fits(grid, block, shared_mem)):  # the driver checks no limits here
            r = _native_add(nl, kernel._layout, kernel, kernel._func[0], grid, block, args,
                            shared_mem, graph, deps)
            if type(r) is tuple:  # packed and added by the compiled path
                return graph._register(cls(graph, r[0], r[1]), r[1])
        # The checked path (and the diagnosis of anything the compiled path handed back).
        pack = require_kernel(kernel, "add_kernel").pack(args, grid, block, shared_mem)
        if isinstance(deps, Node):
            deps = (deps,)
        elif type(deps) is not tuple and type(deps) is not list:
            deps = graph._dep_nodes(deps)  # None, generators ...; checked
        n = len(deps)
        arr = None
        if n == 0:
            dep_addr = None
        elif (n == 1 and type(deps[0]) is KernelNode and deps[0].graph is graph
              and deps[0]._raw is not REMOVED and deps[0]._cvp is not None):
            dep_addr = ctypes.addressof(deps[0]._cvp)
        else:
            graph._dep_list(deps)
            arr = (_VP * n)(*[d._h for d in deps])
            dep_addr = ctypes.addressof(arr)
        out = _VP()
        h = fast.add_kernel_node(out, graph, dep_addr, n, pack, deps)
        node = graph._register(cls(graph, h, pack, out), pack)
        if todo:
            try:
                for attr, value in todo:
                    call(rt.cudaGraphKernelNodeSetAttribute, node.handle, attr, value)
            except Exception:
                graph.remove_node(node)  # no half-configured node stays behind
                raise
            window = attributes.get("access_policy")
            if window is not None:
                graph._ledger.add(h, window.base)
        return node

    def _driver_params(self):
        self._check_live()
        context.ensure_device()  # a driver call: this thread needs a current context
        return call(dr.cuGraphKernelNodeGetParams, dr.CUgraphNode(self._h))

    @property
    def kernel_name(self) -> str:
        """The kernel's name; for captured C++ kernels a readable form of the mangled name
        (:attr:`mangled_name`: ``cuGraphKernelNodeGetParams``, ``cuFuncGetName``)."""
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
        return check.decode(name)

    @property
    def kernel(self):
        """The :class:`~pycudagraph.compile.kernel.Kernel` when the node was built by pycudagraph, else
        ``None``. No CUDA call."""
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

        Parameters
        ----------
        args : sequence or dict, optional
        grid, block : int or tuple of up to 3 ints, optional
        shared_mem : int, optional
        """
        self._check_live()
        if self._pack is None:  # captured: arguments by index, sizes from the function
            from .captured_kernel import graph_set
            return graph_set(self, args, grid, block, shared_mem)
        if seen.multi and args is not None:  # DeviceBuffers of the node's device (or peers)
            args = self._pack.kernel._check_pack_args(self._pack, args, "set_params")
        pack = self._pack.updated(args, grid, block, shared_mem)
        if grid is not None or block is not None or shared_mem is not None:
            pack.kernel._pack_config(pack, *pack.dims)  # the node's function, its device
        fast.kernel_node_set_params(self, pack)
        self._pack = pack
        self.graph._register(self, pack)

    # Attributes --------------------------------------------------------------------

    @property
    def attributes(self) -> dict:
        """Every kernel-node attribute the driver supports, read with
        ``cudaGraphKernelNodeGetAttribute``: priority, cluster, cooperative,
        access_policy, mem_sync_domain, device_updatable."""
        have = versions.driver_version()
        return {name: _attrs.get_attribute(self.handle, name)
                for name, entry in _attrs.ATTRIBUTES.items() if entry[1] <= have}

    def get_attribute(self, name: str):
        """One attribute (``cudaGraphKernelNodeGetAttribute``); see :attr:`attributes`.

        Parameters
        ----------
        name : str
            ``"priority"``, ``"cluster"``, ``"cooperative"``, ``"access_policy"``,
            ``"mem_sync_domain"`` or ``"device_updatable"``.
        """
        return _attrs.get_attribute(self.handle, name)

    def set_attribute(self, name: str, value) -> None:
        """Set one attribute in the graph (``cudaGraphKernelNodeSetAttribute``).

        Execs made earlier keep their value; ``exe.update(graph)`` carries the change
        over where CUDA allows it (not a cooperative on/off switch, nor a priority of an
        exec instantiated with ``use_node_priority``).

        Parameters
        ----------
        name : str
            One of the names :attr:`attributes` lists.
        value
            Checked before the call (:mod:`pycudagraph.nodes.attributes`).
        """
        _attrs.set_attribute(self.handle, name, value)
        if name == "access_policy" and value is not None:
            self.graph._ledger.add(self._h, value.base)

    def copy_attributes_from(self, other: "KernelNode") -> None:
        """Copy every attribute of ``other`` to this node (``cudaGraphKernelNodeCopyAttributes``)."""
        if not isinstance(other, KernelNode):
            raise ArgumentError(f"copy_attributes_from: other must be a KernelNode, got "
                                f"{type(other).__name__}")
        versions.kernel_node_copy_attributes(self.handle, other.handle)

    @property
    def device_node(self) -> int:
        """The ``cudaGraphDeviceNode_t`` device code passes to ``cudaGraphKernelNodeSetParam``
        & co.; the node must have been made with ``device_updatable=True``
        (``cudaGraphKernelNodeGetAttribute``)."""
        if not self.get_attribute("device_updatable"):
            raise ValueError(f"{self!r} is not device-updatable: add it with device_updatable=True")
        return _attrs.device_node(self.handle)

    def _exec_set(self, exe, target, args=None, grid=None, block=None, shared_mem=None,
                  **attributes) -> None:
        """``cuGraphExecKernelNodeSetParams`` with the exec's own copy of the node's pack."""
        unknown = [k for k in attributes if k not in _attrs.ATTRIBUTES]
        if unknown:
            raise ArgumentError(f"set_params: KernelNode has no field "
                                f"{', '.join(map(repr, unknown))}; its fields are "
                                "['args', 'grid', 'block', 'shared_mem']")
        if attributes:
            raise TypeError(
                f"an exec has no per-node attribute call ({', '.join(attributes)}): set it on "
                "the graph node with node.set_attribute(...) and apply it with exe.update(graph)")
        if target._pack is None:  # captured: arguments by index, sizes from the function
            from .captured_kernel import exec_set
            return exec_set(exe, target, args, grid, block, shared_mem)
        pack, h = exe._kernel_entry(target)
        if seen.multi and args is not None:  # DeviceBuffers of the node's device (or peers)
            args = pack.kernel._check_pack_args(pack, args, "GraphExec.set_params")
        if grid is not None or block is not None or shared_mem is not None:
            d = pack._dims_with(grid, block, shared_mem)
            pack.kernel._pack_config(pack, tuple(d[0:3]), tuple(d[3:6]), d[6])
        old_refs = pack.apply(args, grid, block, shared_mem)
        fast.exec_kernel_node_set_params(exe, h, pack, self)
        for old in old_refs:
            if type(old) not in _PLAIN:
                exe._retire(old)

    def describe(self) -> str:
        """One line: kernel name, grid and block (``cuGraphKernelNodeGetParams`` for a
        node not built here)."""
        p = self.params
        return f"kernel {p.kernel_name} grid={_dim(p.grid)} block={_dim(p.block)}"

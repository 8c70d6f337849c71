"""Kernel nodes: a packed launch in a stable buffer, updated in place."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._cuda import call, context, dr, fast, rt, versions
from .._cuda.context import seen
from ..compile.args import ArgPack
from ..compile.cxx_names import short_kernel_name
from ..compile.limits import require_kernel
from ..errors import ArgumentError, PyCudaGraphError
from . import attributes as _attrs
from .base import REMOVED, Node, NodeType
from .captured_args import CapturedArgs
from .exec_node import ExecNode
from .kernel_file import KernelFile
from .kernel_sites import KernelSites

__all__ = ["KernelNode", "KernelParams", "short_kernel_name", "exec_set_arg", "exec_set_args",
           "pack_arguments"]

_PLAIN = (int, float, bool)
_add_kernel = fast.add_kernel
_set_arg = fast.set_arg
_set_args = fast.set_args
_register_node = fast.register_node
_new = object.__new__


def _dep_handles(table, deps) -> tuple:
    """The handles of ``deps`` (a tuple or list), checked as every builder's ``deps=``: nodes
    of the table's graph, not removed, none twice (what the compiled ``fast.add_kernel``
    judges in C; this is its ctypes route's). The common case is judged here (each one the
    table's own object for its handle, which a destroyed graph has none of); anything else
    goes to ``table.dep_nodes``, which raises the error naming the node."""
    nodes = table.nodes
    hs = []
    for d in deps:
        if not isinstance(d, Node):
            break
        h = d._h
        if nodes.get(h) is not d or d._raw is REMOVED:
            break
        hs.append(h)
    else:
        if len(hs) < 2 or len(set(hs)) == len(hs):
            return tuple(hs)
    return tuple([int(d) for d in table.dep_nodes(deps)])


def _node_pack(kernel, args, grid, block, shared_mem, graph, deps) -> tuple:
    """The checked judging of ``deps`` and packing of a kernel node (run by the ctypes route of
    ``fast.add_kernel``): ``(pack, dependency handles)``."""
    deps_h = _dep_handles(graph.table, deps) if deps else ()
    return require_kernel(kernel, "add_kernel").pack(args, grid, block, shared_mem), deps_h


@dataclass(frozen=True)
class KernelParams:
    """What a kernel node launches."""

    kernel_name: str
    grid: tuple
    block: tuple
    shared_mem: int
    args: dict = field(default_factory=dict)


def pack_arguments(pack: ArgPack) -> list[bytes]:
    """Each argument's bytes as ``pack`` (a packed launch) holds them, in parameter order."""
    layout = pack.layout
    return [bytes(pack.buf[o:o + p.size]) for o, p in zip(layout.offsets, layout.params)]


def _dim(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return "(" + ",".join(str(x) for x in d) + ")" if len(d) > 1 else str(d[0])


def _dim3(d) -> str:
    d = tuple(d) + (1, 1, 1)
    return f"({d[0]},{d[1]},{d[2]})"


class KernelNode(KernelSites, Node, KernelFile):
    """A kernel launch node (``cudaGraphAddKernelNode``).

    A node built here carries its packed launch (the kernel, the argument values by name);
    a kernel node read back from the driver (captured from PyTorch, CuPy, a library) is a
    :class:`~pycudagraph.nodes.captured_kernel.CapturedKernelNode`, whose arguments are
    bytes addressed by index.
    """

    type = NodeType.KERNEL
    __slots__ = ("_pack",)

    def __init__(self, table, h: int, pack=None):
        self._table = table  # what Node.__init__ sets, without its call: one node per add
        self._h = h
        self._raw = None
        self._pack = pack  # the ArgPack the node was built (or last set) with

    @classmethod
    def build(cls, table, deps, kernel, grid, block, args=(), shared_mem: int = 0,
             **attributes) -> "KernelNode":
        """Pack the launch and call ``cuGraphAddKernelNode`` (the driver twin of
        ``cudaGraphAddKernelNode``) with a ``CUDA_KERNEL_NODE_PARAMS_v2`` naming the
        kernel's ``CUfunction``; its argument slots live in the node's stable buffer.

        Attributes given (not ``None``) are set with ``cudaGraphKernelNodeSetAttribute``;
        they are all checked before the node is added.
        """
        todo = ([_attrs.prepare(k, v) for k, v in attributes.items() if v is not None]
                if attributes else ())
        if type(deps) is not tuple and type(deps) is not list:
            deps = table.dep_nodes(deps)  # None, one node, generators ...: checked
        elif table.closed or table.dead:
            table.refuse()
        try:
            hot = kernel._hot
        except AttributeError:  # not a Kernel: the checked packing says so
            hot = None
        h, pack = _add_kernel(hot, grid, block, args, shared_mem, table.h, deps, table.nodes,
                              kernel, table.graph_ref(), _node_pack)
        node = _new(cls)  # cls(...) less the type call; table.register without its calls
        node.__init__(table, h, pack)
        _register_node(table, node, pack)  # NodeTable.register's bookkeeping
        if todo:
            try:
                for attr, value in todo:
                    call(rt.cudaGraphKernelNodeSetAttribute, node.handle, attr, value)
            except Exception:
                table.graph.remove_node(node)  # no half-configured node stays behind
                raise
            window = attributes.get("access_policy")
            if window is not None:
                table.keep_also(node, window.base)
        return node

    def driver_params(self):
        """The node's ``CUDA_KERNEL_NODE_PARAMS`` as the driver holds them, a fresh read
        (``cuGraphKernelNodeGetParams``)."""
        self.check_live()
        context.ensure_device()  # a driver call: this thread needs a current context
        return call(dr.cuGraphKernelNodeGetParams, dr.CUgraphNode(self._h))

    @property
    def kernel_name(self) -> str:
        """The kernel's name. No CUDA call for a node built here."""
        return self._pack.kernel.name

    @property
    def mangled_name(self) -> str:
        """The name in the kernel image. No CUDA call for a node built here."""
        return self._pack.kernel.symbol

    @property
    def function(self) -> int:
        """The ``CUfunction`` (or ``CUkernel``) handle the node launches, as an int. No CUDA
        call for a node built here (its packed header names it)."""
        return self._pack.func

    @property
    def arg_bytes(self) -> tuple:
        """``(offset, bytes)`` of each argument as the node passes it, ``offset`` being its
        place in the kernel's parameter space (``cuKernelGetParamInfo``, once per kernel;
        where the driver cannot tell, :meth:`Kernel.param_offsets`, as ``pack_args`` places
        them)."""
        pack = self._pack
        layout, raw = pack.layout, pack.raw()
        sizes = layout.param_sizes  # per kernel parameter: an argument may fill several, or none
        image = pack.kernel.image_params
        offsets = ([off for off, _ in image] if image is not None and len(image) == len(sizes)
                   else pack.kernel.param_offsets())
        return tuple((off, raw[o:o + n])
                     for off, o, n in zip(offsets, layout.pointer_offsets, sizes))

    @property
    def kernel(self):
        """The :class:`~pycudagraph.Kernel` the node launches (``None`` for a kernel node read
        back from the driver). No CUDA call."""
        return self._pack.kernel

    @property
    def params(self) -> KernelParams:
        """Kernel name, grid, block, dynamic shared memory and the arguments by name.
        No CUDA call for a node built here."""
        grid, block, smem = self._pack.dims
        names = [p.name for p in self._pack.layout.params]
        return KernelParams(self.kernel_name, grid, block, smem,
                            dict(zip(names, self._pack.values())))

    @property
    def arguments(self) -> list[bytes]:
        """Each argument's bytes as the graph holds them, by index (as
        :attr:`CapturedKernelNode.arguments <pycudagraph.CapturedKernelNode.arguments>` reads
        them for a kernel node read back). No CUDA call for a node built here."""
        return pack_arguments(self._pack)

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
        self.check_live()
        if seen.multi and args is not None:  # DeviceBuffers of the node's device (or peers)
            args = self._pack.kernel.check_node_args(self._pack, args, "set_params")
        pack = self._pack.updated(args, grid, block, shared_mem)
        if grid is not None or block is not None or shared_mem is not None:
            pack.kernel.check_node_config(pack, *pack.dims)  # the node's function, its device
        fast.kernel_node_set_params(self, pack)
        self._pack = pack
        self._table.register(self, pack, *self._table.kept(self)[1:])

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
            self._table.keep_also(self, value.base)

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

    def exec_record(self, exec_raw, source: tuple, retire) -> ExecNode:
        """The exec's record of this node, with its own copy of the packed launch the node
        had when the exec took it (so a per-node update rewrites the exec's copy only). No
        CUDA call, unless its twin was not built here (``cuGraphKernelNodeGetParams``)."""
        rec = ExecNode(self, exec_raw, source, retire)
        pack = source[0] if source and type(source[0]) is ArgPack else None
        if pack is None:  # its twin was not built here: the arguments are bytes by index
            rec.args = CapturedArgs.of(self)
        else:
            rec.args = pack.copy()
        return rec

    def exec_set(self, rec: ExecNode, args=None, grid=None, block=None, shared_mem=None,
                  **attributes) -> None:
        """``cuGraphExecKernelNodeSetParams`` with the exec's own copy of the node's pack."""
        unknown = [k for k in attributes if k not in _attrs.ATTRIBUTES]
        if unknown:
            raise ArgumentError(f"set_params: KernelNode has no field "
                                f"{', '.join(map(repr, unknown))}; its fields are "
                                "['args', 'grid', 'block', 'shared_mem']")
        if attributes:
            raise ArgumentError(
                f"an exec has no per-node attribute call ({', '.join(attributes)}): set it on "
                "the graph node with node.set_attribute(...) and apply it with exe.update(graph)")
        pack = rec.args
        if type(pack) is not ArgPack:  # bytes by index (its twin was captured)
            return pack.exec_set(rec, args, grid, block, shared_mem)
        if (grid is None and block is None and shared_mem is None and not seen.multi and
                (type(args) is tuple or type(args) is list)):
            return exec_set_args(rec, args)  # every argument, packed by the compiled route
        if seen.multi and args is not None:  # DeviceBuffers of the node's device (or peers)
            args = pack.kernel.check_node_args(pack, args, "GraphExec.set_params")
        if grid is not None or block is not None or shared_mem is not None:
            d = pack.dims_with(grid, block, shared_mem)
            pack.kernel.check_node_config(pack, tuple(d[0:3]), tuple(d[3:6]), d[6])
        state = pack.state()
        try:  # a failed update changes nothing: the exec keeps its old arguments
            old_refs = pack.apply(args, grid, block, shared_mem)
            fast.exec_kernel_node_set_params(rec.exec_raw, rec.node_h, pack, self)
        except Exception:
            pack.reset(state)
            raise
        for old in old_refs:
            if type(old) not in _PLAIN:
                rec.retire(old)

    def describe(self) -> str:
        """One line: kernel name, grid and block (``cuGraphKernelNodeGetParams`` for a
        node not built here)."""
        p = self.params
        return f"kernel {p.kernel_name} grid={_dim(p.grid)} block={_dim(p.block)}"

    # Facets (:mod:`pycudagraph.nodes.facets`): fields, exec_fields, label, work --------

    #: What :meth:`exec_set` takes of :meth:`fields` (``cuGraphExecKernelNodeSetParams``).
    exec_fields = frozenset({"grid", "block", "shared_mem", "args"})
    can_disable = True
    in_conditional_body = True
    exec_call = "cuGraphExecKernelNodeSetParams"
    port_edges = True

    def fields(self) -> dict:
        """``function``, ``grid``, ``block``, ``shared_mem`` and ``args`` (by name); the
        name is :meth:`label` (a name is no field: a built and a captured node launching
        one function name it differently), the addresses :meth:`sites`. No CUDA call for a
        node built here."""
        p = self.params
        return {"function": self.function, "grid": tuple(p.grid), "block": tuple(p.block),
                "shared_mem": int(p.shared_mem), "args": dict(p.args)}

    def listing(self) -> str:
        """``name<<<grid, block, shared_mem>>> func=0x...`` (``cuGraphKernelNodeGetParams``
        for a node not built here)."""
        p = self.params
        return (f"{p.kernel_name}<<<{_dim3(p.grid)}, {_dim3(p.block)}, {p.shared_mem}>>> "
                f"func=0x{self.function:x}")

    def label(self) -> str:
        """The kernel's name (``"kernel"`` where it cannot be read). No CUDA call for a
        node built here (``cuFuncGetName`` for one read back)."""
        try:
            return self.kernel_name
        except PyCudaGraphError:
            return str(self.type)

    def work(self) -> tuple:
        """``("kernel", {mangled name, name})``: what a profiler's kernel record shows (no
        names where they cannot be read). No CUDA call for a node built here
        (``cuFuncGetName`` for one read back)."""
        try:
            return "kernel", {n for n in (self.mangled_name, self.kernel_name) if n}
        except (PyCudaGraphError, AttributeError, TypeError):  # unreadable, or no launch kept
            return "kernel", set()


def exec_set_arg(rec: ExecNode, index_or_name, value) -> None:
    """One argument of a kernel node in an exec (``cuGraphExecKernelNodeSetParams``): one slot
    of the exec's own argument storage is rewritten; the value it replaced is retired. The
    argument is named by index or name (resolved by ``fast.set_arg``, which raises naming a
    key that is neither)."""
    pack = rec.args
    if type(pack) is not ArgPack:  # bytes by index (read back from the driver)
        pack.exec_set_arg(rec, index_or_name, value)
        return
    if seen.multi:  # the value's device against the node's
        i = pack.layout.slot_index(index_or_name)
        pack.kernel.check_node_args(pack, {i: value}, "set_arg")
    old = _set_arg(rec.exec_h, rec.node_h, pack.layout.hot, pack.address, pack.refs,
                   index_or_name, value, pack, rec.exec_raw, rec.node)
    if old is not None:  # a queued launch may still read it
        rec.retire(old)


def exec_set_args(rec: ExecNode, args) -> None:
    """Every argument of a kernel node in an exec (``cuGraphExecKernelNodeSetParams``):
    ``args`` (a sequence) is converted and written into the exec's own argument storage,
    through the same plan as a node add; the values replaced are retired. A refused value
    or call changes nothing."""
    pack = rec.args
    if (seen.multi or type(pack) is not ArgPack or
            (type(args) is not tuple and type(args) is not list)):
        # several devices (the values' devices are checked there), bytes by index, a dict
        # or an iterator: the general path
        rec.node.exec_set(rec, args=args)
        return
    olds = _set_args(rec.exec_h, rec.node_h, pack.layout.hot, pack.address, pack.refs, args, pack,
                     rec.exec_raw, rec.node)
    if olds is not None:
        for old in olds:
            if old is not None:  # a queued launch may still read it
                rec.retire(old)


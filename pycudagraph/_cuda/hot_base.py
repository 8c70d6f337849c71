"""The hot path's base types in Python: the twins of the C extension's ``ExecBase``,
``ExecNodeBase``, ``ArgPackBase``, ``LayoutBase`` (``_native_types.c``), ``KernelBase`` and
``GraphBase`` (``_native_method.c``), with the same attribute names and methods.
:mod:`pycudagraph._cuda.fast` hands out one family or the other (``fast.ExecBase`` ...):
these with ``PYCUDAGRAPH_NO_NATIVE=1`` or where the extension is not built. ``GraphExec``,
``ExecNode``, ``ArgPack``, ``Layout``, ``Kernel`` and ``Graph`` extend them.

Each base holds exactly what a launch and an argument update read. ``ExecBase.launch`` does
the common case (the held launch) and hands anything else to the subclass's checked method,
``_launch_checked``, as the C method does; ``set_arg`` and ``set_params`` hand every call to
``_set_arg_checked`` and ``_set_params_checked`` (on this route the common update is Python
code either way, through ``nodes/kernel_node.py``'s ``exec_set_arg`` / ``exec_set_args``).
So do ``KernelBase.launch`` and ``GraphBase.add_kernel``, to ``_launch_checked`` and
``_add_kernel_checked``. See ``docs/HOT_PATH.md``.
"""

from __future__ import annotations

from . import routes

__all__ = ["ExecBase", "ExecNodeBase", "ArgPackBase", "LayoutBase", "KernelBase", "GraphBase",
           "Plan", "register_node", "node_live", "live_rule"]

_launch_graph = routes.launch_graph
_host_errors = routes.host_errors


class ArgPackBase:
    """What a launch or an argument update reads of a packed kernel launch; ArgPack
    extends it."""

    __slots__ = ("layout", "buf", "address", "refs", "kernel")


def register_node(table, node, *keep):
    """``NodeTable.register``'s bookkeeping (the twin of ``_native_nodes.c``'s ``record``):
    ``table.nodes[int(node)] = node`` and the ledger holds ``(node, *keep)`` under
    ``id(node)`` (``Ledger.hold`` copies a shared dict and lets waiting frees retry);
    returns ``node``."""
    table.nodes[int(node)] = node
    table.ledger.hold(id(node), node, *keep)
    return node


# What node_live reads (the twin of the slots ``_native_lookup.c``'s ``node_live`` reads):
# the removed-mark and table descriptors' getters, the mark, the table class and its
# ``dead`` getter; set by ``fast.node_slots`` / ``fast.table_slots`` (live_rule).
_get_raw = _get_table = _get_dead = _removed = _table_cls = None


def live_rule(*, raw=None, removed=None, table=None, table_cls=None, dead=None) -> None:
    """Hand over what :func:`node_live` reads: the node class's ``raw`` slot (member
    descriptor) and ``removed`` mark, or its ``table`` slot, the table class and its
    ``dead`` slot."""
    global _get_raw, _removed, _get_table, _table_cls, _get_dead
    if raw is not None:
        _get_raw, _removed = raw.__get__, removed
    if table is not None:
        _get_table, _table_cls, _get_dead = table.__get__, table_cls, dead.__get__


def node_live(node) -> bool:
    """``Node.live``'s rule (the twin of ``node_live`` in ``_native_lookup.c``): a node not
    marked removed whose table's reason for being gone is ``""``; False for anything else
    (a descriptor's getter refuses an object of another type)."""
    try:
        if _get_raw(node) is _removed:
            return False
        table = _get_table(node)
        return type(table) is _table_cls and _get_dead(table) == ""
    except (TypeError, AttributeError):
        return False


class Plan:
    """``Plan(*, plan, converters, names=None, layout=None)``: the compiled route's view of a
    layout (``names``: parameter name -> index) or of a kernel (``layout``), with named,
    read-only members; the twin of the extension's ``Plan`` (``_native_plan.c``)."""

    __slots__ = ("plan", "converters", "names", "layout")

    def __init__(self, *, plan: bytes, converters: tuple, names=None, layout=None) -> None:
        if type(plan) is not bytes or type(converters) is not tuple:
            raise TypeError("Plan: plan= (bytes) and converters= (a tuple) are required")
        if hasattr(self, "plan"):
            raise TypeError("Plan: a plan is made once (its members are read-only)")
        for name, value in (("plan", plan), ("converters", converters), ("names", names),
                            ("layout", layout)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"Plan.{name} is read-only")

    def __delattr__(self, name):
        raise AttributeError(f"Plan.{name} is read-only")


class LayoutBase:
    """What an argument update reads of a kernel's argument layout (``hot``, its
    :class:`Plan`); Layout extends it."""

    __slots__ = ("hot",)


class ExecNodeBase:
    """What an argument update reads of an exec's record of a node; ExecNode extends it."""

    __slots__ = ("node", "node_h", "exec_raw", "exec_h", "args", "retire")


class ExecBase:
    """What an exec's launch and argument updates read (the handle, the last stream, the
    launch block, the records), and those calls; GraphExec extends it."""

    __slots__ = ("_h", "_last_stream", "_block", "_nodes")

    def launch(self, stream=None) -> None:
        """Launch the graph on ``stream`` (``cuGraphLaunch``, i.e. ``cudaGraphLaunch``).

        Raises the first pending exception of one of this exec's host nodes, and
        ``PyCudaGraphError(reason)`` while launches are blocked (``block_launches``).

        Parameters
        ----------
        stream : Stream or stream-like, optional
            ``None`` is the legacy default stream.
        """
        h = self._h
        if self._block is not None or h is None or _host_errors:
            return self._launch_checked(stream)
        _launch_graph(h, stream, self)  # a closed stream is refused there
        self._last_stream = stream
        return None

    def set_arg(self, node, index_or_name, value) -> None:
        """Change one argument of a kernel node (``cuGraphExecKernelNodeSetParams``).

        Only that argument's slot is rewritten; the exec's next launch uses it. A value
        that is refused leaves the exec's arguments as they were.

        Parameters
        ----------
        node : KernelNode
            A node of the graph the exec was made from (or of its bodies), or its twin
            in a graph given to :meth:`update`.
        index_or_name : int or str
            The kernel parameter, by position or name (by position for a kernel node
            read back from the driver).
        value
            Converted and checked as the kernel's signature says.
        """
        # the ctypes route: the checked method's work is all Python either way
        return self._set_arg_checked(node, index_or_name, value)

    def set_params(self, node, /, **changes) -> None:
        """Change parameters of one node of the exec; fields not given keep their values
        (``cuGraphExecKernelNodeSetParams`` for a kernel node, each node type's
        ``cudaGraphExec*NodeSetParams``: the table in ``GraphExec._set_params_checked``).
        A refused change leaves the exec as it was."""
        return self._set_params_checked(node, **changes)


class KernelBase:
    """What an eager launch reads of a kernel (``_hot``, its :class:`Plan`), and the launch;
    Kernel extends it."""

    __slots__ = ("_hot",)

    def launch(self, grid, block, args=(), stream=None, shared_mem: int = 0) -> None:
        """Launch the kernel now (``cuLaunchKernel``, the driver twin of ``cudaLaunchKernel``):
        see ``Kernel._launch_checked`` for the parameters, errors and devices."""
        return self._launch_checked(grid, block, args, stream, shared_mem)


class GraphBase:
    """What a kernel-node add reads of a graph (its node table), and the add; Graph
    extends it."""

    __slots__ = ("table",)

    def add_kernel(self, kernel, grid, block, args=(), shared_mem: int = 0, deps=(), *,
                   priority=None, cluster=None, cooperative=None, access_policy=None,
                   mem_sync_domain=None, device_updatable=None):
        """Add a kernel launch node (``cuGraphAddKernelNode``, i.e. ``cudaGraphAddKernelNode``).

        Parameters
        ----------
        kernel : Kernel
        grid, block : int or tuple of up to 3 ints
        args : sequence
            One value per kernel parameter (packed from the kernel's signature).
        shared_mem : int
            Dynamic shared memory in bytes.
        deps : sequence of Node
        priority, cluster, cooperative, access_policy, mem_sync_domain, device_updatable
            Kernel-node attributes, set with ``cudaGraphKernelNodeSetAttribute`` when not
            ``None`` (:mod:`pycudagraph.nodes.attributes`; ``node.attributes`` reads them).
        """
        return self._add_kernel_checked(
            kernel, grid, block, args, shared_mem, deps, priority=priority, cluster=cluster,
            cooperative=cooperative, access_policy=access_policy,
            mem_sync_domain=mem_sync_domain, device_updatable=device_updatable)

"""Repoint an exec's kernel arguments from one device address to another: ``exe.rebind(old, new)``.

Every 8-byte aligned slot holding the old address is patched, inside struct arguments too
(library kernels take their pointers inside by-value structs), in each kernel node's
record of the exec (:class:`~pycudagraph.nodes.exec_node.ExecNode`), with
``cuGraphExecKernelNodeSetParams``. Nodes built here are patched argument by argument
through :meth:`GraphExec.set_arg`, so their kept values follow.
"""

from __future__ import annotations

from ..compile.args import ArgPack
from ..errors import ArgumentError, PyCudaGraphError
from ..nodes import KernelNode
from ..nodes.captured_args import patch_slots
from ..runtime.pointers import device_pointer

__all__ = ["rebind"]


def rebind(exe, old, new, missing_ok: bool = False) -> int:
    """Patch every kernel-node argument slot of ``exe`` holding device address ``old`` to
    ``new`` (``cuGraphExecKernelNodeSetParams``); returns how many slots were patched.

    Raises
    ------
    ArgumentError
        ``old`` is null, or (unless ``missing_ok``) no argument holds it.
    """
    exe.handle  # noqa: B018 - a closed exec raises ClosedError here
    graph = exe.graph
    if graph is None:
        raise PyCudaGraphError("rebind needs the exec's graph: wrap it with "
                               "GraphExec.wrap(handle, graph=Graph.wrap(graph_handle))")
    a, b = device_pointer(old), device_pointer(new)
    if not a:
        raise ArgumentError("rebind: old is a null pointer")
    count = 0
    for node in graph.nodes:
        if isinstance(node, KernelNode):
            count += _rebind_node(exe, node, a, b, new)
    if not count and not missing_ok:
        raise ArgumentError(f"rebind: no kernel argument of {exe!r} holds 0x{a:x} "
                            "(pass missing_ok=True to allow that)")
    return count


def _rebind_node(exe, node, a: int, b: int, new) -> int:
    rec = exe.exec_node(node)
    args = rec.args
    if type(args) is ArgPack:  # built here: through set_arg, so the kept values follow
        n = 0
        for i, v in enumerate(args.values()):
            if isinstance(v, int) and v == a and args.layout.slots[i].size == 8:
                exe.set_arg(node, i, new)
                n += 1
            elif isinstance(v, bytes):
                data, k = patch_slots(v, 0, a, b)
                if k:
                    exe.set_arg(node, i, data)
                    n += k
        return n
    patched, n = {}, 0
    for i, (offset, _) in enumerate(args.info):
        data, k = patch_slots(args.get(i), offset, a, b)
        if k:
            patched[i] = data
            n += k
    if patched:
        args.exec_set(rec, args=patched)
        if not isinstance(new, int):
            rec.hold(("rebind", b), new)
    return n

"""Repoint an exec from one device address to another: ``exe.rebind(old, new)``.

Every site of the exec's graph holding the old address is rewritten: each kernel argument
slot (every 8-byte aligned slot, inside struct arguments too: library kernels take their
pointers inside by-value structs), copy side, memset destination or other node's site, as
the exec holds it (:meth:`Node.exec_sites <pycudagraph.nodes.base.Node.exec_sites>`), in
the graph and its conditional bodies (one walk,
:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`). Each is written by its
node's one writer, :meth:`Node.write_site <pycudagraph.nodes.base.Node.write_site>`, through
the exec's record of the node (:class:`~pycudagraph.nodes.exec_node.ExecNode`), so the
exec's copy of the arguments and what it keeps alive follow.

All or nothing: every site is found and checked before the first call, and if a call still
fails (the driver refuses one node) the sites already written are put back, so the exec
launches with its old addresses.
"""

from __future__ import annotations

from ..errors import ArgumentError, PyCudaGraphError
from ..nodes.base import Node
from ..runtime.pointers import device_pointer
from ..runtime.values import bool_arg

__all__ = ["rebind", "exec_walk"]


def rebind(exe, old, new, missing_ok: bool = False) -> int:
    """Point every site of ``exe`` holding device address ``old`` at ``new``
    (``cuGraphExecKernelNodeSetParams`` for kernel argument slots,
    ``cudaGraphExecMemcpyNodeSetParams1D`` / ``cudaGraphExecMemsetNodeSetParams`` for
    copies and memsets); returns how many sites were rewritten.

    Raises
    ------
    ArgumentError
        ``old`` is null, ``new`` cannot be an argument, a node holding ``old`` has no way
        to change it in an exec, or (unless ``missing_ok``) no site holds ``old``. Nothing
        is changed then, nor when a call fails.
    """
    missing_ok = bool_arg(missing_ok, "rebind: missing_ok")
    exe.handle  # noqa: B018 - a closed exec raises ClosedError here
    graph = exe.graph
    if graph is None:
        raise PyCudaGraphError("rebind needs the exec's graph: wrap it with "
                               "GraphExec.wrap(handle, graph=Graph.wrap(graph_handle))")
    a, b = device_pointer(old), device_pointer(new)
    if not a:
        raise ArgumentError("rebind: old is a null pointer")
    plan = _plan(exe, graph, a)
    if not plan and not missing_ok:
        raise ArgumentError(f"rebind: no kernel argument or other site of {exe!r} holds "
                            f"0x{a:x} (pass missing_ok=True to allow that)")
    done = []
    try:
        for step in plan:
            node, rec, sites = step
            node.write_sites(rec, [(s, b) for s in sites])  # one call for a kernel node
            done.append(step)
    except BaseException as exc:
        _undo(done, a, exc)
        raise
    if not isinstance(new, int):  # the object stays alive with each record pointing at it
        for _, rec, _ in plan:
            rec.hold(("rebind", b), new)
    return sum(len(sites) for _, _, sites in plan)


def _plan(exe, graph, a: int) -> list[tuple]:
    """``(node, record, sites)`` of each node whose sites hold ``a`` as the exec holds
    them, in the graph and the bodies an exec changes node by node (not inside a child
    graph, which an exec replaces as a whole). A node whose sites cannot be read is passed over; one holding
    ``a`` with no writer is refused before any change."""
    plan = []
    for node, settable in exec_walk(graph):
        if not settable:
            continue
        try:
            rec = exe.exec_node(node)
            sites = [s for s in node.exec_sites(rec) if s.role == "use" and s.address == a]
        except PyCudaGraphError:
            continue  # arguments in 'extra', bodies the driver cannot show: not rebindable
        if sites and type(node).write_site is Node.write_site:
            raise ArgumentError(f"rebind: {node!r} holds 0x{a:x} at {sites[0].place}, which "
                                "an exec cannot change node by node")
        if sites:
            plan.append((node, rec, sites))
    return plan


def exec_walk(graph):
    """``(node, settable)`` for every node of ``graph`` and its inner graphs (the one walk,
    :meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`): ``settable`` unless
    the node is inside an inner graph an exec takes only as a whole (a child graph's), not
    node by node (a conditional node's bodies, which it runs any number of times)."""
    settable: dict = {}
    for node, _depth, owner in graph.table.walk():
        ok = owner is None or (settable.get(id(owner), True) and owner.repeats_bodies)
        settable[id(node)] = ok
        yield node, ok


def _undo(done: list, a: int, exc: BaseException) -> None:
    """Put back the address ``a`` at the sites in ``done`` (newest first); a failure here is
    noted on ``exc``, the error the caller sees."""
    for node, rec, sites in reversed(done):
        try:
            node.write_sites(rec, [(s, a) for s in sites])
        except Exception as undo_exc:  # noqa: BLE001 - report, keep undoing the others
            note = getattr(exc, "add_note", None)
            if note is not None:
                note(f"rebind could not put back a site it had written: {undo_exc}")

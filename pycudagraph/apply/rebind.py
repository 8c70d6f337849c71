"""Repoint an exec's kernel arguments from one device address to another: ``exe.rebind(old, new)``.

Every 8-byte aligned slot holding the old address is patched, inside struct arguments too
(library kernels take their pointers inside by-value structs), in each kernel node's
record of the exec (:class:`~pycudagraph.nodes.exec_node.ExecNode`), with
``cuGraphExecKernelNodeSetParams``. Nodes built here are patched argument by argument
through :meth:`GraphExec.set_arg`, so their kept values follow.

All or nothing: every change is worked out and checked before the first call, and if a
call still fails (the driver refuses one node) the nodes already patched are put back,
so the exec launches with its old arguments.
"""

from __future__ import annotations

from ..compile.args import ArgPack
from ..errors import ArgumentError, ClosedError, PyCudaGraphError
from ..nodes import KernelNode
from ..nodes.captured_args import patch_slots
from ..runtime.pointers import device_pointer
from ..runtime.values import bool_arg

__all__ = ["rebind"]


def rebind(exe, old, new, missing_ok: bool = False) -> int:
    """Patch every kernel-node argument slot of ``exe`` holding device address ``old`` to
    ``new`` (``cuGraphExecKernelNodeSetParams``); returns how many slots were patched.

    Raises
    ------
    ArgumentError
        ``old`` is null, ``new`` cannot be an argument, or (unless ``missing_ok``) no
        argument holds ``old``. Nothing is changed then, nor when a call fails.
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
    plan = [step for node in graph.nodes if isinstance(node, KernelNode)
            for step in _plan(exe, node, a, b, new)]
    count = sum(step[-1] for step in plan)
    if not count and not missing_ok:
        raise ArgumentError(f"rebind: no kernel argument of {exe!r} holds 0x{a:x} "
                            "(pass missing_ok=True to allow that)")
    done = []
    try:
        for step in plan:
            _apply(exe, step, new)
            done.append(step)
    except BaseException as exc:
        _undo(exe, done, exc)
        raise
    return count


def _plan(exe, node, a: int, b: int, new) -> list[tuple]:
    """The changes one node needs, each checked: ``("arg", node, i, value, before, n)`` for a
    node built here, ``("bytes", rec, {i: data}, {i: before}, n)`` for one read back."""
    rec = exe.exec_node(node)
    args = rec.args
    if type(args) is ArgPack:  # built here: through set_arg, so the kept values follow
        layout, steps = args.layout, []
        for i, v in enumerate(args.values()):
            if isinstance(v, int) and v == a and layout.slots[i].size == 8:
                value, n = new, 1
            elif isinstance(v, bytes):
                value, n = patch_slots(v, 0, a, b)
                if not n:
                    continue
            else:
                continue
            layout.encode(i, value)  # a value the slot refuses is refused before any change
            before = args.refs[i]
            steps.append(("arg", node, i, value, (before, v), n))
        return steps
    patched, before, n = {}, {}, 0
    for i, (offset, _) in enumerate(args.info):
        data, k = patch_slots(args.get(i), offset, a, b)
        if k:
            patched[i], before[i] = data, args.get(i)
            n += k
    return [("bytes", rec, patched, before, n)] if patched else []


def _apply(exe, step, new) -> None:
    if step[0] == "arg":
        _, node, i, value, _, _ = step
        exe.set_arg(node, i, value)
    else:
        _, rec, patched, _, _ = step
        rec.args.exec_set(rec, args=patched)
        if not isinstance(new, int):
            rec.hold(("rebind", device_pointer(new)), new)


def _undo(exe, done: list, exc: BaseException) -> None:
    """Put back what the steps in ``done`` changed (newest first); a failure here is noted
    on ``exc``, the error the caller sees."""
    for step in reversed(done):
        try:
            if step[0] == "arg":
                _, node, i, _, (obj, raw), _ = step
                try:
                    exe.set_arg(node, i, obj)
                except ClosedError:  # freed since (its cudaFree deferred): the address
                    exe.set_arg(node, i, raw)
            else:
                _, rec, _, before, _ = step
                rec.args.exec_set(rec, args=before)
        except Exception as undo_exc:  # noqa: BLE001 - report, keep undoing the others
            note = getattr(exc, "add_note", None)
            if note is not None:
                note(f"rebind could not put back a node it had patched: {undo_exc}")

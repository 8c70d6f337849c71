"""How an exec is made, apart from the exec object: the instantiate flags, the call that says
why the driver refused, and the finalizer of a handle that is not there yet.

:meth:`GraphExec.instantiate <pycudagraph.graph.exec.GraphExec.instantiate>` makes the driver
call ``cuGraphInstantiateWithFlags`` (``cudaGraphInstantiateWithFlags``) through the hot-call
layer; where the driver refuses, or an upload stream is given,
``cudaGraphInstantiateWithParams`` makes the exec or explains the refusal.
"""

from __future__ import annotations

from .._cuda import call, rt
from ..errors import CudaError
from ..runtime.values import bool_arg
from .introspect import INSTANTIATE_FLAGS

__all__ = ["instantiate_flags", "instantiate_with_params", "destroy_boxed"]

_F = rt.cudaGraphInstantiateFlags


def instantiate_flags(auto_free_on_launch, device_launch, use_node_priority, upload: bool) -> int:
    """The ``cudaGraphInstantiateFlags`` of :meth:`Graph.instantiate`'s options (each checked
    to be a bool), with ``cudaGraphInstantiateFlagUpload`` if ``upload``."""
    flags = int(_F.cudaGraphInstantiateFlagUpload) if upload else 0
    if auto_free_on_launch is False and device_launch is False and use_node_priority is False:
        return flags
    given = {"auto_free_on_launch": auto_free_on_launch, "device_launch": device_launch,
             "use_node_priority": use_node_priority}
    for bit, name in INSTANTIATE_FLAGS.items():
        if bool_arg(given[name], f"instantiate: {name}"):
            flags |= bit
    return flags


def instantiate_with_params(graph, flags: int, upload_h=None):
    """``cudaGraphInstantiateWithParams``: the ``cudaGraphExec_t`` (uploaded on stream
    ``upload_h`` when given), or the :class:`CudaError` with the driver's result code and
    the failing node."""
    params = rt.cudaGraphInstantiateParams()
    params.flags = flags
    if upload_h is not None:
        params.uploadStream = upload_h
    try:
        return call(rt.cudaGraphInstantiateWithParams, graph.handle, params)
    except CudaError as exc:
        hint = f"result: {params.result_out.name}"
        bad = graph.find_node(params.errNode_out) if int(params.errNode_out) else None
        if bad is not None:
            hint += f"; failing node: {bad.describe()}"
        raise exc.set_hint(hint)


def destroy_boxed(box: list) -> None:
    """``cudaGraphExecDestroy`` of the handle in ``box[0]``; nothing while it holds none (the
    finalizer an exec registers before its instantiate call has filled the box)."""
    if box[0]:
        rt.cudaGraphExecDestroy(box[0])

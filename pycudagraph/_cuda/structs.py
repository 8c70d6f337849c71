"""Byte layouts of the driver structs the hot calls pass by address.

``CUDA_KERNEL_NODE_PARAMS_v2`` is what ``cuGraphAddKernelNode``, ``cuGraphKernelNodeSetParams``
and ``cuGraphExecKernelNodeSetParams`` read; :mod:`pycudagraph.compile.args` writes it with one
``struct.pack_into``. Field offsets are named here once.
"""

from __future__ import annotations

import ctypes
import struct

__all__ = ["KERNEL_NODE_PARAMS_FORMAT", "KERNEL_NODE_PARAMS_SIZE", "DIMS_OFFSET",
           "KERNEL_PARAMS_FIELD", "ExecUpdateResultInfo"]

#: ``CUDA_KERNEL_NODE_PARAMS_v2`` for ``struct``: func, gridDim xyz, blockDim xyz,
#: sharedMemBytes, (4 bytes padding), kernelParams, extra, kern, ctx.
KERNEL_NODE_PARAMS_FORMAT = "<Q7I4xQQQQ"
KERNEL_NODE_PARAMS_SIZE = struct.calcsize(KERNEL_NODE_PARAMS_FORMAT)
assert KERNEL_NODE_PARAMS_SIZE == 72

#: Offset of gridDimX (grid xyz, block xyz and sharedMemBytes follow as 7 uint32).
DIMS_OFFSET = 8
#: Offset of the ``void** kernelParams`` field.
KERNEL_PARAMS_FIELD = 40


class ExecUpdateResultInfo(ctypes.Structure):
    """``CUgraphExecUpdateResultInfo``: why ``cuGraphExecUpdate`` refused, and where.

    (cuda-bindings returns ``None`` for this struct when the call fails, which is the
    one case it matters, so the update goes through :mod:`.fast`.)
    """

    _fields_ = [("result", ctypes.c_int), ("errorNode", ctypes.c_void_p),
                ("errorFromNode", ctypes.c_void_p)]

"""Kernel nodes added in bulk from fixed records: :func:`check_records` (every index and
length, before any node is added) and :func:`add_rest` (the ctypes route: one
``graph.add_kernel`` per node, the twin of the compiled ``_native.add_kernel_nodes``).
:func:`pycudagraph._cuda.fast.add_kernel_nodes` is the entry; see there.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import ArgumentError

__all__ = ["RECORD", "RECORD_WORDS", "check_records", "checked_records", "ready", "add_rest",
           "used_kernels", "arg_length"]

#: One record: kernel index, grid[3], block[3], shared memory, argument offset and length
#: into the argument bytes, first and count of its dependencies: 12 little-endian u32.
RECORD = np.dtype([("kernel", "<u4"), ("grid", "<u4", 3), ("block", "<u4", 3),
                   ("shared_mem", "<u4"), ("arg_offset", "<u4"), ("arg_length", "<u4"),
                   ("dep_first", "<u4"), ("dep_count", "<u4")])
RECORD_WORDS = 12
_WHAT = "add_kernel_nodes"


def arg_length(kernel) -> int:
    """The bytes of a node's arguments for ``kernel``: its Layout's argument slots (from the
    end of the pointer array to the end of the pack)."""
    layout = kernel.layout
    return layout.size - layout.values_offset


def _u32(data, what: str) -> np.ndarray:
    try:
        raw = memoryview(data).cast("B")
    except TypeError:
        raise ArgumentError(f"{_WHAT}: {what} must be a bytes-like object, got "
                            f"{type(data).__name__}") from None
    return raw


def check_records(kernels, recs, argbytes, deps) -> tuple:
    """``(records, deps)`` as numpy arrays, every field checked: kernel indices in range,
    each argument block inside ``argbytes`` and of its kernel's :func:`arg_length`, grid and
    block of at least 1 (at most 1024 threads a block), dependencies inside ``deps`` and each
    to a node made earlier in the call. Raises :class:`ArgumentError` naming the first record
    and field that is wrong. No CUDA call."""
    if type(kernels) is not tuple:
        raise ArgumentError(f"{_WHAT}: kernels must be a tuple, got {type(kernels).__name__}")
    raw, args, dep = _u32(recs, "recs"), _u32(argbytes, "argbytes"), _u32(deps, "deps")
    if len(raw) % RECORD.itemsize:
        raise ArgumentError(f"{_WHAT}: recs is {len(raw)} bytes, not a whole number of "
                            f"{RECORD.itemsize}-byte records")
    if len(dep) % 4:
        raise ArgumentError(f"{_WHAT}: deps is {len(dep)} bytes, not a whole number of u32")
    r = np.frombuffer(raw, RECORD)
    d = np.frombuffer(dep, "<u4")
    n = len(r)
    if not n:
        return r, d

    def first(bad, what) -> None:
        if bad.any():
            i = int(np.argmax(bad))
            raise ArgumentError(f"{_WHAT}: record {i}: {what(i)}")

    k = r["kernel"].astype(np.int64)
    first(k >= len(kernels), lambda i: f"kernel index {k[i]} is out of range "
                                       f"({len(kernels)} kernels)")
    sizes = np.zeros(len(kernels), np.int64)
    for j in np.unique(k).tolist():  # the kernels the records use
        try:
            sizes[j] = arg_length(kernels[j])
        except AttributeError:
            raise ArgumentError(f"{_WHAT}: kernels[{j}] is a {type(kernels[j]).__name__}, "
                                "not a pycudagraph Kernel") from None
    off, length = r["arg_offset"].astype(np.int64), r["arg_length"].astype(np.int64)
    first(off + length > len(args), lambda i: f"arguments at bytes {off[i]}..{off[i] + length[i]}"
                                              f" run past the {len(args)} argument bytes")
    want = sizes[k]
    first(length != want, lambda i: f"{length[i]} argument bytes for kernel "
                                    f"{kernels[k[i]].name!r}, whose arguments take {want[i]}")
    grid, block = r["grid"].astype(np.int64), r["block"].astype(np.int64)
    first((grid < 1).any(axis=1), lambda i: f"grid {tuple(grid[i].tolist())} has a dimension of 0")
    first((block < 1).any(axis=1), lambda i: f"block {tuple(block[i].tolist())} has a dimension of 0")
    first((block > 1024).any(axis=1) | (block.prod(axis=1) > 1024), lambda i: f"block {tuple(block[i].tolist())} is more than 1024 "
                                               "threads")
    df, dc = r["dep_first"].astype(np.int64), r["dep_count"].astype(np.int64)
    first(df + dc > len(d), lambda i: f"dependencies {df[i]}..{df[i] + dc[i]} run past the "
                                      f"{len(d)} in deps")
    total = int(dc.sum())
    if total:
        owner = np.repeat(np.arange(n), dc)
        at = np.repeat(df - (np.cumsum(dc) - dc), dc) + np.arange(total)
        late = d[at] >= owner
        if late.any():
            j = int(np.argmax(late))
            raise ArgumentError(f"{_WHAT}: record {owner[j]}: dependency {d[at[j]]} is not a "
                                "node made earlier in the call")
    return r, d


def used_kernels(r) -> tuple:
    """``(kernel indices, the first record of each)``: the kernels records ``r`` use, as
    lists in increasing order of index. No CUDA call."""
    ks, first = np.unique(r["kernel"], return_index=True)
    return ks.tolist(), first.tolist()


def checked_records(kernels, r, d, used=None) -> tuple:
    """``(r, d)``: records a graph file's check accepted (``files/bulk_format``: kernel
    indices, argument blocks inside the bytes and of the manifest's length for their
    kernel, grid and block, dependencies inside ``deps`` and earlier in their run), with the
    one thing that check could not see: that each kernel the records use (``used``:
    :func:`used_kernels`, found when not given) takes the argument length they give
    (:func:`arg_length`). Raises :class:`ArgumentError` as
    :func:`check_records` does. No CUDA call."""
    if type(kernels) is not tuple:
        raise ArgumentError(f"{_WHAT}: kernels must be a tuple, got {type(kernels).__name__}")
    if not len(r):
        return r, d
    for j, i in zip(*(used or used_kernels(r))):
        if j >= len(kernels):
            raise ArgumentError(f"{_WHAT}: record {i}: kernel index {j} is out of range "
                                f"({len(kernels)} kernels)")
        try:
            want = arg_length(kernels[j])
        except AttributeError:
            raise ArgumentError(f"{_WHAT}: kernels[{j}] is a {type(kernels[j]).__name__}, "
                                "not a pycudagraph Kernel") from None
        if int(r["arg_length"][i]) != want:
            raise ArgumentError(f"{_WHAT}: record {i}: {int(r['arg_length'][i])} argument "
                                f"bytes for kernel {kernels[j].name!r}, whose arguments take "
                                f"{want}")
    return r, d


def ready(kernels, r, used=None) -> None:
    """Each kernel the records use loaded and its launch limits read (``cuFuncGetAttribute``
    once per kernel: ``Kernel.check_config``), checked against its first record (``used``:
    :func:`used_kernels`, found when not given): the
    compiled add then takes every node, and a launch over the limits is refused
    (:class:`ArgumentError`) before any node is added."""
    if not len(r):
        return
    for j, i in zip(*(used or used_kernels(r))):
        g, b = r["grid"][i].tolist(), r["block"][i].tolist()
        kernels[j].check_config(g[0] if g[1:] == [1, 1] else tuple(g),
                                b[0] if b[1:] == [1, 1] else tuple(b), int(r["shared_mem"][i]))


def _values(kernel, data) -> list:
    """The argument values whose packing is ``data`` (the Layout's argument slots)."""
    layout = kernel.layout
    base, out = layout.values_offset, []
    for p, st, off in zip(layout.params, layout.slots, layout.offsets):
        at = off - base
        if p.kind in ("struct", "vector"):
            out.append(bytes(data[at:at + p.size]))
        elif p.kind == "bfloat16":
            bits = struct.unpack_from("<H", data, at)[0]
            out.append(float(np.array([bits << 16], np.uint32).view(np.float32)[0]))
        elif p.kind in ("pointer", "handle"):
            out.append(struct.unpack_from("<Q", data, at)[0])
        else:
            out.append(st.unpack_from(data, at)[0])
    return out


def add_rest(graph, kernels, r, argbytes, d, made: list) -> None:
    """Add nodes ``len(made)`` on of checked records ``r`` through ``graph.add_kernel``
    (``cuGraphAddKernelNode``), appending each to ``made``."""
    args = memoryview(argbytes).cast("B")
    for i in range(len(made), len(r)):
        rec = r[i]
        k = kernels[int(rec["kernel"])]
        off, first, count = int(rec["arg_offset"]), int(rec["dep_first"]), int(rec["dep_count"])
        values = _values(k, args[off:off + int(rec["arg_length"])])
        deps = [made[j] for j in d[first:first + count].tolist()]
        made.append(graph.add_kernel(k, tuple(rec["grid"].tolist()),
                                     tuple(rec["block"].tolist()), values,
                                     int(rec["shared_mem"]), deps))

"""Kernel nodes added in bulk from fixed records: :func:`check_records` (every index and
length, before any node is added) and :func:`add_rest` (the ctypes route: one
``graph.add_kernel`` per node, the twin of the compiled ``_native.add_kernel_nodes``).
:func:`pycudagraph._cuda.fast.add_kernel_nodes` is the entry; see there.
:func:`function_params` writes the params structs of records of library functions (kernels
found by name) for :func:`pycudagraph._cuda.fast.add_function_nodes`.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import ArgumentError
from .structs import KERNEL_NODE_PARAMS_SIZE

__all__ = ["RECORD", "RECORD_WORDS", "check_records", "checked_records", "ready", "add_rest",
           "used_kernels", "arg_length", "function_params", "check_function_records", "spans"]

#: One record: kernel index, grid[3], block[3], shared memory, argument offset and length
#: into the argument bytes, first and count of its dependencies: 12 little-endian u32.
RECORD = np.dtype([("kernel", "<u4"), ("grid", "<u4", 3), ("block", "<u4", 3),
                   ("shared_mem", "<u4"), ("arg_offset", "<u4"), ("arg_length", "<u4"),
                   ("dep_first", "<u4"), ("dep_count", "<u4")])
RECORD_WORDS = 12
_WHAT = "add_kernel_nodes"

#: ``CUDA_KERNEL_NODE_PARAMS_v2`` as numpy sees it (the layout of :mod:`.structs`).
PARAMS = np.dtype([("func", "<u8"), ("dims", "<u4", 7), ("pad", "<u4"), ("kernel_params", "<u8"),
                   ("extra", "<u8"), ("kern", "<u8"), ("ctx", "<u8")])
assert PARAMS.itemsize == KERNEL_NODE_PARAMS_SIZE


def function_params(funcs, starts: list, recs, args: np.ndarray) -> np.ndarray:
    """One buffer with a ``CUDA_KERNEL_NODE_PARAMS_v2`` per record (at ``72 * i``), then the
    argument pointer arrays the structs name, written with whole-array steps (no Python
    work per node): record ``i`` launches ``funcs[k]`` (``k`` its kernel index) with grid,
    block and shared memory from the record, and its arguments at ``args`` + its argument
    offset + ``starts[k]`` (each argument's place in the kernel's argument block). The
    pointers are addresses inside ``args``, which must outlive the driver calls that read
    them; the records are checked by the caller (a graph file's check). No CUDA call."""
    n = len(recs)
    w = np.ascontiguousarray(recs).view("<u4").reshape(n, RECORD_WORDS)
    k = w[:, 0].astype(np.int64)
    counts = np.array([len(s) for s in starts] or [0], np.int64)
    first_of = np.cumsum(counts) - counts  # where kernel k's starts begin in flat
    flat = np.array([x for s in starts for x in s] or [0], np.uint64)
    cnt = counts[k]
    total = int(cnt.sum())
    head = n * PARAMS.itemsize
    buf = np.zeros(head + 8 * total, np.uint8)
    base = buf.ctypes.data
    p = buf[:head].view(PARAMS)
    p["func"] = np.asarray(funcs, np.uint64)[k]
    p["dims"] = w[:, 1:8]
    first = np.cumsum(cnt) - cnt
    p["kernel_params"] = np.where(cnt > 0, base + head + 8 * first, 0).astype(np.uint64)
    if total:
        owner = np.repeat(np.arange(n), cnt)
        j = np.arange(total) - first[owner]
        at = w[owner, 8].astype(np.uint64) + flat[first_of[k[owner]] + j]
        buf[head:].view("<u8")[:] = np.uint64(args.ctypes.data) + at
    return buf


def spans(sizes: list) -> list:
    """``[(start, end), ...]`` of each argument in the block of a library function's
    arguments (its parameters' bytes one after another, as a graph file saves a kernel
    saved by name)."""
    out, at = [], 0
    for size in sizes:
        out.append((at, at + size))
        at += size
    return out


def arg_length(kernel) -> int:
    """The bytes of a node's arguments for ``kernel``: its Layout's argument slots (from the
    end of the pointer array to the end of the pack)."""
    layout = kernel.layout
    return layout.size - layout.values_offset


def _u32(data, what: str, where: str = _WHAT) -> np.ndarray:
    try:
        raw = memoryview(data).cast("B")
    except TypeError:
        raise ArgumentError(f"{where}: {what} must be a bytes-like object, got "
                            f"{type(data).__name__}") from None
    return raw


def _arrays(recs, argbytes, deps, what: str) -> tuple:
    """``(records, argument bytes, deps)`` as numpy arrays of the bytes-like arguments
    (:data:`RECORD`, u8, u32), their sizes checked."""
    raw, args, dep = (_u32(recs, "recs", what), _u32(argbytes, "argbytes", what),
                      _u32(deps, "deps", what))
    if len(raw) % RECORD.itemsize:
        raise ArgumentError(f"{what}: recs is {len(raw)} bytes, not a whole number of "
                            f"{RECORD.itemsize}-byte records")
    if len(dep) % 4:
        raise ArgumentError(f"{what}: deps is {len(dep)} bytes, not a whole number of u32")
    return np.frombuffer(raw, RECORD), args, np.frombuffer(dep, "<u4")


def check_records(kernels, recs, argbytes, deps) -> tuple:
    """``(records, deps)`` as numpy arrays, every field checked: kernel indices in range,
    each argument block inside ``argbytes`` and of its kernel's :func:`arg_length`, grid and
    block of at least 1 (at most 1024 threads a block), dependencies inside ``deps`` and each
    to a node made earlier in the call. Raises :class:`ArgumentError` naming the first record
    and field that is wrong. No CUDA call."""
    if type(kernels) is not tuple:
        raise ArgumentError(f"{_WHAT}: kernels must be a tuple, got {type(kernels).__name__}")
    r, args, d = _arrays(recs, argbytes, deps, _WHAT)
    if not len(r):
        return r, d
    k = r["kernel"].astype(np.int64)
    _first(k >= len(kernels), lambda i: f"kernel index {k[i]} is out of range "
                                        f"({len(kernels)} kernels)", _WHAT)
    sizes = np.zeros(len(kernels), np.int64)
    for j in np.unique(k).tolist():  # the kernels the records use
        try:
            sizes[j] = arg_length(kernels[j])
        except AttributeError:
            raise ArgumentError(f"{_WHAT}: kernels[{j}] is a {type(kernels[j]).__name__}, "
                                "not a pycudagraph Kernel") from None
    _check_fields(r, len(args), d, sizes, lambda j: f"kernel {kernels[j].name!r}", _WHAT)
    return r, d


def check_function_records(funcs: dict, sizes: dict, recs, argbytes, deps) -> tuple:
    """:func:`check_records` for records of library functions (``FunctionRecords``):
    ``funcs`` and ``sizes`` map each kernel index the records use to a ``CUfunction`` (an
    int) and its argument sizes. Returns ``(records, argument bytes, deps)`` as numpy
    arrays and the kernel indices the records use, sorted. Raises :class:`ArgumentError`
    naming the first record and field that is wrong. No CUDA call."""
    what = "FunctionRecords"
    if not isinstance(funcs, dict) or not isinstance(sizes, dict):
        raise ArgumentError(f"{what}: funcs and sizes must be dicts (kernel index -> "
                            f"CUfunction, argument sizes), got {type(funcs).__name__} and "
                            f"{type(sizes).__name__}")
    r, args, d = _arrays(recs, argbytes, deps, what)
    used = sorted(set(r["kernel"].tolist()))
    lengths = np.zeros(used[-1] + 1 if used else 1, np.int64)
    for k in used:
        func, n = funcs.get(k), sizes.get(k)
        if type(func) is not int or not 0 < func < 2**64:
            raise ArgumentError(f"{what}: funcs[{k}] must be a CUfunction (an int), got {func!r}")
        if not isinstance(n, (list, tuple)) or not all(type(x) is int and 0 < x < 2**12
                                                        for x in n):
            raise ArgumentError(f"{what}: sizes[{k}] must be a list of argument sizes in "
                                f"bytes, got {n!r}")
        lengths[k] = sum(n)
    if len(r):
        _check_fields(r, len(args), d, lengths, lambda j: f"function {j}", what)
    return r, args, d, used


def _first(bad, what, where: str) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        raise ArgumentError(f"{where}: record {i}: {what(i)}")


def _check_fields(r, nargs: int, d, sizes, name, where: str) -> None:
    """Each record's argument block inside the ``nargs`` argument bytes and of its kernel's
    length (``sizes[kernel]``; ``name(kernel)`` says which), grid and block, and
    dependencies (inside ``d``, each to an earlier record)."""
    n, k = len(r), r["kernel"].astype(np.int64)
    off, length = r["arg_offset"].astype(np.int64), r["arg_length"].astype(np.int64)
    _first(off + length > nargs, lambda i: f"arguments at bytes {off[i]}..{off[i] + length[i]}"
                                           f" run past the {nargs} argument bytes", where)
    want = sizes[k]
    _first(length != want, lambda i: f"{length[i]} argument bytes for {name(k[i])}, whose "
                                     f"arguments take {want[i]}", where)
    grid, block = r["grid"].astype(np.int64), r["block"].astype(np.int64)
    _first((grid < 1).any(axis=1), lambda i: f"grid {tuple(grid[i].tolist())} has a dimension "
                                             "of 0", where)
    _first((block < 1).any(axis=1), lambda i: f"block {tuple(block[i].tolist())} has a "
                                              "dimension of 0", where)
    _first((block > 1024).any(axis=1) | (block.prod(axis=1) > 1024),
           lambda i: f"block {tuple(block[i].tolist())} is more than 1024 threads", where)
    df, dc = r["dep_first"].astype(np.int64), r["dep_count"].astype(np.int64)
    _first(df + dc > len(d), lambda i: f"dependencies {df[i]}..{df[i] + dc[i]} run past the "
                                       f"{len(d)} in deps", where)
    total = int(dc.sum())
    if total:
        owner = np.repeat(np.arange(n), dc)
        at = np.repeat(df - (np.cumsum(dc) - dc), dc) + np.arange(total)
        late = d[at] >= owner
        if late.any():
            j = int(np.argmax(late))
            raise ArgumentError(f"{where}: record {owner[j]}: dependency {d[at[j]]} is not a "
                                "node made earlier in the call")


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


def _dims(d: list):
    """A 3-dimension launch size as ``check_config`` takes it fastest: an int for 1-D."""
    return d[0] if d[1] == 1 and d[2] == 1 else tuple(d)


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
        kernels[j].check_config(_dims(g), _dims(b), int(r["shared_mem"][i]))


def arg_values(kernel, data) -> list:
    """The argument values whose packing is ``data`` (the Layout's argument slots):
    pointers and handles as ints, structs and vectors as bytes. No CUDA call."""
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


def check_launches(kernels, r, used=None) -> None:
    """Every record's launch within its kernel's limits (``Kernel.check_config``; what the
    driver does not check when a node is added). Judged first for all records at once:
    the largest grid, block and shared memory any record asks for, dimension by dimension,
    against each kernel used; where that does not fit a kernel, each distinct launch of its
    records is judged and the first record whose launch does not fit is named
    (:class:`ArgumentError`). ``used``: :func:`used_kernels`, found when not given.
    ``cuFuncGetAttribute`` once per kernel."""
    if not len(r):
        return
    grid, block, smem = r["grid"], r["block"], r["shared_mem"]
    top = (_dims(grid.max(axis=0).tolist()), _dims(block.max(axis=0).tolist()), int(smem.max()))
    for j in (used or used_kernels(r))[0]:
        try:
            kernels[j].check_config(*top)
            continue
        except ArgumentError:
            pass
        seen = set()
        for at in np.flatnonzero(r["kernel"] == j).tolist():
            launch = (_dims(grid[at].tolist()), _dims(block[at].tolist()), int(smem[at]))
            if launch not in seen:
                seen.add(launch)
                try:
                    kernels[j].check_config(*launch)
                except ArgumentError as exc:
                    raise ArgumentError(f"{_WHAT}: record {at}: {exc}") from None


def add_rest(graph, kernels, r, argbytes, d, made: list) -> None:
    """Add nodes ``len(made)`` on of checked records ``r`` through ``graph.add_kernel``
    (``cuGraphAddKernelNode``), appending each to ``made``."""
    args = memoryview(argbytes).cast("B")
    for i in range(len(made), len(r)):
        rec = r[i]
        k = kernels[int(rec["kernel"])]
        off, first, count = int(rec["arg_offset"]), int(rec["dep_first"]), int(rec["dep_count"])
        values = arg_values(k, args[off:off + int(rec["arg_length"])])
        deps = [made[j] for j in d[first:first + count].tolist()]
        made.append(graph.add_kernel(k, tuple(rec["grid"].tolist()),
                                     tuple(rec["block"].tolist()), values,
                                     int(rec["shared_mem"]), deps))

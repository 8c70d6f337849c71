"""The bare driver calls behind the suite's "driver" column: ``benchmarks/bare.c``, a C module
of one driver call per function (ints in, GIL released around the call, as pycudagraph's
compiled calls do), built here with the C compiler and this interpreter's headers into a
cache folder. Where it cannot be built, the same functions through ctypes (slower: the
column's note says so).

:class:`Params` is a ``CUDA_KERNEL_NODE_PARAMS_v2`` packed once from
:class:`~benchmarks.argsets.CtypesArgs`: what the bare calls are handed, so they pay for no
packing at all. No CUDA call at import.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bare.c")
#: symbol -> ctypes argument types, for the ctypes stand-in
_TYPES = {
    "cuGraphLaunch": [ctypes.c_void_p] * 2,
    "cuLaunchKernel": [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3,
    "cuGraphAddKernelNode_v2": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_size_t, ctypes.c_void_p],
    "cuGraphExecKernelNodeSetParams_v2": [ctypes.c_void_p] * 3,
    "cuGraphInstantiateWithFlags": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong],
    "cuGraphExecDestroy": [ctypes.c_void_p],
    "cuGraphExecUpdate_v2": [ctypes.c_void_p] * 3,
    "cuGraphCreate": [ctypes.c_void_p, ctypes.c_uint],
    "cuGraphDestroy": [ctypes.c_void_p],
    "cuStreamBeginCapture_v2": [ctypes.c_void_p, ctypes.c_int],
    "cuStreamEndCapture": [ctypes.c_void_p, ctypes.c_void_p],
}


def cache_dir() -> str:
    return os.environ.get("PCG_BENCH_CACHE") or os.path.join(tempfile.gettempdir(), "pcg-bench-cache")


def build(folder: str | None = None) -> str:
    """Compile ``bare.c`` for this interpreter (once per source and interpreter); its path."""
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha1(f.read() + sys.version.encode()).hexdigest()[:12]
    folder = folder or cache_dir()
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, f"_bare_{digest}" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not os.path.exists(out):
        cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
        tmp = out + f".{os.getpid()}.tmp"
        cmd = [*cc, "-shared", "-fPIC", "-O2", f"-I{sysconfig.get_paths()['include']}", SOURCE,
               "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"cannot build bare.c: {done.stderr.strip()[-300:]}")
        os.replace(tmp, out)
    return out


def _import(path: str):
    spec = importlib.util.spec_from_file_location("_bare", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _CtypesBare:
    """The functions of ``bare.c`` through ctypes (when it cannot be built)."""

    def __init__(self, table: dict):
        self._f = {}
        for name, address in table.items():
            proto = ctypes.CFUNCTYPE(ctypes.c_int, *_TYPES[name])
            self._f[name] = proto(address)

    def _call(self, name, *args):
        fn = self._f.get(name)
        if fn is None:
            raise RuntimeError(f"{name} is not available")
        rc = fn(*args)
        if rc:
            raise RuntimeError(f"{name} failed: CUresult {rc}")

    def graph_launch(self, e, s):
        self._call("cuGraphLaunch", e, s)

    def launch_kernel(self, f, s, params):
        self._call("cuLaunchKernel", f, 1, 1, 1, 1, 1, 1, 0, s, params, None)

    def add_kernel(self, g, dep, params):
        out, d = ctypes.c_void_p(), ctypes.c_void_p(dep)
        self._call("cuGraphAddKernelNode_v2", ctypes.addressof(out), g,
                   ctypes.addressof(d) if dep else None, 1 if dep else 0, params)
        return out.value

    def exec_set(self, e, node, params):
        self._call("cuGraphExecKernelNodeSetParams_v2", e, node, params)

    def instantiate(self, g):
        out = ctypes.c_void_p()
        self._call("cuGraphInstantiateWithFlags", ctypes.addressof(out), g, 0)
        return out.value

    def exec_destroy(self, e):
        self._call("cuGraphExecDestroy", e)

    def exec_update(self, e, g):
        info = (ctypes.c_uint64 * 3)()
        self._call("cuGraphExecUpdate_v2", e, g, ctypes.addressof(info))
        if info[0] & 0xFFFFFFFF:
            raise RuntimeError(f"cuGraphExecUpdate_v2 failed: result {info[0] & 0xFFFFFFFF}")

    def graph_create(self):
        out = ctypes.c_void_p()
        self._call("cuGraphCreate", ctypes.addressof(out), 0)
        return out.value

    def graph_destroy(self, g):
        self._call("cuGraphDestroy", g)

    def begin_capture(self, s):
        self._call("cuStreamBeginCapture_v2", s, 0)

    def end_capture(self, s):
        out = ctypes.c_void_p()
        self._call("cuStreamEndCapture", s, ctypes.addressof(out))
        return out.value


def load(library: str | None = None):
    """``(module, how)``: the bare calls bound to ``library``'s entry points (libcuda by
    default; a stand-in such as the driver stub in tests), and ``"C"`` or ``"ctypes (why)"``."""
    lib = ctypes.CDLL(library or ("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"))
    table = {}
    for name in _TYPES:
        try:
            table[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            continue  # a stand-in without it: that function raises
    try:
        mod = _import(build())
    except Exception as exc:  # noqa: BLE001 - no compiler, no headers: ctypes does it
        return _CtypesBare(table), f"ctypes ({type(exc).__name__}: {str(exc)[:120]})"
    mod.set_driver(table)
    return mod, "C"


class Params:
    """A ``CUDA_KERNEL_NODE_PARAMS_v2`` (grid and block 1) naming ``func`` whose
    ``kernelParams`` is the array of ``args`` (a :class:`~benchmarks.argsets.CtypesArgs`, kept
    alive here); ``address`` is what the node add and exec set calls take, ``args.address``
    what ``cuLaunchKernel`` takes."""

    _FORMAT = "<Q7IIQQQQ"

    def __init__(self, func: int, args):
        import struct
        self.args = args
        self.buf = ctypes.create_string_buffer(struct.calcsize(self._FORMAT))
        struct.pack_into(self._FORMAT, self.buf, 0, func, 1, 1, 1, 1, 1, 1, 0, 0,
                         args.address if args is not None else 0, 0, 0, 0)
        self.address = ctypes.addressof(self.buf)

"""Build and read ``tests/support/driver_stub.c``, a stand-in for libcuda's hot-call entry points.

``build(folder)`` compiles it with the system C compiler (with callgrind's client requests
where valgrind's header is installed); :class:`Stub` opens the result and reads what the
last call recorded. ``fast.use_driver_library(path)`` makes pycudagraph's hot calls (both
the compiled and the ctypes route) call it instead of libcuda.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import struct
import subprocess
import sysconfig

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "driver_stub.c")
CALLGRIND_HEADER = "/usr/include/valgrind/callgrind.h"

#: entry point -> its index in the stub's counters (the order of driver_stub.c's enum)
ENTRIES = {"cuGraphLaunch": 0, "cuLaunchKernel": 1, "cuGraphAddKernelNode": 2,
           "cuGraphKernelNodeSetParams": 3, "cuGraphExecKernelNodeSetParams": 4,
           "cuGraphExecUpdate": 5, "cuGraphInstantiateWithFlags": 6, "cuGraphExecDestroy": 7,
           "cuGraphCreate": 8, "cuGraphDestroy": 9, "cuStreamBeginCapture": 10,
           "cuStreamEndCapture": 11, "cuGraphDestroyNode": 12}


def build(folder: str) -> str:
    """Compile the stub into ``folder``; returns the library's path."""
    out = os.path.join(folder, "libcuda_stub.so")
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    flags = ["-DWITH_CALLGRIND"] if os.path.exists(CALLGRIND_HEADER) else []
    cmd = [*cc, "-shared", "-fPIC", "-O2", *flags, SOURCE, "-o", out]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"building the driver stub failed: {' '.join(cmd)}\n{done.stderr}")
    return out


class Stub:
    """The stub library's counters and records, read through ctypes."""

    def __init__(self, path: str):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self._rc = (ctypes.c_int * len(ENTRIES)).in_dll(self.lib, "stub_rc")
        self._calls = (ctypes.c_longlong * len(ENTRIES)).in_dll(self.lib, "stub_calls")
        self._fail_at = (ctypes.c_int * len(ENTRIES)).in_dll(self.lib, "stub_fail_at")
        self._ints = (ctypes.c_uint64 * 12).in_dll(self.lib, "stub_ints")
        self._deps = (ctypes.c_uint64 * 64).in_dll(self.lib, "stub_deps")
        self._sizes = (ctypes.c_int * 64).in_dll(self.lib, "stub_sizes")
        self._nsizes = ctypes.c_int.in_dll(self.lib, "stub_nsizes")
        self._record = ctypes.c_int.in_dll(self.lib, "stub_record")
        self._last = ctypes.c_int.in_dll(self.lib, "stub_last")
        self._values = (ctypes.c_uint8 * 4096).in_dll(self.lib, "stub_values")
        self._header = (ctypes.c_uint8 * 72).in_dll(self.lib, "stub_header")
        self.lib.stub_dump.argtypes = [ctypes.c_char_p]

    def set_rc(self, api: str, code: int) -> None:
        """Make entry point ``api`` return ``code`` from now on."""
        self._rc[ENTRIES[api]] = code

    def fail_at(self, api: str, n: int) -> None:
        """Make the ``n``-th call of ``api`` from now return 1 (CUDA_ERROR_INVALID_VALUE)."""
        self._fail_at[ENTRIES[api]] = n

    def calls(self, api: str) -> int:
        return self._calls[ENTRIES[api]]

    def total(self) -> int:
        """Calls of every entry point together."""
        return sum(self._calls)

    def last(self) -> str | None:
        """The entry point called last."""
        for name, i in ENTRIES.items():
            if i == self._last.value:
                return name
        return None

    def ints(self, n: int) -> tuple:
        """The first ``n`` integer arguments of the last call."""
        return tuple(self._ints[:n])

    def deps(self, n: int) -> list:
        return list(self._deps[:n])

    def header(self) -> tuple:
        """func, grid xyz, block xyz, shared memory of the last add / set's params."""
        return struct.unpack_from("<Q7I", bytes(self._header))

    def quiet(self, flag: bool = True) -> None:
        """Count calls only (no copies): what a benchmark wants."""
        self._record.value = 0 if flag else 1

    def expect(self, params) -> None:
        """Record argument values by the sizes of ``params`` (a kernel's ``Param`` list)."""
        for i, p in enumerate(params):
            self._sizes[i] = p.size
        self._nsizes.value = len(params)

    def values(self, params) -> tuple:
        """The argument values of the last call, decoded with ``params``' formats."""
        data, out, at = bytes(self._values), [], 0
        for p in params:
            out.append(struct.unpack_from("<" + p.fmt, data, at)[0])
            at += p.size
        return tuple(out)

    def zero(self) -> None:
        """Zero callgrind's counters (nothing outside callgrind)."""
        self.lib.stub_zero()

    def dump(self, name: str) -> None:
        """Dump callgrind's counters under ``name`` (nothing outside callgrind)."""
        self.lib.stub_dump(name.encode())

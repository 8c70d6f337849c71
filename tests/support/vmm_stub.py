"""The driver stub behind the sleepable memory's CPU tests: ``tests/support/vmm_driver_stub.c``
stands in for libcuda's virtual memory entry points, and the compiled table
``pycudagraph._cuda._vmm`` calls it.

``run(body)`` runs ``PRELUDE + body`` in a fresh interpreter (``vmm.use_driver_library``
replaces the process-wide entry points: a GPU test session in the same process must keep the
real ones). The table is the one built in place, or, where it is not, one compiled from the
package's C files into a temporary folder. In the body, ``stub`` reads the stub's counters.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import textwrap

import pytest

from pycudagraph._cuda import _build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vmm_driver_stub.c")
ENTRIES = ("cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
           "cuMemUnmap", "cuMemSetAccess", "cuMemGetAllocationGranularity", "cuCtxGetCurrent",
           "cuCtxSetCurrent", "cuDevicePrimaryCtxRetain", "cuCtxSynchronize",
           "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuThreadExchangeStreamCaptureMode")
_BUILT: dict = {}


def _cc(args: list, what: str) -> None:
    """Run the compiler (``args`` without it) or the whole command (``args`` with it)."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    cmd = args if args[0] == cc[0] else [*cc, *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot build {what} here: {done.stderr[-500:]}")


def stub_path() -> str:
    """The stub library, built once per test session (skips without a C compiler)."""
    if "stub" not in _BUILT:
        folder = tempfile.mkdtemp(prefix="pcg-vmm-stub-")
        out = os.path.join(folder, "libcuda_vmm_stub.so")
        _cc(["-shared", "-fPIC", "-O1", SOURCE, "-o", out], "tests/support/vmm_driver_stub.c")
        _BUILT["stub"] = out
    return _BUILT["stub"]


def table_folder() -> str:
    """A folder holding ``pycudagraph/_cuda/_vmm<EXT_SUFFIX>`` built from the package's C
    files now (so the tests check the sources, whatever was built in place)."""
    if "table" not in _BUILT:
        folder = tempfile.mkdtemp(prefix="pcg-vmm-table-")
        pkg = os.path.join(folder, "pycudagraph", "_cuda")
        os.makedirs(pkg)
        out = os.path.join(pkg, "_vmm" + sysconfig.get_config_var("EXT_SUFFIX"))
        cmd = _build.command("_vmm")
        cmd[cmd.index("-o") + 1] = out
        _cc(cmd + ["-Wextra", "-Werror", "-Wno-unused-parameter"], "pycudagraph._cuda._vmm")
        _BUILT["table"] = out
    return _BUILT["table"]


class Stub:
    """The stub's counters, read through ctypes."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        n = len(ENTRIES)
        self._calls = (ctypes.c_longlong * n).in_dll(self.lib, "stub_calls")
        self._fail_at = (ctypes.c_longlong * n).in_dll(self.lib, "stub_fail_at")
        self.fail_rc = ctypes.c_int.in_dll(self.lib, "stub_fail_rc")

    def value(self, name: str, ctype=ctypes.c_longlong) -> int:
        return ctype.in_dll(self.lib, name).value

    def calls(self, api: str) -> int:
        return self._calls[ENTRIES.index(api)]

    def fail(self, api: str, at: int, rc: int = 2) -> None:
        """Make the ``at``-th call of ``api`` (counting every call so far) return ``rc``."""
        self._fail_at[ENTRIES.index(api)] = self.calls(api) + at
        self.fail_rc.value = rc

    def live(self) -> dict:
        """Ranges, handles, mappings and physical bytes the 'driver' holds now, and misuses."""
        return {"ranges": self.value("stub_ranges"), "handles": self.value("stub_handles"),
                "mappings": self.value("stub_mappings"),
                "bytes": self.value("stub_physical_bytes", ctypes.c_ulonglong),
                "misuse": self.value("stub_misuse")}


#: What every body starts with: the table built from the sources, the stub as its driver,
#: ``stub`` (a :class:`Stub`), ``MB`` (the stub's 2 MiB granularity) and ``refused(fn, cls,
#: words)``.
PRELUDE = textwrap.dedent('''
    import os, sys
    import importlib.util
    spec = importlib.util.spec_from_file_location("pycudagraph._cuda._vmm",
                                                  os.environ["PCG_VMM_TABLE"])
    _table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(_table)  # the table built from the sources, used below
    sys.modules["pycudagraph._cuda._vmm"] = _table
    import pycudagraph as pcg
    from pycudagraph._cuda import vmm
    from pycudagraph.errors import ArgumentError, CudaError, PyCudaGraphError
    from tests.support.vmm_stub import Stub
    assert vmm._mod is _table, "the table built from the sources is the one in use"
    stub = Stub(os.environ["PCG_VMM_STUB"])
    vmm.use_driver_library(os.environ["PCG_VMM_STUB"])
    MB = 2 << 20

    def refused(fn, cls, words):
        try:
            fn()
        except cls as exc:
            assert words in str(exc), exc
            return exc
        raise AssertionError(f"no {cls.__name__} ({words})")
''')


def run(body: str) -> str:
    """PRELUDE + body in a fresh interpreter; returns its output."""
    table = table_folder()
    code = PRELUDE + textwrap.dedent(body) + "\nprint('vmm stub run ok')\n"
    env = dict(os.environ, PCG_VMM_STUB=stub_path(), PCG_VMM_TABLE=table,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "vmm stub run ok" in done.stdout, done.stdout + done.stderr
    return done.stdout

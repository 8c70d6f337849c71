"""Build the compiled hot path in place without setuptools: ``python pycudagraph/_cuda/_build.py``.

``python setup.py build_ext --inplace`` does the same where setuptools is installed (it
takes its file list from :func:`sources` and :func:`headers`). This script only needs a C
compiler and the Python headers (``sysconfig``), so it also works on a machine with no
network and no setuptools. It runs nothing from pycudagraph itself.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
#: The extension's C files (one module, ``_native_module.c`` defines it) and its header.
SOURCES = ("_native_module.c", "_native_calls.c", "_native_convert.c", "_native_method.c",
           "_native_nodes.c", "_native_types.c", "_native_lookup.c", "_native_plan.c",
           "_native_deps.c", "_native_bulk.c", "_native_checks.c")
HEADERS = ("_native.h",)
#: The sleepable memory table, a module of its own (``pycudagraph._cuda._vmm``), built beside
#: the hot path whatever PYCUDAGRAPH_NO_NATIVE says (that variable only picks the hot route).
VMM_SOURCES = ("_vmm.c", "_vmm_table.c")
VMM_HEADERS = ("_vmm.h",)


def _paths(names, relative: bool) -> list[str]:
    full = [os.path.join(HERE, n) for n in names]
    return [os.path.relpath(p, ROOT).replace(os.sep, "/") for p in full] if relative else full


def sources(relative: bool = False) -> list[str]:
    """The C files, absolute or relative to the repository root (what setup.py takes)."""
    return _paths(SOURCES, relative)


def headers(relative: bool = False) -> list[str]:
    return _paths(HEADERS, relative)


def vmm_sources(relative: bool = False) -> list[str]:
    """The sleepable memory table's C files (``pycudagraph._cuda._vmm``)."""
    return _paths(VMM_SOURCES, relative)


def vmm_headers(relative: bool = False) -> list[str]:
    return _paths(VMM_HEADERS, relative)


def target(name: str = "_native") -> str:
    """Path of the extension module ``name`` for this interpreter (``<name><EXT_SUFFIX>``)."""
    return os.path.join(HERE, name + sysconfig.get_config_var("EXT_SUFFIX"))


def command(name: str = "_native") -> list[str]:
    """The compiler command that builds ``_native`` (or ``_vmm``) in place."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    files = sources() if name == "_native" else vmm_sources()
    return [*cc, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", f"-I{include}", *files,
            "-o", target(name)]


def main() -> int:
    rc = 0
    for name, without in (("_native", "pycudagraph will use its ctypes path"),
                          ("_vmm", "sleepable pools (CapturePool(sleepable=True)) are off")):
        cmd = command(name)
        print(" ".join(shlex.quote(c) for c in cmd))
        done = subprocess.run(cmd)
        if done.returncode:
            print(f"build of {name} failed: {without}", file=sys.stderr)
        rc = rc or done.returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())

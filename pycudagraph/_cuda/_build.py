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
           "_native_nodes.c", "_native_exec.c", "_native_lookup.c")
HEADERS = ("_native.h",)


def _paths(names, relative: bool) -> list[str]:
    full = [os.path.join(HERE, n) for n in names]
    return [os.path.relpath(p, ROOT).replace(os.sep, "/") for p in full] if relative else full


def sources(relative: bool = False) -> list[str]:
    """The C files, absolute or relative to the repository root (what setup.py takes)."""
    return _paths(SOURCES, relative)


def headers(relative: bool = False) -> list[str]:
    return _paths(HEADERS, relative)


def target() -> str:
    """Path of the extension module for this interpreter (``_native<EXT_SUFFIX>``)."""
    return os.path.join(HERE, "_native" + sysconfig.get_config_var("EXT_SUFFIX"))


def command() -> list[str]:
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    return [*cc, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", f"-I{include}", *sources(),
            "-o", target()]


def main() -> int:
    cmd = command()
    print(" ".join(shlex.quote(c) for c in cmd))
    done = subprocess.run(cmd)
    if done.returncode:
        print("build failed: pycudagraph will use its ctypes path", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())

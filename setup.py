"""Build configuration beyond pyproject.toml: the optional compiled hot path.

``pycudagraph._cuda._native`` is a plain C extension (no CUDA header, no link to libcuda:
the driver entry points are handed over at run time), built from the ``_native*.c`` files
of ``pycudagraph/_cuda`` (``pycudagraph/_cuda/_build.py`` lists them). ``optional=True``:
where it cannot be compiled, installation still succeeds and the ctypes path is used
(``python -m pycudagraph info`` says which). ``pycudagraph._cuda._vmm`` (the sleepable
memory table of ``CapturePool(sleepable=True)``, from ``_vmm*.c``) is built the same way,
also optional. Build in place: ``python setup.py build_ext
--inplace``, or ``python pycudagraph/_cuda/_build.py`` where setuptools is missing.
"""

import importlib.util
import os

from setuptools import Extension, setup

_spec = importlib.util.spec_from_file_location(
    "_build", os.path.join(os.path.dirname(os.path.abspath(__file__)), "pycudagraph", "_cuda",
                           "_build.py"))
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)  # the file list only: nothing of pycudagraph is imported

setup(ext_modules=[Extension("pycudagraph._cuda._native", _build.sources(relative=True),
                             depends=_build.headers(relative=True),
                             extra_compile_args=["-O2", "-std=c11"], optional=True),
                   # the sleepable memory table (CapturePool(sleepable=True)): its own module
                   Extension("pycudagraph._cuda._vmm", _build.vmm_sources(relative=True),
                             depends=_build.vmm_headers(relative=True),
                             extra_compile_args=["-O2", "-std=c11"], optional=True)])

"""Build configuration beyond pyproject.toml: the optional compiled hot path.

``pycudagraph._cuda._native`` is a plain C extension (no CUDA header, no link to libcuda:
the driver entry points are handed over at run time). ``optional=True``: where it cannot
be compiled, installation still succeeds and the ctypes path is used
(``python -m pycudagraph info`` says which). Build in place: ``python setup.py build_ext
--inplace``, or ``python pycudagraph/_cuda/_build.py`` where setuptools is missing.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pycudagraph._cuda._native", ["pycudagraph/_cuda/_native.c"],
                             extra_compile_args=["-O2", "-std=c11"], optional=True)])

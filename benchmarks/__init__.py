"""pycudagraph's peer comparison suite: ``python -m benchmarks [--quick] [--only ...]``.

Measures CUDA Graph operations (held launch, one-argument exec update, node building,
instantiate, whole-graph update, recapture, GPU time per node, eager launch, the demo
MLP) for a C++ floor (``floor.cu``), raw ``cuda.bindings``, ``cuda.core``, CuPy,
PyTorch and pycudagraph. See ``benchmarks/README.md``. Importing this package makes
no CUDA call.
"""

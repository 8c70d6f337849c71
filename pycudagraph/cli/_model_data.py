"""Figures for ``demo --model``, measured by ``python -m pycudagraph demo`` on a real GPU.

This is data from one earlier run (provenance below), used only to fill the seed's cost
model on machines without a GPU; the demo labels it a model, never a measurement.
Regenerate by running the demo on a GPU: it prints a ``model figures:`` line.
"""

MEASURED: dict = {
    "gpu": "NVIDIA H200",
    "when": "2026-11-22",
    "versions": "driver 580.159.04 (CUDA 13.0), cuda-bindings 13.3.1, Python 3.12",
    "batch": 32,
    # CPU time of one eager kernel launch / one graph launch while the GPU is busy
    "eager_launch_us": 16.14,
    "graph_launch_us": 2.99,
    # GPU time of one MLP forward (3 linear_bias_relu kernels), events around replays
    "mlp_gpu_ms_per_iter": 0.06469,
}

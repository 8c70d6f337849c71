"""Figures for ``demo --model``, measured by ``python -m pycudagraph demo`` on a real GPU.

This is data from one earlier run (provenance below), used only to fill the seed's cost
model on machines without a GPU; the demo labels it a model, never a measurement.
Regenerate by running ``demo`` and ``demo --decode`` on a GPU: each prints a
``model figures:`` line with these keys.
"""

MEASURED: dict = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "when": "2026-11-22",
    "versions": "driver 580.159.04 (CUDA 13.0), cuda-bindings 13.3.1, Python 3.12.3",
    "how": "python -m pycudagraph demo; python -m pycudagraph demo --decode",
    "batch": 32,
    # CPU time of one eager kernel launch / one graph launch while the GPU is busy
    "eager_launch_us": 16.28,
    "graph_launch_us": 3.36,
    # GPU time of one MLP forward (3 linear_splitk kernels), events around graph replays
    "mlp_gpu_ms_per_iter": 0.01916,
    # the decode step: kernels per step and GPU time of one step (events around replays)
    "decode_kernels": 200,
    "decode_gpu_ms_per_step": 0.52702,
}

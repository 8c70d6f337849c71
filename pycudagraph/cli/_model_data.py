"""Figures for ``demo --model``: measured on a real GPU, plus the one figure the model assumes.

The measured figures come from the benchmark runs published in
docs/results/head_to_head_h100.md (the first run of the newest set: ``python -m benchmarks
--runs 3 --rounds 31``). ``ASSUMED`` is not a measurement: the demo prints it as an
assumption. On a GPU, ``demo`` and ``demo --decode`` print a ``model figures:`` line with
what they measured there.
"""

MEASURED: dict = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "when": "2026-11-26",
    "versions": "driver 580.159.04 (CUDA 13.0), cuda-bindings 13.3.1, Python 3.12.3",
    "how": "python -m benchmarks --runs 3 --rounds 31 (docs/results/head_to_head_h100.md)",
    # CPU time of one eager kernel launch (a 3-argument kernel) while the GPU is busy
    "eager_launch_us": 3.21,
    # CPU time of one graph launch (a 100-node graph) while the GPU is busy
    "graph_launch_us": 1.46,
    # GPU time per node of a graph of 1,000 empty kernels in a chain
    "graph_node_gpu_us": 0.782,
    # the wide MLP (512 -> 1024 -> 1024 -> 512, batch 32, 3 kernels): GPU time of one
    # forward pass, and the measured eager and graph replay times per iteration
    "wide_mlp_kernels": 3,
    "wide_mlp_gpu_us": 19.4,
    "wide_mlp_eager_us": 21.2,
    "wide_mlp_graph_us": 19.3,
}

#: What the model assumes for the demo's small kernels (not measured here): the GPU time
#: one of them runs for, beyond the per-node cost of an empty kernel.
ASSUMED: dict = {"small_kernel_work_us": 0.4}

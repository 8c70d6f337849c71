"""A pool of graphs for batch sizes 1, 2, 4, 8, 16 (padding + eager fallback).

Serving frameworks capture one graph per batch size up front and pad each request
to the smallest captured size that fits; a larger request runs eagerly. Here the
model is a small 2-layer MLP (``linear_bias_relu`` from kernels/mlp.cu:
64 -> 128 (ReLU) -> 32), all graphs share one set of static buffers sized for the
largest batch (a smaller batch uses their first rows), and they are captured largest
first before any request arrives.

Raw calls: ``cudaStreamBeginCapture`` / ``cudaStreamEndCapture`` and
``cudaGraphInstantiateWithParams`` (with ``cudaGraphInstantiateFlagUpload``) per pool
size; per request ``cudaMemcpyAsync`` into the static input, ``cudaGraphLaunch``,
``cudaMemcpyAsync`` back; ``cuLaunchKernel`` for the eager fallback. Hits / misses
are counted and every output is checked against numpy.
"""

import numpy as np

import pycudagraph as pcg

POOL = (1, 2, 4, 8, 16)
IN, HID, OUT = 64, 128, 32
SEED = 1  # seed "001"
BLOCK = (16, 16)


def grid(batch, features):
    return ((features + 15) // 16, (batch + 15) // 16)


def mlp_numpy(x, w1, b1, w2, b2):
    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0.0)
    return h @ w2 + b2


def main():
    linear = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
    stream = pcg.Stream()
    rng = np.random.default_rng(SEED)
    w1 = (rng.standard_normal((IN, HID)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(HID) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((HID, OUT)) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal(OUT) * 0.1).astype(np.float32)
    d_w1, d_b1, d_w2, d_b2 = (pcg.DeviceBuffer.from_array(a, stream=stream) for a in (w1, b1, w2, b2))

    def forward(x, h, y, batch):  # two kernel launches on the stream
        linear.launch(grid(batch, HID), BLOCK, (x, d_w1, d_b1, h, batch, IN, HID, 1), stream=stream)
        linear.launch(grid(batch, OUT), BLOCK, (h, d_w2, d_b2, y, batch, HID, OUT, 0), stream=stream)

    # Static buffers for the largest pool size, shared by every graph.
    big = POOL[-1]
    s_x, s_h, s_y = (pcg.DeviceBuffer(4 * big * f) for f in (IN, HID, OUT))
    s_x.zero(stream=stream)
    forward(s_x, s_h, s_y, big)  # warm-up outside any capture
    stream.synchronize()
    pool = {}
    for size in sorted(POOL, reverse=True):
        with pcg.capture(stream) as cap:
            forward(s_x, s_h, s_y, size)
        pool[size] = cap.graph.instantiate(upload_stream=stream)
    print(f"captured {len(pool)} graphs for batch sizes {sorted(pool)}")

    stats = {"hits": 0, "misses": 0, "padded_rows": 0}

    def infer(x):
        n = x.shape[0]
        size = next((s for s in POOL if s >= n), None)
        if size is None:  # eager fallback with its own buffers
            stats["misses"] += 1
            d_x = pcg.DeviceBuffer.from_array(x, stream=stream)
            d_h, d_y = pcg.DeviceBuffer(4 * n * HID), pcg.DeviceBuffer(4 * n * OUT)
            forward(d_x, d_h, d_y, n)
            y = np.empty((n, OUT), np.float32)
            d_y.copy_to(y, stream=stream)
            stream.synchronize()
            return y, "eager"
        stats["hits"] += 1
        stats["padded_rows"] += size - n
        padded = np.zeros((size, IN), np.float32)
        padded[:n] = x
        s_x.copy_from(padded, stream=stream)
        pool[size].launch(stream)
        y = np.empty((size, OUT), np.float32)
        s_y.copy_to(y, stream=stream)
        stream.synchronize()
        return y[:n], f"graph[{size}]"

    batches = [1, 3, 16, 5, 20, 8, 2, 13, 40, 7]
    for n in batches:
        x = rng.standard_normal((n, IN)).astype(np.float32)
        y, how = infer(x)
        want = mlp_numpy(x, w1, b1, w2, b2)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        print(f"batch {n:3d} -> {how:<10} max err {float(np.max(np.abs(y - want))):.1e}")

    print(f"requests {len(batches)}: hits {stats['hits']}, misses {stats['misses']}, "
          f"padded rows {stats['padded_rows']}")
    assert stats["misses"] == sum(n > POOL[-1] for n in batches)
    assert stats["hits"] + stats["misses"] == len(batches)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()

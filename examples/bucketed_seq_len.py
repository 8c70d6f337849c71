"""Variable sequence length with one graph per length bucket (padding + eager fallback).

A graph has fixed shapes: its kernel arguments and grid sizes are baked in. To serve
inputs whose sequence length varies, keep one graph per *bucket* (64, 128, 256, 512
tokens): pad the input to the smallest bucket that fits, replay that bucket's graph,
slice the output. Inputs longer than the largest bucket run eagerly. Graphs are
captured lazily, the first time a bucket is needed.

The work per request is ``y = 2*x + pos[:L]`` on ``(L, D)`` float32 arrays (a learned
positional table ``pos``), with the helpers kernels copy, scale and axpy. Raw calls:
``cudaMemcpyAsync`` into the bucket's static input, ``cudaStreamBeginCapture`` /
``cudaStreamEndCapture`` + ``cudaGraphInstantiateWithParams`` once per bucket,
``cudaGraphLaunch`` per request; ``cuLaunchKernel`` for the eager fallback. Prints the
hit / miss / capture counts; every output is checked against numpy.
"""

import numpy as np

import pycudagraph as pcg

BUCKETS = (64, 128, 256, 512)
D = 32            # features per token
MAX_LEN = 1024    # longest request served (eagerly above BUCKETS[-1])
THREADS = 256


def main():
    mod = pcg.Module.from_file("helpers.cu")
    copy, scale, axpy = mod["copy"], mod["scale"], mod["axpy"]
    stream = pcg.Stream()
    rng = np.random.default_rng(3)
    pos_host = rng.standard_normal((MAX_LEN, D)).astype(np.float32)
    pos = pcg.DeviceBuffer.from_array(pos_host, stream=stream)

    def launch_work(out, inp, length):  # y = 2*x + pos[:length]
        n = length * D
        grid = (n + THREADS - 1) // THREADS
        copy.launch(grid, THREADS, (out, inp, n), stream=stream)
        scale.launch(grid, THREADS, (out, 2.0, n), stream=stream)
        axpy.launch(grid, THREADS, (out, pos, 1.0, n), stream=stream)

    stats = {"hits": 0, "misses": 0, "captures": 0, "padded_tokens": 0}
    graphs = {}  # bucket -> (GraphExec, static input, static output)

    def graph_for(bucket):
        if bucket not in graphs:
            static_in = pcg.DeviceBuffer(4 * bucket * D)   # allocate outside the capture
            static_out = pcg.DeviceBuffer(4 * bucket * D)
            static_in.zero(stream=stream)
            with pcg.capture(stream) as cap:
                launch_work(static_out, static_in, bucket)
            graphs[bucket] = (cap.graph.instantiate(upload_stream=stream), static_in, static_out)
            stats["captures"] += 1
            print(f"  captured bucket {bucket}: {len(cap.graph)} nodes")
        return graphs[bucket]

    def run(x):
        length = x.shape[0]
        bucket = next((b for b in BUCKETS if b >= length), None)
        if bucket is None:  # too long for any graph: eager fallback
            stats["misses"] += 1
            inp = pcg.DeviceBuffer.from_array(x, stream=stream)
            out = pcg.DeviceBuffer(x.nbytes)
            launch_work(out, inp, length)
            y = np.empty_like(x)
            out.copy_to(y, stream=stream)
            stream.synchronize()
            return y, "eager"
        exe, static_in, static_out = graph_for(bucket)
        stats["hits"] += 1
        stats["padded_tokens"] += bucket - length
        padded = np.zeros((bucket, D), np.float32)
        padded[:length] = x
        static_in.copy_from(padded, stream=stream)
        exe.launch(stream)
        y = np.empty((bucket, D), np.float32)
        static_out.copy_to(y, stream=stream)
        stream.synchronize()
        return y[:length], f"graph[{bucket}]"

    # Warm-up: one eager run loads the module and kernels outside any capture.
    scratch = (pcg.DeviceBuffer(4 * D), pcg.DeviceBuffer(4 * D))
    launch_work(scratch[0], scratch[1], 1)
    stream.synchronize()

    lengths = [5, 64, 65, 200, 37, 512, 700, 128, 1000, 300, 1, 90]
    for length in lengths:
        x = rng.standard_normal((length, D)).astype(np.float32)
        y, how = run(x)
        want = np.float32(2.0) * x + pos_host[:length]
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        print(f"len {length:4d} -> {how:<11} output {y.shape} matches numpy")

    served = stats["hits"] + stats["misses"]
    print(f"requests {served}: graph hits {stats['hits']}, eager misses {stats['misses']}, "
          f"captures {stats['captures']}, padded tokens {stats['padded_tokens']}")
    assert stats["captures"] == len(graphs) <= len(BUCKETS)
    assert stats["misses"] == sum(n > BUCKETS[-1] for n in lengths)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()

// The kernel of the default demo's deep, narrow MLP (python -m pycudagraph demo): layers
// so small that one runs for well under a microsecond, so an eager forward pass spends
// its time launching, which is what a CUDA graph saves. float32, no headers: NVRTC-ready.

#ifndef LW_MAX_BATCH
#define LW_MAX_BATCH 16
#endif

// y[r, j] = x[r, :] . wt[j, :] + b[j], then ReLU if relu != 0, for every row r < batch.
// wt is the weight transposed: row-major [out_features, in_features]. One warp per output
// feature j: the lanes split the inputs (every load independent, so they are all in
// flight at once) and a shuffle sums them. batch <= LW_MAX_BATCH (rows past it are not
// written; the host refuses such a batch). blockDim.x a multiple of 32,
// gridDim.x = ceil(out_features / (blockDim.x / 32)).
extern "C" __global__ void linear_warp(const float* __restrict__ x, const float* __restrict__ wt,
                                       const float* __restrict__ b, float* __restrict__ y,
                                       int batch, int in_features, int out_features, int relu)
{
    const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (j >= out_features) {
        return;  // the whole warp: j is the same for its 32 lanes
    }
    float acc[LW_MAX_BATCH];
#pragma unroll
    for (int r = 0; r < LW_MAX_BATCH; ++r) {
        acc[r] = 0.0f;
    }
#pragma unroll 4
    for (int k = lane; k < in_features; k += 32) {
        const float wk = __ldg(wt + (size_t)j * in_features + k);
#pragma unroll
        for (int r = 0; r < LW_MAX_BATCH; ++r) {
            if (r < batch) {
                acc[r] = fmaf(__ldg(x + (size_t)r * in_features + k), wk, acc[r]);
            }
        }
    }
    const float bias = __ldg(b + j);
#pragma unroll
    for (int r = 0; r < LW_MAX_BATCH; ++r) {
        if (r < batch) {  // the same for every lane of the warp
            float s = acc[r];
            for (int off = 16; off > 0; off >>= 1) {
                s += __shfl_xor_sync(0xffffffffu, s, off);
            }
            if (lane == 0) {
                s += bias;
                y[(size_t)r * out_features + j] = (relu != 0 && s < 0.0f) ? 0.0f : s;
            }
        }
    }
}

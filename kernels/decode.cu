// Kernels of the demo's decode step (python -m pycudagraph demo --decode): the
// small, memory-bound kernels one token of a batch-1 decoder runs, float32.
// No headers needed: NVRTC-ready. Every kernel bounds-checks n / rows.
//
// One layer of the step, h being the hidden state (n = hidden size):
//   rmsnorm(h) -> a;  matvec(W1, a) -> t;  add(h, t) -> h
//   rmsnorm(h) -> a;  matvec(W2, a) -> u;  silu(u);  matvec(W3, u) -> t;  add(h, t) -> h

// y = x / sqrt(mean(x^2) + eps) * g. One block; blockDim.x a multiple of 32, <= 1024.
extern "C" __global__ void rmsnorm(const float* __restrict__ x, const float* __restrict__ g,
                                   float* __restrict__ y, int n, float eps)
{
    __shared__ float warp_sums[32];
    __shared__ float scale;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        s = fmaf(x[i], x[i], s);
    }
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, off);
    }
    if ((threadIdx.x & 31) == 0) {
        warp_sums[threadIdx.x >> 5] = s;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) {
            s += __shfl_xor_sync(0xffffffffu, s, off);
        }
        if (threadIdx.x == 0) {
            scale = rsqrtf(s / (float)n + eps);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        y[i] = x[i] * scale * g[i];
    }
}

// y[r] = sum_c w[r, c] * x[c], w row-major [rows, cols]. One warp per row, 16-byte
// loads (cols % 4 == 0, w and x 16-byte aligned); blockDim.x a multiple of 32,
// gridDim.x = ceil(rows / (blockDim.x / 32)).
extern "C" __global__ void matvec(const float* __restrict__ w, const float* __restrict__ x,
                                  float* __restrict__ y, int rows, int cols)
{
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) {
        return;
    }
    const float4* wr = reinterpret_cast<const float4*>(w + (size_t)row * cols);
    const float4* xv = reinterpret_cast<const float4*>(x);
    float s = 0.0f;
#pragma unroll 8
    for (int c = lane; c < cols / 4; c += 32) {
        const float4 a = __ldg(wr + c), v = __ldg(xv + c);
        s = fmaf(a.x, v.x, fmaf(a.y, v.y, fmaf(a.z, v.z, fmaf(a.w, v.w, s))));
    }
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, off);
    }
    if (lane == 0) {
        y[row] = s;
    }
}

// out = a + b (out may be a: the residual add in place).
extern "C" __global__ void add(float* out, const float* a, const float* b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = a[i] + b[i];
    }
}

// u = u * sigmoid(u), in place.
extern "C" __global__ void silu(float* u, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = u[i];
        u[i] = v / (1.0f + __expf(-v));
    }
}

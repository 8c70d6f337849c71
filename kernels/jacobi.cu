// Kernels for Jacobi iteration on a dense n x n diagonally dominant float
// system A x = b (row-major A), in the spirit of the CUDA Samples'
// jacobiCudaGraphs, written from scratch. No headers needed: NVRTC-ready.
//
// Launch: 1-D blocks. With blockDim.x a multiple of 32 (e.g. 256 threads,
// grid = ceil(n / 8)) each warp handles one row at a time; otherwise each
// thread handles one row. Both loops are grid-stride, so any grid size works.

#define FULL_MASK 0xffffffffu

// x_new[i] = (b[i] - sum_{j != i} A[i*n + j] * x_old[j]) / A[i*n + i]
extern "C" __global__ void jacobi_step(const float* A, const float* b, const float* x_old,
                                       float* x_new, int n)
{
    if ((blockDim.x & 31) != 0) {
        // Thread per row.
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            const float* Ai = A + (long long)i * n;
            float s = 0.0f;
            for (int j = 0; j < n; ++j) {
                if (j != i) {
                    s += Ai[j] * x_old[j];
                }
            }
            x_new[i] = (b[i] - s) / Ai[i];
        }
        return;
    }

    // Warp per row; every lane of a warp runs the same number of iterations.
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int i = warp; i < n; i += nwarps) {
        const float* Ai = A + (long long)i * n;
        float s = 0.0f;
        for (int j = lane; j < n; j += 32) {
            if (j != i) {
                s += Ai[j] * x_old[j];
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            s += __shfl_xor_sync(FULL_MASK, s, off);
        }
        if (lane == 0) {
            x_new[i] = (b[i] - s) / Ai[i];
        }
    }
}

// out[0] += sum((x_new[i] - x_old[i])^2). out[0] must be zeroed beforehand
// (see zero_double). Uses double atomicAdd (sm_60+).
extern "C" __global__ void residual_sq(const float* x_old, const float* x_new, double* out, int n)
{
    double s = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        double d = (double)x_new[i] - (double)x_old[i];
        s += d * d;
    }
    if ((blockDim.x & 31) != 0) {
        atomicAdd(out, s);  // partial warps: no shuffle reduction
        return;
    }
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_xor_sync(FULL_MASK, s, off);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, s);
    }
}

// out[0] = 0.0
extern "C" __global__ void zero_double(double* out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = 0.0;
    }
}

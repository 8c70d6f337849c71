// Kernels for the demo 3-layer MLP (512 -> 1024 -> 1024 -> 512, ReLU,
// batch 32, float32, row-major). No headers needed: NVRTC-ready.
//
// Launch configuration for linear_bias_relu:
//   blockDim = (16, 16, 1)
//   gridDim  = (ceil(out_features / 16), ceil(batch / 16), 1)
// threadIdx.x walks output features (columns), threadIdx.y walks batch rows.

#define TILE 16

// y[batch, out] = x[batch, in] @ w[in, out] + b[out]; then ReLU if relu != 0.
// Tiled shared-memory GEMM; bounds-checked, so any sizes are fine.
extern "C" __global__ void linear_bias_relu(const float* x, const float* w, const float* b,
                                            float* y, int batch, int in_features,
                                            int out_features, int relu)
{
    __shared__ float xs[TILE][TILE];  // xs[row][k]: tile of x
    __shared__ float ws[TILE][TILE];  // ws[k][col]: tile of w

    int col = blockIdx.x * TILE + threadIdx.x;  // output feature
    int row = blockIdx.y * TILE + threadIdx.y;  // batch row
    float acc = 0.0f;

    for (int k0 = 0; k0 < in_features; k0 += TILE) {
        int kx = k0 + threadIdx.x;  // column of x this thread loads
        int kw = k0 + threadIdx.y;  // row of w this thread loads
        xs[threadIdx.y][threadIdx.x] =
            (row < batch && kx < in_features) ? x[row * in_features + kx] : 0.0f;
        ws[threadIdx.y][threadIdx.x] =
            (kw < in_features && col < out_features) ? w[kw * out_features + col] : 0.0f;
        __syncthreads();

        for (int k = 0; k < TILE; ++k) {
            acc += xs[threadIdx.y][k] * ws[k][threadIdx.x];
        }
        __syncthreads();
    }

    if (row < batch && col < out_features) {
        acc += b[col];
        if (relu != 0 && acc < 0.0f) {
            acc = 0.0f;
        }
        y[row * out_features + col] = acc;
    }
}

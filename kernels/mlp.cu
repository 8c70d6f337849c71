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

// ---------------------------------------------------------------------------
// linear_splitk: the fast layer, y[batch, out] = x[batch, in] @ w[in, out] + b,
// then ReLU if relu != 0. Same math and layouts as linear_bias_relu.
//
// At batch 32 a layer is a stream of weights: every weight is read once and used
// 32 times, so the work is split over enough blocks to keep every SM fetching.
//   - A block owns 32 output columns, 32 batch rows and a slice of in_features
//     (blockIdx.y picks the slice: "split K"); its SPLITK_WARPS warps split that
//     slice again and sum their partial tiles in shared memory.
//   - In a warp, lane & 7 picks 4 adjacent columns (one 16-byte load of w per
//     k row: 8 lanes read a whole 128-byte line) and lane >> 3 picks 8 batch rows
//     (rows r, r+4, ..., r+28), so each thread keeps 8 x 4 accumulators.
//   - The block's x slice is staged in shared memory once and read back as
//     float4 (4 k values of one row), broadcast to the 8 lanes that share a row.
//   - A layer this small is a chain of memory round trips, not a stream of bytes,
//     so every loop that loads is unrolled with its loads issued together, and the
//     first 16 rows of w are requested before x is staged (SPLITK_PREFETCH), so
//     the two fetches overlap.
//   - With several slices (gridDim.y > 1) each block writes its 32 x 32 tile to
//     `partial`; the last block to finish a tile (an atomic counter per tile)
//     adds the slices in a fixed order, adds the bias, applies ReLU and writes y,
//     then sets the counter back to zero for the next launch (graph replays too).
//
// What bounds it (512 -> 1024 -> 1024 -> 512 at batch 32, float32): 134 MFLOP, about
// 2 us of FP32 FMA on an H100; 8.4 MB of weights, about 2.5 us from HBM. Measured on
// an H100 (2026-11-22, `python -m benchmarks.mlp`): 19 us per forward at 128 blocks
// per layer, 6-8 us per layer, while 8 weight sets read in turn from HBM (64 MB) add
// only 2.6 us: the time goes to latency (launch, x staging, w fetch, the slice sum's
// fence, atomic and reads), not to bytes or FLOPs. cuBLAS (PyTorch 2.11) needs 42 us.
//
// Launch: blockDim = (SPLITK_WARPS * 32, 1, 1)
//         gridDim  = (out_features / 32, splits, ceil(batch / 32))
// Sizes:  out_features % 32 == 0; in_features % (4 * SPLITK_WARPS * splits) == 0;
//         in_features / splits <= SPLITK_MAX_KC; any batch >= 1.
// partial:  splits * ceil(batch / 32) * 32 * out_features floats (splits > 1 only)
// counters: (out_features / 32) * ceil(batch / 32) unsigned ints, zero before the
//           first launch; every launch leaves them zero.

#ifndef SPLITK_WARPS
#define SPLITK_WARPS 8
#endif
#ifndef SPLITK_MAX_KC
#define SPLITK_MAX_KC 256
#endif
#ifndef SPLITK_PREFETCH
#define SPLITK_PREFETCH 1
#endif
#define SPLITK_COLS 32
#define SPLITK_ROWS 32
#define SPLITK_THREADS (SPLITK_WARPS * 32)
#define SPLITK_XS_STRIDE (SPLITK_MAX_KC + 4)  // +4 floats: rows 1 apart hit other banks
#define SPLITK_STAGE (SPLITK_ROWS * SPLITK_MAX_KC / 4 / SPLITK_THREADS)  // float4s per thread
#define SPLITK_GROUP 16  // rows of w in flight per thread
static_assert(SPLITK_WARPS * SPLITK_COLS <= SPLITK_XS_STRIDE,
              "the warps' partial tiles must fit in the x buffer they reuse");
static_assert(SPLITK_MAX_KC % 4 == 0 && SPLITK_STAGE * SPLITK_THREADS * 4 == SPLITK_ROWS * SPLITK_MAX_KC,
              "the x slice is staged as whole float4s, the same count per thread");

// acc[i][j] += sum over 4 k of x[row i][k] * w[k][col j], with x from shared memory.
__device__ __forceinline__ void splitk_step4(float acc[8][4], const float* xs_row,
                                             float4 w0, float4 w1, float4 w2, float4 w3)
{
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const float4 xv = *reinterpret_cast<const float4*>(xs_row + 4 * i * SPLITK_XS_STRIDE);
        acc[i][0] = fmaf(xv.x, w0.x, fmaf(xv.y, w1.x, fmaf(xv.z, w2.x, fmaf(xv.w, w3.x, acc[i][0]))));
        acc[i][1] = fmaf(xv.x, w0.y, fmaf(xv.y, w1.y, fmaf(xv.z, w2.y, fmaf(xv.w, w3.y, acc[i][1]))));
        acc[i][2] = fmaf(xv.x, w0.z, fmaf(xv.y, w1.z, fmaf(xv.z, w2.z, fmaf(xv.w, w3.z, acc[i][2]))));
        acc[i][3] = fmaf(xv.x, w0.w, fmaf(xv.y, w1.w, fmaf(xv.z, w2.w, fmaf(xv.w, w3.w, acc[i][3]))));
    }
}

// Rows kk .. kk+15 of this thread's 4 columns of w (whole quads below kw only).
__device__ __forceinline__ void splitk_load_group(float4 wv[SPLITK_GROUP], const float* wp,
                                                  int kk, int kw, int out_features)
{
#pragma unroll
    for (int r = 0; r < SPLITK_GROUP; ++r) {
        if (kk + (r & ~3) < kw) {
            wv[r] = __ldg(reinterpret_cast<const float4*>(wp + (size_t)(kk + r) * out_features));
        }
    }
}

__device__ __forceinline__ void splitk_add(float4& v, const float4 t)
{
    v.x += t.x; v.y += t.y; v.z += t.z; v.w += t.w;
}

__device__ __forceinline__ float4 splitk_finish(float4 v, const float* b, int col, int relu)
{
    splitk_add(v, *reinterpret_cast<const float4*>(b + col));
    if (relu != 0) {
        v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f);
        v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(SPLITK_THREADS)
linear_splitk(const float* __restrict__ x, const float* __restrict__ w,
              const float* __restrict__ b, float* __restrict__ y,
              float* __restrict__ partial, unsigned int* __restrict__ counters,
              int batch, int in_features, int out_features, int relu)
{
    // x slice [32 rows][kc] while computing; the warps' partial tiles afterwards.
    __shared__ __align__(16) float smem[SPLITK_ROWS * SPLITK_XS_STRIDE];
    __shared__ unsigned int last_block;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int splits = gridDim.y, split = blockIdx.y;
    const int col0 = blockIdx.x * SPLITK_COLS, row0 = blockIdx.z * SPLITK_ROWS;
    const int kc = in_features / splits, k0 = split * kc;  // this block's slice
    const int kw = kc / SPLITK_WARPS, kwarp = warp * kw;   // this warp's rows in it
    const int cq = lane & 7, rg = lane >> 3;
    const int col = col0 + 4 * cq;
    const float* wp = w + (size_t)(k0 + kwarp) * out_features + col;

    float4 wv[SPLITK_GROUP];
#if SPLITK_PREFETCH
    splitk_load_group(wv, wp, 0, kw, out_features);  // in flight while x is staged
#endif
    // Stage x[row0 .. row0+31][k0 .. k0+kc) (rows past the batch read as zero):
    // every load first, then every store.
    {
        const int kc4 = kc / 4;
        float4 xv[SPLITK_STAGE];
#pragma unroll
        for (int j = 0; j < SPLITK_STAGE; ++j) {
            const int i = tid + j * SPLITK_THREADS, r = i / kc4;
            xv[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < SPLITK_ROWS && row0 + r < batch) {
                xv[j] = __ldg(reinterpret_cast<const float4*>(x + (size_t)(row0 + r) * in_features + k0 + 4 * (i % kc4)));
            }
        }
#pragma unroll
        for (int j = 0; j < SPLITK_STAGE; ++j) {
            const int i = tid + j * SPLITK_THREADS, r = i / kc4;
            if (r < SPLITK_ROWS) {
                *reinterpret_cast<float4*>(smem + r * SPLITK_XS_STRIDE + 4 * (i % kc4)) = xv[j];
            }
        }
    }
    __syncthreads();
#if !SPLITK_PREFETCH
    splitk_load_group(wv, wp, 0, kw, out_features);
#endif

    float acc[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    }
    const float* xs = smem + rg * SPLITK_XS_STRIDE + kwarp;
    for (int kk = 0; kk < kw; kk += SPLITK_GROUP) {
#pragma unroll
        for (int q = 0; q < SPLITK_GROUP / 4; ++q) {
            if (kk + 4 * q < kw) {
                splitk_step4(acc, xs + kk + 4 * q, wv[4 * q], wv[4 * q + 1], wv[4 * q + 2], wv[4 * q + 3]);
            }
        }
        if (kk + SPLITK_GROUP < kw) {
            splitk_load_group(wv, wp, kk + SPLITK_GROUP, kw, out_features);
        }
    }

    // Sum the warps' tiles: red[warp][row][col] in the (now free) x buffer.
    __syncthreads();
    float* red = smem;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        *reinterpret_cast<float4*>(red + (warp * SPLITK_ROWS + rg + 4 * i) * SPLITK_COLS + 4 * cq) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
    __syncthreads();
    const size_t rows_pad = (size_t)gridDim.z * SPLITK_ROWS;
    for (int o = tid; o < SPLITK_ROWS * SPLITK_COLS / 4; o += SPLITK_THREADS) {
        const int r = o / (SPLITK_COLS / 4), c = col0 + 4 * (o % (SPLITK_COLS / 4));
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int wi = 0; wi < SPLITK_WARPS; ++wi) {
            splitk_add(v, *reinterpret_cast<const float4*>(red + (wi * SPLITK_ROWS + r) * SPLITK_COLS + (c - col0)));
        }
        if (splits == 1) {
            if (row0 + r < batch) {
                *reinterpret_cast<float4*>(y + (size_t)(row0 + r) * out_features + c) = splitk_finish(v, b, c, relu);
            }
        } else {
            *reinterpret_cast<float4*>(partial + ((size_t)split * rows_pad + row0 + r) * out_features + c) = v;
        }
    }
    if (splits == 1) {
        return;
    }

    // The last block of this tile adds the slices (in slice order: the result does
    // not depend on which block came last), then re-arms the counter.
    __threadfence();
    __syncthreads();
    unsigned int* counter = counters + blockIdx.z * gridDim.x + blockIdx.x;
    if (tid == 0) {
        last_block = (atomicAdd(counter, 1u) == (unsigned int)(splits - 1));
    }
    __syncthreads();
    if (!last_block) {
        return;
    }
    __threadfence();
    for (int o = tid; o < SPLITK_ROWS * SPLITK_COLS / 4; o += SPLITK_THREADS) {
        const int r = o / (SPLITK_COLS / 4), c = col0 + 4 * (o % (SPLITK_COLS / 4));
        if (row0 + r >= batch) {
            continue;
        }
        const float4* src = reinterpret_cast<const float4*>(partial + ((size_t)row0 + r) * out_features + c);
        const size_t step = rows_pad * out_features / 4;  // one slice, in float4s
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int s0 = 0; s0 < splits; s0 += 8) {  // 8 loads in flight, added in slice order
            float4 t[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                t[j] = s0 + j < splits ? __ldcg(src + (size_t)(s0 + j) * step) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                splitk_add(v, t[j]);
            }
        }
        *reinterpret_cast<float4*>(y + (size_t)(row0 + r) * out_features + c) = splitk_finish(v, b, c, relu);
    }
    if (tid == 0) {
        *counter = 0u;
    }
}

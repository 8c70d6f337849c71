// Small helper kernels for pycudagraph tests, examples and benchmarks.
// Every kernel is extern "C" with plain C parameter types and no header is
// included, so the file compiles under NVRTC as-is. Elementwise kernels use
// a grid-stride loop and work with any 1-D launch configuration.

extern "C" __global__ void empty()
{
}

// Three parameters that are only touched when n < 0, so they stay in the
// kernel signature (used by kernel-node parameter update benchmarks).
extern "C" __global__ void empty3(float* p, float a, int n)
{
    if (n < 0 && threadIdx.x == 0 && blockIdx.x == 0) {
        p[0] = a;
    }
}

// Ten and thirty parameters, pointers and scalars mixed: the benchmarks' kernels of
// realistic argument counts (benchmarks/argsets.py lists them). Like empty3 they touch
// memory only when n < 0, so every parameter stays in the signature.
extern "C" __global__ void args10(float* p0, float a, float* p1, int n, float* p2, long long q,
                                  float* p3, float b, int m, double d)
{
    if (n < 0 && threadIdx.x == 0 && blockIdx.x == 0) {
        p0[0] = a + b;
        p1[0] = (float)(m + q);
        p2[0] = (float)d;
        p3[0] = 0.0f;
    }
}

extern "C" __global__ void args30(float* p0, float a0, float* p1, int n, float* p2, long long q0,
                                  float* p3, float a1, float* p4, double d0, float* p5,
                                  unsigned int u0, float* p6, float a2, float* p7, int n1,
                                  float* p8, long long q1, float* p9, float a3, float* p10,
                                  double d1, float* p11, unsigned int u1, float a4, int n2,
                                  float a5, int n3, int n4, int n5)
{
    if (n < 0 && threadIdx.x == 0 && blockIdx.x == 0) {
        p0[0] = a0 + a1 + a2 + a3 + a4 + a5;
        p1[0] = (float)(q0 + q1 + n1 + n2 + n3 + n4 + n5);
        p2[0] = (float)(d0 + d1);
        p3[0] = (float)(u0 + u1);
        p4[0] = p5[0] = p6[0] = p7[0] = p8[0] = p9[0] = p10[0] = p11[0] = 0.0f;
    }
}

// Busy-waits `cycles` clock64() cycles on one thread to keep the GPU busy.
extern "C" __global__ void spin(unsigned long long cycles)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) {
        return;
    }
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
}

// y[i] = a * x[i] + y[i]
extern "C" __global__ void axpy(float* y, const float* x, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// y[i] *= a
extern "C" __global__ void scale(float* y, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] *= a;
    }
}

// y[i] = v
extern "C" __global__ void fill(float* y, float v, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = v;
    }
}

// y[i] += 1
extern "C" __global__ void add_one(float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] += 1.0f;
    }
}

// dst[i] = src[i]
extern "C" __global__ void copy(float* dst, const float* src, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        dst[i] = src[i];
    }
}

// out[0] += sum(x[0..n)). Meant for 1-D blocks of 256 threads (any grid);
// smaller blocks also work, larger ones fall back to per-thread atomics.
// out[0] must be zeroed by the caller beforehand.
extern "C" __global__ void reduce_sum(const float* x, float* out, int n)
{
    __shared__ float partial[256];
    unsigned int tid = threadIdx.x;
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += gridDim.x * blockDim.x) {
        sum += x[i];
    }
    if (blockDim.x > 256) {
        atomicAdd(out, sum);
        return;
    }
    partial[tid] = sum;
    __syncthreads();
    for (unsigned int s = 128; s > 0; s >>= 1) {
        if (tid < s && tid + s < blockDim.x) {
            partial[tid] += partial[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        atomicAdd(out, partial[0]);
    }
}

// *flag = v (one thread).
extern "C" __global__ void set_flag(unsigned int* flag, unsigned int v)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *flag = v;
    }
}

// *c += 1 once per launch (from thread 0 of block 0), whatever the grid.
extern "C" __global__ void inc_counter(int* c)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        atomicAdd(c, 1);
    }
}

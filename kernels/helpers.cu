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

// Fixture for the image readers (tests/compile/test_images.py): the same kernels as PTX,
// CUBIN and fatbin, built by tools/make_image_fixtures.sh with nvcc 13.0.
extern "C" __global__ void axpy(float* y, float a, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

namespace ns {
template <typename T> __global__ void scale(T* y, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
template __global__ void scale<float>(float*, float, int);
}

__global__ void plain(int* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

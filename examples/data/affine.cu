// Source of affine.ptx, the PTX-file kernel of examples/foreign_kernels.py. Made with
//   nvcc -ptx -arch=compute_75 -o examples/data/affine.ptx examples/data/affine.cu
// (nvcc 13.0: PTX ISA 9.0, which a CUDA 13 driver JIT-compiles for its GPU).
extern "C" __global__ void affine(const float* x, float* out, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + b;
}

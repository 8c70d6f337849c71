// Kernels that steer a CUDA graph from the GPU: set a conditional node's value,
// count loop passes, launch a graph from device code. They call the device graph API
// (cudaGraphSetConditional, cudaGraphLaunch), which pycudagraph.Program declares for
// NVRTC (pycudagraph/device_api.py): no CUDA toolkit header is needed.

// handle = value
extern "C" __global__ void set_condition(cudaGraphConditionalHandle handle, unsigned int value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cudaGraphSetConditional(handle, value);
    }
}

// handle = *value (a value another kernel computed)
extern "C" __global__ void set_condition_from(cudaGraphConditionalHandle handle, const int* value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cudaGraphSetConditional(handle, (unsigned int)value[0]);
    }
}

// counter[slot] += 1
extern "C" __global__ void count(int* counter, int slot)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        counter[slot] += 1;
    }
}

// A while loop's last kernel: counter[0] += 1, and go on while counter[0] < limit.
extern "C" __global__ void count_while_below(int* counter, int limit,
                                             cudaGraphConditionalHandle handle)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int n = counter[0] + 1;
        counter[0] = n;
        cudaGraphSetConditional(handle, n < limit ? 1u : 0u);
    }
}

// An iterative solver's loop test: iterations[0] += step, and go on while the residual
// is not below tol and fewer than max_iterations were made.
extern "C" __global__ void continue_while_above(const double* residual, double tol,
                                                int* iterations, int step, int max_iterations,
                                                cudaGraphConditionalHandle handle)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int it = iterations[0] + step;
        iterations[0] = it;
        cudaGraphSetConditional(handle, (residual[0] >= tol && it < max_iterations) ? 1u : 0u);
    }
}

// Launch a device-launchable graph exec from the GPU. mode 0: fire and forget (it runs
// beside the launching graph); mode 1: tail launch (it runs after the launching graph).
// status[0] = the cudaError_t of the launch.
extern "C" __global__ void launch_graph(cudaGraphExec_t exec, int mode, int* status)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cudaStream_t s = mode == 1 ? cudaStreamGraphTailLaunch : cudaStreamGraphFireAndForget;
        status[0] = (int)cudaGraphLaunch(exec, s);
    }
}

// One step of a toy decoder: logits = W[token] + bias[step] (V x V table, one row per
// previous token; one bias row per position).
extern "C" __global__ void decode_logits(const float* W, const float* bias, const int* tokens,
                                         const int* step, float* logits, int V)
{
    int s = step[0];
    int prev = tokens[s];
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < V; j += gridDim.x * blockDim.x) {
        logits[j] = W[(long long)prev * V + j] + bias[(long long)s * V + j];
    }
}

// Greedy pick (first index of the largest logit), append it, and go on while it is not
// the stop token and fewer than max_steps were made.
extern "C" __global__ void decode_pick(const float* logits, int* tokens, int* step, int V,
                                       int stop_token, int max_steps,
                                       cudaGraphConditionalHandle handle)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) {
        return;
    }
    int best = 0;
    for (int j = 1; j < V; ++j) {
        if (logits[j] > logits[best]) {
            best = j;
        }
    }
    int s = step[0] + 1;
    tokens[s] = best;
    step[0] = s;
    cudaGraphSetConditional(handle, (best != stop_token && s < max_steps) ? 1u : 0u);
}

// The setter pycudagraph inserts for cap.if_ / cap.while_ / cap.switch: handle = the device
// scalar at value, as a truth value (as_bool: if, while) or as an index (switch; a negative,
// too large or not-a-number value selects no body). kind: 0 int8, 1 uint8 / bool, 2 int16,
// 3 uint16, 4 int32, 5 uint32, 6 int64, 7 uint64, 8 float16, 9 bfloat16, 10 float32,
// 11 float64 (pycudagraph/runtime/device_scalar.py).
extern "C" __global__ void set_condition_of(cudaGraphConditionalHandle handle, const void* value,
                                            int kind, int as_bool)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) {
        return;
    }
    long long v = -1;
    bool nonzero = false;
    switch (kind) {
    case 0: v = ((const signed char*)value)[0]; nonzero = v != 0; break;
    case 1: v = ((const unsigned char*)value)[0]; nonzero = v != 0; break;
    case 2: v = ((const short*)value)[0]; nonzero = v != 0; break;
    case 3: v = ((const unsigned short*)value)[0]; nonzero = v != 0; break;
    case 4: v = ((const int*)value)[0]; nonzero = v != 0; break;
    case 5: v = ((const unsigned int*)value)[0]; nonzero = v != 0; break;
    case 6: v = ((const long long*)value)[0]; nonzero = v != 0; break;
    case 7: {
        unsigned long long u = ((const unsigned long long*)value)[0];
        nonzero = u != 0;
        v = u > 0xffffffffull ? -1 : (long long)u;
        break;
    }
    case 8:
    case 9:  // half and bfloat16: any bit but the sign's (no switch index from these)
        nonzero = (((const unsigned short*)value)[0] & 0x7fffu) != 0;
        break;
    case 10:
    case 11: {
        double d = kind == 10 ? (double)((const float*)value)[0] : ((const double*)value)[0];
        nonzero = d != 0.0;  // NaN is true, as in C
        v = (d >= 0.0 && d < 4294967296.0) ? (long long)d : -1;
        break;
    }
    default:
        break;
    }
    unsigned int out;
    if (as_bool) {
        out = nonzero ? 1u : 0u;
    } else {
        out = (v < 0 || v > 0xffffffffll) ? 0xffffffffu : (unsigned int)v;
    }
    cudaGraphSetConditional(handle, out);
}

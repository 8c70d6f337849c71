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

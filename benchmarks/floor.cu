// "C++ floor" for the pycudagraph benchmark suite: times the same CUDA Graph
// operations with the plain CUDA runtime API and prints one JSON object of
// microsecond medians to stdout.
//
// Build: nvcc -O2 -arch=sm_90 benchmarks/floor.cu -o floor
// Run:   ./floor            (takes a few seconds; needs a GPU)

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s failed at %s:%d: %s (%s)\n", #call, __FILE__,    \
                         __LINE__, cudaGetErrorName(err_), cudaGetErrorString(err_)); \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

// Same kernels as kernels/helpers.cu, compiled into the program.
__global__ void empty() {}

__global__ void empty3(float* p, float a, int n)
{
    if (n < 0 && threadIdx.x == 0 && blockIdx.x == 0) {
        p[0] = a;
    }
}

__global__ void spin(unsigned long long cycles)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) {
        return;
    }
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
}

using Clock = std::chrono::steady_clock;

static double us_between(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double, std::micro>(b - a).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static cudaStream_t g_stream;
static unsigned long long g_spin_cycles;  // about SPIN_MS of GPU time
static const int SPIN_MS = 100;
static int g_spin_expired = 0;  // timed batches that outlived their spin kernel

// Queue a ~100 ms spin kernel so the GPU is busy while the host launches.
// Returns an event recorded right after it, to check it was still running.
static cudaEvent_t queue_spin()
{
    static cudaEvent_t ev = nullptr;
    if (!ev) {
        CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    }
    spin<<<1, 1, 0, g_stream>>>(g_spin_cycles);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev, g_stream));
    return ev;
}

// After a timed batch: note whether the spin had already finished.
static void check_spin_still_running(cudaEvent_t ev)
{
    cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) {
        ++g_spin_expired;
    } else if (q != cudaErrorNotReady) {
        CHECK(q);
    }
}

static cudaKernelNodeParams empty_params()
{
    cudaKernelNodeParams p = {};
    p.func = (void*)empty;
    p.gridDim = dim3(1, 1, 1);
    p.blockDim = dim3(1, 1, 1);
    p.sharedMemBytes = 0;
    p.kernelParams = nullptr;
    p.extra = nullptr;
    return p;
}

// Straight-line chain of k empty kernel nodes.
static cudaGraph_t build_empty_chain(int k)
{
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams p = empty_params();
    cudaGraphNode_t prev = nullptr;
    for (int i = 0; i < k; ++i) {
        cudaGraphNode_t node;
        CHECK(cudaGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &p));
        prev = node;
    }
    return g;
}

// Chain of n empty3 nodes with float argument a; returns time spent in
// cudaGraphAddKernelNode calls (us).
static double build_empty3_chain(cudaGraph_t* out, int n, float* ptr, float a)
{
    CHECK(cudaGraphCreate(out, 0));
    int count = 1;
    void* args[3] = {&ptr, &a, &count};
    cudaKernelNodeParams p = empty_params();
    p.func = (void*)empty3;
    p.kernelParams = args;
    cudaGraphNode_t prev = nullptr;
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        cudaGraphNode_t node;
        CHECK(cudaGraphAddKernelNode(&node, *out, prev ? &prev : nullptr, prev ? 1 : 0, &p));
        prev = node;
    }
    return us_between(t0, Clock::now());
}

// CPU time of one cudaGraphLaunch while the GPU is busy; median over
// `spins` batches of `per_spin` individually timed launches.
static double held_launch(cudaGraphExec_t exec, int per_spin, int spins)
{
    std::vector<double> t;
    for (int s = 0; s < spins; ++s) {
        cudaEvent_t ev = queue_spin();
        for (int i = 0; i < per_spin; ++i) {
            Clock::time_point t0 = Clock::now();
            cudaError_t err = cudaGraphLaunch(exec, g_stream);
            Clock::time_point t1 = Clock::now();
            CHECK(err);
            t.push_back(us_between(t0, t1));
        }
        check_spin_still_running(ev);
        CHECK(cudaStreamSynchronize(g_stream));
    }
    return median(t);
}

static std::string json_escape(const char* s)
{
    std::string r;
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') {
            r += '\\';
        }
        if ((unsigned char)*s >= 0x20) {
            r += *s;
        }
    }
    return r;
}

int main()
{
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(nullptr));  // create the context up front
    CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));

    int dev = 0, clock_khz = 0, driver = 0, runtime = 0;
    CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    CHECK(cudaDriverGetVersion(&driver));
    CHECK(cudaRuntimeGetVersion(&runtime));
    g_spin_cycles = (unsigned long long)clock_khz * SPIN_MS;  // kHz * ms = cycles

    float* dbuf = nullptr;
    CHECK(cudaMalloc(&dbuf, sizeof(float)));

    // Warm up the plain kernels (module load).
    empty<<<1, 1, 0, g_stream>>>();
    empty3<<<1, 1, 0, g_stream>>>(dbuf, 1.0f, 1);
    spin<<<1, 1, 0, g_stream>>>(1000);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(g_stream));

    // --- held launch: K = 1, 100, 1000 -------------------------------------
    const int ks[3] = {1, 100, 1000};
    double held[3];
    cudaGraph_t chain1000 = nullptr;
    cudaGraphExec_t exec1000 = nullptr;
    for (int ki = 0; ki < 3; ++ki) {
        int k = ks[ki];
        cudaGraph_t g = build_empty_chain(k);
        cudaGraphExec_t e;
        CHECK(cudaGraphInstantiate(&e, g, 0));
        CHECK(cudaGraphUpload(e, g_stream));
        for (int i = 0; i < 3; ++i) {
            CHECK(cudaGraphLaunch(e, g_stream));
        }
        CHECK(cudaStreamSynchronize(g_stream));
        // <= 20 queued launches per spin; 10 for the 1000-node graph.
        int per_spin = k >= 1000 ? 10 : 20;
        int spins = k >= 1000 ? 10 : 5;
        held[ki] = held_launch(e, per_spin, spins);
        if (k == 1000) {
            chain1000 = g;
            exec1000 = e;
        } else {
            CHECK(cudaGraphExecDestroy(e));
            CHECK(cudaGraphDestroy(g));
        }
    }

    // --- GPU time per node of the 1000-node empty chain ---------------------
    double gpu_per_node;
    {
        cudaEvent_t a, b;
        CHECK(cudaEventCreate(&a));
        CHECK(cudaEventCreate(&b));
        std::vector<double> t;
        for (int r = 0; r < 5; ++r) {
            CHECK(cudaEventRecord(a, g_stream));
            for (int i = 0; i < 20; ++i) {
                CHECK(cudaGraphLaunch(exec1000, g_stream));
            }
            CHECK(cudaEventRecord(b, g_stream));
            CHECK(cudaEventSynchronize(b));
            float ms = 0.0f;
            CHECK(cudaEventElapsedTime(&ms, a, b));
            t.push_back(ms * 1000.0 / (20.0 * 1000.0));
        }
        gpu_per_node = median(t);
        CHECK(cudaEventDestroy(a));
        CHECK(cudaEventDestroy(b));
    }
    CHECK(cudaGraphExecDestroy(exec1000));
    CHECK(cudaGraphDestroy(chain1000));

    // --- cudaGraphExecKernelNodeSetParams on a one-node empty3 graph --------
    double set_params;
    {
        cudaGraph_t g;
        CHECK(cudaGraphCreate(&g, 0));
        float a = 0.0f;
        int count = 1;
        void* args[3] = {&dbuf, &a, &count};
        cudaKernelNodeParams p = empty_params();
        p.func = (void*)empty3;
        p.kernelParams = args;
        cudaGraphNode_t node;
        CHECK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
        cudaGraphExec_t e;
        CHECK(cudaGraphInstantiate(&e, g, 0));
        const int calls = 10000;
        std::vector<double> t;
        for (int r = 0; r < 21; ++r) {  // first round is warm-up
            Clock::time_point t0 = Clock::now();
            for (int i = 0; i < calls; ++i) {
                a = (float)i;
                CHECK(cudaGraphExecKernelNodeSetParams(e, node, &p));
            }
            double us = us_between(t0, Clock::now()) / calls;
            if (r > 0) {
                t.push_back(us);
            }
        }
        set_params = median(t);
        CHECK(cudaGraphLaunch(e, g_stream));  // the exec must still be valid
        CHECK(cudaStreamSynchronize(g_stream));
        CHECK(cudaGraphExecDestroy(e));
        CHECK(cudaGraphDestroy(g));
    }

    // --- build / instantiate / exec-update of a 1000-node empty3 chain ------
    double build_pn, inst_pn, update_pn;
    {
        const int n = 1000;
        std::vector<double> tb, ti, tu;
        for (int r = 0; r < 11; ++r) {  // first round is warm-up
            cudaGraph_t g1, g2;
            double b = build_empty3_chain(&g1, n, dbuf, 1.0f);

            cudaGraphExec_t e;
            Clock::time_point t0 = Clock::now();
            CHECK(cudaGraphInstantiate(&e, g1, 0));
            double inst = us_between(t0, Clock::now());

            build_empty3_chain(&g2, n, dbuf, 2.0f);  // same topology, new float arg
            cudaGraphExecUpdateResultInfo info = {};
            t0 = Clock::now();
            cudaError_t err = cudaGraphExecUpdate(e, g2, &info);
            double upd = us_between(t0, Clock::now());
            CHECK(err);
            if (info.result != cudaGraphExecUpdateSuccess) {
                std::fprintf(stderr, "cudaGraphExecUpdate result %d\n", (int)info.result);
                return 1;
            }
            if (r > 0) {
                tb.push_back(b / n);
                ti.push_back(inst / n);
                tu.push_back(upd / n);
            }
            CHECK(cudaGraphExecDestroy(e));
            CHECK(cudaGraphDestroy(g1));
            CHECK(cudaGraphDestroy(g2));
        }
        build_pn = median(tb);
        inst_pn = median(ti);
        update_pn = median(tu);
    }

    // --- eager launch: CPU time per empty<<<1,1>>> while the GPU is busy ----
    // 1000 launches per repeat, queued as 2 x 500 behind a spin each so the
    // launch queue never fills up.
    double eager;
    {
        std::vector<double> t;
        for (int r = 0; r < 11; ++r) {  // first round is warm-up
            double total = 0.0;
            for (int half = 0; half < 2; ++half) {
                cudaEvent_t ev = queue_spin();
                Clock::time_point t0 = Clock::now();
                for (int i = 0; i < 500; ++i) {
                    empty<<<1, 1, 0, g_stream>>>();
                }
                total += us_between(t0, Clock::now());
                CHECK(cudaGetLastError());
                check_spin_still_running(ev);
                CHECK(cudaStreamSynchronize(g_stream));
            }
            if (r > 0) {
                t.push_back(total / 1000.0);
            }
        }
        eager = median(t);
    }

    // --- stream-capture 1000 empty launches + instantiate --------------------
    double recapture;
    {
        std::vector<double> t;
        for (int r = 0; r < 6; ++r) {  // first round is warm-up
            cudaGraph_t g;
            cudaGraphExec_t e;
            Clock::time_point t0 = Clock::now();
            CHECK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
            for (int i = 0; i < 1000; ++i) {
                empty<<<1, 1, 0, g_stream>>>();
            }
            CHECK(cudaStreamEndCapture(g_stream, &g));
            CHECK(cudaGraphInstantiate(&e, g, 0));
            double us = us_between(t0, Clock::now());
            CHECK(cudaGetLastError());
            if (r > 0) {
                t.push_back(us);
            }
            CHECK(cudaGraphExecDestroy(e));
            CHECK(cudaGraphDestroy(g));
        }
        recapture = median(t);
    }

    CHECK(cudaFree(dbuf));
    CHECK(cudaStreamDestroy(g_stream));

    std::printf("{\"device\": \"%s\", \"driver\": %d, \"runtime\": %d, "
                "\"held_launch_K1\": %.3f, \"held_launch_K100\": %.3f, "
                "\"held_launch_K1000\": %.3f, \"exec_set_params_3args\": %.4f, "
                "\"build_per_node\": %.4f, \"instantiate_per_node\": %.4f, "
                "\"exec_update_per_node\": %.4f, \"gpu_per_node\": %.4f, "
                "\"eager_launch\": %.3f, \"recapture_instantiate_1000\": %.1f, "
                "\"spin_expired\": %d}\n",
                json_escape(prop.name).c_str(), driver, runtime, held[0], held[1], held[2],
                set_params, build_pn, inst_pn, update_pn, gpu_per_node, eager, recapture,
                g_spin_expired);
    return 0;
}

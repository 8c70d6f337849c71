// "C++ floor" for the pycudagraph benchmark suite: the same CUDA Graph operations with the
// plain CUDA runtime API, one measurement round per request, so the Python suite can
// interleave the floor's rounds with its own (benchmarks/floor.py runs this as a child).
//
// Build: nvcc -O2 -arch=sm_90 benchmarks/floor.cu -o floor
// Run:   ./floor            reads requests on stdin, one per line, and answers each with one
//                           line: the round's figure in microseconds, or "error <text>".
// Requests: "held K" (K = 1, 100, 1000), "eager N", "set_arg N", "set_all N", "build N"
// (N = 3, 10, 30), "instantiate", "update", "capture", "gpu_per_node", "info", "quit", and
// "sizes ..." (the rounds' sizes, as benchmarks/common.py's Settings has them).

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

// A failed call ends the request with "error <call>: <name>" (the process goes on).
struct Failure {
    std::string text;
};

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            throw Failure{std::string(#call) + ": " + cudaGetErrorName(err_)};        \
        }                                                                             \
    } while (0)

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

// The rounds' sizes: what benchmarks/common.py's Settings asks of the Python contestants too.
struct Sizes {
    int held_per_spin[3] = {20, 20, 10};  // K = 1, 100, 1000
    int spin_ms = 20;
    int eager_batch = 200;
    int calls = 1000;
    int nodes = 1000;
    int captured = 1000;
    int gpu_launches = 20;
};

static Sizes g_sizes;
static cudaStream_t g_stream;
static unsigned long long g_cycles_per_ms;
static float* g_buf;  // the pointer every pointer argument gets
static int g_spin_expired = 0;

#include "floor_args.cuh"

// ---- helpers ------------------------------------------------------------------------------

static cudaEvent_t queue_spin()
{
    static cudaEvent_t ev = nullptr;
    if (!ev) {
        CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    }
    void* args[1];
    unsigned long long cycles = g_cycles_per_ms * (unsigned long long)g_sizes.spin_ms;
    args[0] = &cycles;
    CHECK(cudaLaunchKernel((const void*)spin, dim3(1), dim3(1), args, 0, g_stream));
    CHECK(cudaEventRecord(ev, g_stream));
    return ev;
}

static void note_spin(cudaEvent_t ev)
{
    cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) {
        ++g_spin_expired;
    } else if (q != cudaErrorNotReady) {
        CHECK(q);
    }
}

// A chain of `nodes` kernel nodes of argument set n (0: the argument-less `empty`).
static cudaGraph_t chain(int nodes, int n, double a, std::vector<cudaGraphNode_t>* out = nullptr)
{
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams p = {};
    if (n) {
        ArgSet* s = arg_set(n);
        s->write_all(a);
        p = s->params();
    } else {
        p.func = (void*)empty;
        p.gridDim = dim3(1, 1, 1);
        p.blockDim = dim3(1, 1, 1);
    }
    cudaGraphNode_t prev = nullptr;
    for (int i = 0; i < nodes; ++i) {
        cudaGraphNode_t node;
        CHECK(cudaGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &p));
        prev = node;
        if (out) {
            out->push_back(node);
        }
    }
    return g;
}

struct Exec {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t node = nullptr;  // the middle node
};

// An instantiated, uploaded chain; made once per (nodes, n) and kept.
static Exec& exec_of(int nodes, int n)
{
    static std::map<std::pair<int, int>, Exec> made;
    auto key = std::make_pair(nodes, n);
    if (!made.count(key)) {
        Exec e;
        std::vector<cudaGraphNode_t> list;
        e.graph = chain(nodes, n, 1.0, &list);
        e.node = list[list.size() / 2];
        CHECK(cudaGraphInstantiate(&e.exec, e.graph, 0));
        CHECK(cudaGraphUpload(e.exec, g_stream));
        for (int i = 0; i < 3; ++i) {
            CHECK(cudaGraphLaunch(e.exec, g_stream));
        }
        CHECK(cudaStreamSynchronize(g_stream));
        made[key] = e;
    }
    return made[key];
}

// ---- one round of each figure -------------------------------------------------------------

static double held(int k)
{
    int per_spin = k >= 1000 ? g_sizes.held_per_spin[2] : k >= 100 ? g_sizes.held_per_spin[1]
                                                                    : g_sizes.held_per_spin[0];
    cudaGraphExec_t e = exec_of(k, 0).exec;
    std::vector<double> t;
    cudaEvent_t ev = queue_spin();
    for (int i = 0; i < per_spin; ++i) {
        Clock::time_point t0 = Clock::now();
        cudaError_t err = cudaGraphLaunch(e, g_stream);
        Clock::time_point t1 = Clock::now();
        CHECK(err);
        t.push_back(us_between(t0, t1));
    }
    note_spin(ev);
    CHECK(cudaStreamSynchronize(g_stream));
    return median(t);
}

static double eager(int n)
{
    ArgSet* s = arg_set(n);
    int batch = g_sizes.eager_batch;
    cudaEvent_t ev = queue_spin();
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < batch; ++i) {
        CHECK(cudaLaunchKernel(s->func, dim3(1), dim3(1), s->args.data(), 0, g_stream));
    }
    double us = us_between(t0, Clock::now()) / batch;
    note_spin(ev);
    CHECK(cudaStreamSynchronize(g_stream));
    return us;
}

// One argument (index 1, a float) or every argument rewritten, then the exec's node set.
static double set_params(int n, bool all)
{
    Exec& e = exec_of(g_sizes.nodes, n);
    ArgSet* s = arg_set(n);
    cudaKernelNodeParams p = s->params();
    int calls = g_sizes.calls;
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < calls; ++i) {
        if (all) {
            s->write_all((double)(i % 997));
        } else {
            float v = (float)(i % 997);
            std::memcpy(&s->store[1], &v, sizeof v);
        }
        CHECK(cudaGraphExecKernelNodeSetParams(e.exec, e.node, &p));
    }
    return us_between(t0, Clock::now()) / calls;
}

// Per node: every node's arguments written, then cudaGraphAddKernelNode.
static double build(int n)
{
    ArgSet* s = arg_set(n);
    cudaKernelNodeParams p = s->params();
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t prev = nullptr;
    int nodes = g_sizes.nodes;
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < nodes; ++i) {
        s->write_all(1.0);
        cudaGraphNode_t node;
        CHECK(cudaGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &p));
        prev = node;
    }
    double us = us_between(t0, Clock::now()) / nodes;
    CHECK(cudaGraphDestroy(g));
    return us;
}

static double instantiate()
{
    cudaGraph_t g = chain(g_sizes.nodes, 3, 1.0);
    cudaGraphExec_t e;
    Clock::time_point t0 = Clock::now();
    CHECK(cudaGraphInstantiate(&e, g, 0));
    double us = us_between(t0, Clock::now()) / g_sizes.nodes;
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    return us;
}

static double update()
{
    cudaGraph_t g1 = chain(g_sizes.nodes, 3, 1.0), g2 = chain(g_sizes.nodes, 3, 2.0);
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g1, 0));
    cudaGraphExecUpdateResultInfo info = {};
    Clock::time_point t0 = Clock::now();
    cudaError_t err = cudaGraphExecUpdate(e, g2, &info);
    double us = us_between(t0, Clock::now()) / g_sizes.nodes;
    CHECK(err);
    if (info.result != cudaGraphExecUpdateSuccess) {
        throw Failure{"cudaGraphExecUpdate result " + std::to_string((int)info.result)};
    }
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g1));
    CHECK(cudaGraphDestroy(g2));
    return us;
}

static double capture()
{
    cudaGraph_t g;
    cudaGraphExec_t e;
    Clock::time_point t0 = Clock::now();
    CHECK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < g_sizes.captured; ++i) {
        CHECK(cudaLaunchKernel((const void*)empty, dim3(1), dim3(1), nullptr, 0, g_stream));
    }
    CHECK(cudaStreamEndCapture(g_stream, &g));
    CHECK(cudaGraphInstantiate(&e, g, 0));
    double us = us_between(t0, Clock::now());
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    return us;
}

static double gpu_per_node()
{
    static cudaEvent_t a = nullptr, b = nullptr;
    if (!a) {
        CHECK(cudaEventCreate(&a));
        CHECK(cudaEventCreate(&b));
    }
    cudaGraphExec_t e = exec_of(1000, 0).exec;
    int launches = g_sizes.gpu_launches;
    unsigned long long cycles = g_cycles_per_ms * 5;
    void* args[1] = {&cycles};
    CHECK(cudaLaunchKernel((const void*)spin, dim3(1), dim3(1), args, 0, g_stream));
    CHECK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < launches; ++i) {
        CHECK(cudaGraphLaunch(e, g_stream));
    }
    CHECK(cudaEventRecord(b, g_stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0 / (launches * 1000.0);
}

static double answer(const std::string& what, int arg)
{
    if (what == "held") return held(arg);
    if (what == "eager") return eager(arg);
    if (what == "set_arg") return set_params(arg, false);
    if (what == "set_all") return set_params(arg, true);
    if (what == "build") return build(arg);
    if (what == "instantiate") return instantiate();
    if (what == "update") return update();
    if (what == "capture") return capture();
    if (what == "gpu_per_node") return gpu_per_node();
    throw Failure{"unknown request " + what};
}

int main()
{
    try {
        CHECK(cudaSetDevice(0));
        CHECK(cudaFree(nullptr));  // the context, up front
        CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
        int clock_khz = 0;
        CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
        g_cycles_per_ms = (unsigned long long)clock_khz;  // kHz = cycles per ms
        CHECK(cudaMalloc(&g_buf, sizeof(float)));
        for (int n : {3, 10, 30}) {  // load the module, warm each launch
            CHECK(cudaLaunchKernel(arg_set(n)->func, dim3(1), dim3(1), arg_set(n)->args.data(), 0,
                                   g_stream));
        }
        CHECK(cudaLaunchKernel((const void*)empty, dim3(1), dim3(1), nullptr, 0, g_stream));
        CHECK(cudaStreamSynchronize(g_stream));
    } catch (const Failure& f) {
        std::printf("error %s\n", f.text.c_str());
        std::fflush(stdout);
        return 1;
    }
    std::printf("ready\n");
    std::fflush(stdout);
    char line[256];
    while (std::fgets(line, sizeof line, stdin)) {
        char what[64] = {0};
        int arg = 0;
        if (std::sscanf(line, "%63s %d", what, &arg) < 1) {
            continue;
        }
        std::string req(what);
        if (req == "quit") {
            break;
        }
        if (req == "sizes") {  // sizes SPIN_MS EAGER_BATCH CALLS NODES CAPTURED H1 H100 H1000 GPU
            Sizes z;
            int got = std::sscanf(line, "%*s %d %d %d %d %d %d %d %d %d", &z.spin_ms,
                                  &z.eager_batch, &z.calls, &z.nodes, &z.captured,
                                  &z.held_per_spin[0], &z.held_per_spin[1], &z.held_per_spin[2],
                                  &z.gpu_launches);
            if (got == 9) {
                g_sizes = z;
                std::printf("ok\n");
            } else {
                std::printf("error sizes takes 9 numbers\n");
            }
        } else if (req == "info") {
            int driver = 0, runtime = 0;
            cudaDriverGetVersion(&driver);
            cudaRuntimeGetVersion(&runtime);
            std::printf("driver %d runtime %d spin_expired %d\n", driver, runtime, g_spin_expired);
        } else {
            try {
                std::printf("%.4f\n", answer(req, arg));
            } catch (const Failure& f) {
                cudaGetLastError();
                std::printf("error %s\n", f.text.c_str());
            }
        }
        std::fflush(stdout);
    }
    return 0;
}

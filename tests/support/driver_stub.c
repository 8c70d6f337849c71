/* A stand-in for libcuda: the driver entry points pycudagraph's hot calls use, with no GPU.
 *
 * pycudagraph/_cuda/fast.py opens this library instead of libcuda when a test or
 * benchmarks/profile_overhead.py asks it to (fast.use_driver_library). Each entry point
 * counts its calls, records its integer arguments and the argument values it was handed
 * (stub_sizes says how many bytes each value has), writes a fake handle where the real
 * one would write one, and returns stub_rc[entry] (0 unless a test sets it).
 *
 * Built with -DWITH_CALLGRIND, stub_zero() starts callgrind's instrumentation and zeroes its
 * counters and stub_dump(name) dumps and stops them, so a measurement counts the
 * instructions of exactly one loop (run valgrind with --instr-atstart=no).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef WITH_CALLGRIND
#include <valgrind/callgrind.h>
#endif

enum { E_LAUNCH, E_LAUNCH_KERNEL, E_ADD, E_NODE_SET, E_EXEC_SET, E_UPDATE, E_INSTANTIATE,
       E_EXEC_DESTROY, E_CREATE, E_DESTROY, E_BEGIN_CAPTURE, E_END_CAPTURE, E_DESTROY_NODE,
       E_COUNT };

int stub_rc[E_COUNT];
int stub_fail_at[E_COUNT];   /* n > 0: the n-th call from now returns 1, the rest as before */
long long stub_calls[E_COUNT];
int stub_last = -1;          /* entry of the last call */
int stub_record = 1;         /* 0: count only (benchmarks) */
uint64_t stub_ints[12];      /* integer arguments of the last call, in order */
uint64_t stub_deps[64];      /* dependencies of the last add */
uint8_t stub_header[72];     /* CUDA_KERNEL_NODE_PARAMS_v2 of the last add / set */
int stub_nsizes;             /* the values of the last call: stub_sizes[i] bytes each, */
int stub_sizes[64];          /* concatenated in stub_values */
uint8_t stub_values[4096];

static int enter(int entry)
{
    stub_calls[entry]++;
    stub_last = entry;
    if (stub_fail_at[entry] > 0 && --stub_fail_at[entry] == 0)
        return 1;   /* CUDA_ERROR_INVALID_VALUE */
    return stub_rc[entry];
}

static void take_values(void *const *params)
{
    size_t at = 0;
    if (!params)
        return;
    for (int i = 0; i < stub_nsizes && i < 64; i++) {
        size_t n = (size_t)stub_sizes[i];
        if (at + n > sizeof stub_values)
            break;
        memcpy(stub_values + at, params[i], n);
        at += n;
    }
}

static void take_params(const void *params)
{
    memcpy(stub_header, params, sizeof stub_header);
    void *const *args;
    memcpy(&args, (const uint8_t *)params + 40, sizeof args);   /* kernelParams */
    if (args)
        take_values(args);
}

int cuGraphLaunch(void *exec, void *stream)
{
    int rc = enter(E_LAUNCH);
    if (stub_record) {
        stub_ints[0] = (uintptr_t)exec;
        stub_ints[1] = (uintptr_t)stream;
    }
    return rc;
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shm, void *stream, void **params, void **extra)
{
    int rc = enter(E_LAUNCH_KERNEL);
    if (stub_record) {
        uint64_t v[] = {(uintptr_t)f, gx, gy, gz, bx, by, bz, shm, (uintptr_t)stream,
                        (uintptr_t)extra};
        memcpy(stub_ints, v, sizeof v);
        take_values(params);
    }
    return rc;
}

int cuGraphAddKernelNode_v2(void **node, void *graph, void *const *deps, size_t n,
                            const void *params)
{
    int rc = enter(E_ADD);
    if (stub_record) {
        stub_ints[0] = (uintptr_t)graph;
        stub_ints[1] = n;
        for (size_t i = 0; i < n && i < 64; i++)
            stub_deps[i] = (uintptr_t)deps[i];
        take_params(params);
    }
    if (!rc)
        *node = (void *)(uintptr_t)(0xABC000 + stub_calls[E_ADD]);
    return rc;
}

int cuGraphKernelNodeSetParams_v2(void *node, const void *params)
{
    int rc = enter(E_NODE_SET);
    if (stub_record) {
        stub_ints[0] = (uintptr_t)node;
        take_params(params);
    }
    return rc;
}

int cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const void *params)
{
    int rc = enter(E_EXEC_SET);
    if (stub_record) {
        stub_ints[0] = (uintptr_t)exec;
        stub_ints[1] = (uintptr_t)node;
        take_params(params);
    }
    return rc;
}

int cuGraphExecUpdate_v2(void *exec, void *graph, void *info)
{
    int rc = enter(E_UPDATE);
    if (stub_record) {
        stub_ints[0] = (uintptr_t)exec;
        stub_ints[1] = (uintptr_t)graph;
    }
    if (info) {
        memset(info, 0, 24);
        if (rc)   /* refused: result CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, no node */
            *(int *)info = 2;
    }
    return rc;
}

int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    int rc = enter(E_INSTANTIATE);
    if (stub_record) {
        stub_ints[0] = (uintptr_t)graph;
        stub_ints[1] = flags;
    }
    if (!rc)
        *exec = (void *)(uintptr_t)(0xE0E000 + stub_calls[E_INSTANTIATE]);
    return rc;
}

/* What the benchmarks' bare driver calls (benchmarks/bare.c) use besides the hot calls. */
int cuGraphExecDestroy(void *exec)
{
    (void)exec;
    return enter(E_EXEC_DESTROY);
}

int cuGraphCreate(void **graph, unsigned flags)
{
    int rc = enter(E_CREATE);
    (void)flags;
    if (!rc)
        *graph = (void *)(uintptr_t)(0x6A0000 + stub_calls[E_CREATE]);
    return rc;
}

int cuGraphDestroy(void *graph)
{
    (void)graph;
    return enter(E_DESTROY);
}

int cuGraphDestroyNode(void *node)
{
    int rc = enter(E_DESTROY_NODE);
    if (stub_record)
        stub_ints[0] = (uintptr_t)node;
    return rc;
}

int cuStreamBeginCapture_v2(void *stream, int mode)
{
    (void)stream;
    (void)mode;
    return enter(E_BEGIN_CAPTURE);
}

int cuStreamEndCapture(void *stream, void **graph)
{
    int rc = enter(E_END_CAPTURE);
    (void)stream;
    if (!rc)
        *graph = (void *)(uintptr_t)(0x6B0000 + stub_calls[E_END_CAPTURE]);
    return rc;
}

void stub_zero(void)
{
#ifdef WITH_CALLGRIND
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
#endif
}

void stub_dump(const char *name)
{
#ifdef WITH_CALLGRIND
    CALLGRIND_DUMP_STATS_AT(name);
    CALLGRIND_STOP_INSTRUMENTATION;
#else
    (void)name;
#endif
}

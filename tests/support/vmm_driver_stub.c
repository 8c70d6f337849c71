/* A stand-in for libcuda's virtual memory management entry points, with no GPU.
 *
 * pycudagraph/_cuda/vmm.py hands these to the compiled table (pycudagraph._cuda._vmm) when
 * a test calls vmm.use_driver_library(path). The stub keeps what the driver would keep:
 * reserved ranges, physical handles and their bytes, mappings, the current context and the
 * thread's capture mode, and counts every misuse a real driver would refuse (mapping a
 * range twice, unmapping what is not mapped, freeing a range still mapped, releasing a
 * handle twice ...) in stub_misuse. stub_fail_at[entry] = n makes the n-th call of that
 * entry point (counting from 1) return stub_fail_rc (2, out of memory, unless set).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { E_RESERVE, E_ADDRESS_FREE, E_CREATE, E_RELEASE, E_MAP, E_UNMAP, E_ACCESS, E_GRAN,
       E_CTX_GET, E_CTX_SET, E_PRIMARY, E_CTX_SYNC, E_PUSH, E_POP, E_CAPTURE_MODE, E_COUNT };

#define MAX 4096
typedef unsigned long long u64;

long long stub_calls[E_COUNT];
long long stub_fail_at[E_COUNT];
int stub_fail_rc = 2;
long long stub_misuse;
u64 stub_granularity = 2 << 20;
long long stub_ranges, stub_handles, stub_mappings;  /* live now */
u64 stub_physical_bytes;                               /* bytes of live handles */
void *stub_current;                                    /* the current context */
int stub_mode;                                         /* the thread's capture mode */
int stub_last_access_flags, stub_last_access_device, stub_last_create_device;

static struct { u64 ptr, size; int live; } ranges[MAX];
static struct { u64 size; int live, mapped; } handles[MAX];
static struct { u64 ptr, size, handle; int live; } maps[MAX];
static int nranges, nhandles, nmaps;
static u64 next_va = 0x7f0000000000ULL;

static int enter(int e)
{
    long long n = ++stub_calls[e];
    if (stub_fail_at[e] && n == stub_fail_at[e])
        return stub_fail_rc;
    return 0;
}

static int misuse(void)
{
    stub_misuse++;
    return 1;  /* CUDA_ERROR_INVALID_VALUE */
}

int cuMemGetAllocationGranularity(size_t *g, const void *prop, int option)
{
    int rc = enter(E_GRAN);
    if (!rc)
        *g = stub_granularity;
    return rc;
}

int cuMemAddressReserve(u64 *ptr, size_t size, size_t align, u64 addr, u64 flags)
{
    int rc = enter(E_RESERVE);
    if (rc)
        return rc;
    if (!size || size % stub_granularity || nranges == MAX)
        return misuse();
    ranges[nranges].ptr = next_va;
    ranges[nranges].size = size;
    ranges[nranges++].live = 1;
    *ptr = next_va;
    next_va += size + stub_granularity;
    stub_ranges++;
    return 0;
}

static int find_range(u64 ptr, size_t size)
{
    for (int i = 0; i < nranges; i++)
        if (ranges[i].live && ranges[i].ptr == ptr && ranges[i].size == size)
            return i;
    return -1;
}

static int find_map(u64 ptr)
{
    for (int i = 0; i < nmaps; i++)
        if (maps[i].live && maps[i].ptr == ptr)
            return i;
    return -1;
}

int cuMemAddressFree(u64 ptr, size_t size)
{
    int rc = enter(E_ADDRESS_FREE);
    if (rc)
        return rc;
    int i = find_range(ptr, size);
    if (i < 0 || find_map(ptr) >= 0)
        return misuse();
    ranges[i].live = 0;
    stub_ranges--;
    return 0;
}

int cuMemCreate(u64 *handle, size_t size, const int *prop, u64 flags)
{
    int rc = enter(E_CREATE);
    if (rc)
        return rc;
    /* prop: type 1 (pinned), location type 1 (device), the device */
    if (prop[0] != 1 || prop[2] != 1 || size % stub_granularity || nhandles == MAX)
        return misuse();
    stub_last_create_device = prop[3];
    handles[nhandles].size = size;
    handles[nhandles].live = 1;
    handles[nhandles].mapped = 0;
    *handle = (u64)(++nhandles);  /* 1-based: 0 is no handle */
    stub_handles++;
    stub_physical_bytes += size;
    return 0;
}

int cuMemRelease(u64 handle)
{
    int rc = enter(E_RELEASE);
    if (rc)
        return rc;
    if (!handle || handle > (u64)nhandles || !handles[handle - 1].live)
        return misuse();
    handles[handle - 1].live = 0;
    stub_handles--;
    stub_physical_bytes -= handles[handle - 1].size;
    return 0;
}

int cuMemMap(u64 ptr, size_t size, size_t offset, u64 handle, u64 flags)
{
    int rc = enter(E_MAP);
    if (rc)
        return rc;
    if (find_range(ptr, size) < 0 || find_map(ptr) >= 0 || !handle ||
        handle > (u64)nhandles || !handles[handle - 1].live || nmaps == MAX)
        return misuse();
    maps[nmaps].ptr = ptr;
    maps[nmaps].size = size;
    maps[nmaps].handle = handle;
    maps[nmaps++].live = 1;
    stub_mappings++;
    return 0;
}

int cuMemUnmap(u64 ptr, size_t size)
{
    int rc = enter(E_UNMAP);
    if (rc)
        return rc;
    int i = find_map(ptr);
    if (i < 0 || maps[i].size != size)
        return misuse();
    maps[i].live = 0;
    stub_mappings--;
    return 0;
}

int cuMemSetAccess(u64 ptr, size_t size, const int *desc, size_t count)
{
    int rc = enter(E_ACCESS);
    if (rc)
        return rc;
    if (find_map(ptr) < 0 || count != 1)
        return misuse();
    stub_last_access_device = desc[1];
    stub_last_access_flags = desc[2];
    return 0;
}

int cuCtxGetCurrent(void **ctx)
{
    int rc = enter(E_CTX_GET);
    if (!rc)
        *ctx = stub_current;
    return rc;
}

int cuCtxSetCurrent(void *ctx)
{
    int rc = enter(E_CTX_SET);
    if (!rc)
        stub_current = ctx;
    return rc;
}

int cuDevicePrimaryCtxRetain(void **ctx, int device)
{
    int rc = enter(E_PRIMARY);
    if (!rc)
        *ctx = (void *)(uintptr_t)(0x1000 + device);
    return rc;
}

int cuCtxSynchronize(void)
{
    return enter(E_CTX_SYNC);
}

static void *pushed;

int cuCtxPushCurrent_v2(void *ctx)
{
    int rc = enter(E_PUSH);
    if (!rc) {
        pushed = stub_current;
        stub_current = ctx;
    }
    return rc;
}

int cuCtxPopCurrent_v2(void **ctx)
{
    int rc = enter(E_POP);
    if (!rc) {
        if (ctx)
            *ctx = stub_current;
        stub_current = pushed;
    }
    return rc;
}

int cuThreadExchangeStreamCaptureMode(int *mode)
{
    int rc = enter(E_CAPTURE_MODE);
    if (!rc) {
        int old = stub_mode;
        stub_mode = *mode;
        *mode = old;
    }
    return rc;
}

/* Forget everything (a test starting afresh). */
void stub_reset(void)
{
    memset(stub_calls, 0, sizeof stub_calls);
    memset(stub_fail_at, 0, sizeof stub_fail_at);
    stub_fail_rc = 2;
    stub_misuse = 0;
}

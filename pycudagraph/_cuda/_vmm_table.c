/* The table of sleepable device memory: CUDA's virtual memory management (VMM) behind one
 * table, for pycudagraph's sleepable pools (no Python here; _vmm.c is the module).
 *
 * Every allocation is its own virtual address range (cuMemAddressReserve) backed by one
 * physical allocation (cuMemCreate, pinned device memory) mapped there (cuMemMap) and made
 * readable and writable by its device (cuMemSetAccess). The table keeps (address, size,
 * physical handle, device, mapped, tag) of each. vmm_unmap(tag) gives the physical memory
 * of every allocation of a tag back to the driver (cuMemUnmap + cuMemRelease) and keeps the
 * address ranges; vmm_remap(tag) backs them with new physical memory at the same addresses.
 *
 * pcg_vmm_malloc / pcg_vmm_free are the allocator functions PyTorch's
 * CUDAPluggableAllocator calls (no Python, no GIL: a mutex guards the table); they tag each
 * allocation with this thread's tag, which the Python side sets (vmm_set_tag) while it
 * routes PyTorch's allocations to a sleepable pool. vmm_alloc / vmm_free serve CuPy the
 * same way from Python.
 *
 * No CUDA header and no link to libcuda: the driver entry points are handed over at run
 * time (vmm_set_driver), by pycudagraph/_cuda/vmm.py.
 */
#include "_vmm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PCG_EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 64
#define CAPTURE_RELAXED 2

typedef unsigned long long handle_t;

/* CUmemAllocationProp (32 bytes) and CUmemAccessDesc (12 bytes), as cuda.h lays them out */
typedef struct {
    int type, handle_types, loc_type, loc_id;
    void *win32;
    unsigned char compression, rdma;
    unsigned short usage;
    unsigned char reserved[4];
} alloc_prop;
typedef struct { int loc_type, loc_id, flags; } access_desc;
_Static_assert(sizeof(alloc_prop) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(access_desc) == 12, "CUmemAccessDesc is 12 bytes");

enum { F_RESERVE, F_ADDRESS_FREE, F_CREATE, F_RELEASE, F_MAP, F_UNMAP, F_ACCESS, F_GRAN,
       F_CTX_GET, F_CTX_SET, F_PRIMARY, F_CTX_SYNC, F_PUSH, F_POP, F_CAPTURE_MODE, F_COUNT };
const char *const VMM_NAMES[VMM_ENTRY_COUNT] = {
    "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
    "cuMemUnmap", "cuMemSetAccess", "cuMemGetAllocationGranularity", "cuCtxGetCurrent",
    "cuCtxSetCurrent", "cuDevicePrimaryCtxRetain", "cuCtxSynchronize", "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2", "cuThreadExchangeStreamCaptureMode"};
static void *F[F_COUNT];

#define CALL(i, type, ...) (((type)F[i])(__VA_ARGS__))
typedef int (*reserve_fn)(dptr *, size_t, size_t, dptr, unsigned long long);
typedef int (*range_fn)(dptr, size_t);
typedef int (*create_fn)(handle_t *, size_t, const alloc_prop *, unsigned long long);
typedef int (*release_fn)(handle_t);
typedef int (*map_fn)(dptr, size_t, size_t, handle_t, unsigned long long);
typedef int (*access_fn)(dptr, size_t, const access_desc *, size_t);
typedef int (*gran_fn)(size_t *, const alloc_prop *, int);
typedef int (*ctx_out_fn)(void **);
typedef int (*ctx_in_fn)(void *);
typedef int (*primary_fn)(void **, int);
typedef int (*void_fn)(void);
typedef int (*mode_fn)(int *);

typedef vmm_entry entry_t;
_Static_assert(F_COUNT == VMM_ENTRY_COUNT, "one name per entry point");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *table;
static size_t count, capacity;
static size_t granularity[MAX_DEVICES];
static void *primary[MAX_DEVICES];
static const char *last_api;    /* the allocator functions' last failure, for Python */
static int last_rc;
static _Thread_local unsigned long long current_tag;

static alloc_prop prop_for(int device)
{
    alloc_prop p;
    memset(&p, 0, sizeof p);
    p.type = 1;      /* CU_MEM_ALLOCATION_TYPE_PINNED */
    p.loc_type = 1;  /* CU_MEM_LOCATION_TYPE_DEVICE */
    p.loc_id = device;
    return p;
}

/* The device's primary context, retained once (cuDevicePrimaryCtxRetain). Under lock. */
static int primary_ctx(int device, void **out, const char **api)
{
    if (!primary[device]) {
        int rc = CALL(F_PRIMARY, primary_fn, &primary[device], device);
        if (rc) {
            primary[device] = NULL;
            *api = VMM_NAMES[F_PRIMARY];
            return rc;
        }
    }
    *out = primary[device];
    return 0;
}

/* A context is current in this thread (the device's primary one when none is). */
static int ensure_ctx(int device, const char **api)
{
    void *ctx = NULL;
    int rc = CALL(F_CTX_GET, ctx_out_fn, &ctx);
    if (rc || ctx) {
        *api = VMM_NAMES[F_CTX_GET];
        return rc;
    }
    if ((rc = primary_ctx(device, &ctx, api)))
        return rc;
    rc = CALL(F_CTX_SET, ctx_in_fn, ctx);
    *api = VMM_NAMES[F_CTX_SET];
    return rc;
}

static int granule(int device, size_t *out, const char **api)
{
    if (!granularity[device]) {
        alloc_prop p = prop_for(device);
        size_t g = 0;
        int rc = CALL(F_GRAN, gran_fn, &g, &p, 0);  /* CU_MEM_ALLOC_GRANULARITY_MINIMUM */
        if (rc || !g) {
            *api = VMM_NAMES[F_GRAN];
            return rc ? rc : VMM_ERR_INVALID_VALUE;
        }
        granularity[device] = g;
    }
    *out = granularity[device];
    return 0;
}

/* New physical memory for [ptr, ptr + size), mapped read/write for its device; nothing
 * is left behind when a step fails. */
static int back(dptr ptr, size_t size, int device, handle_t *out, const char **api)
{
    alloc_prop p = prop_for(device);
    access_desc a = {1, device, 3};  /* the device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
    handle_t h = 0;
    int rc = CALL(F_CREATE, create_fn, &h, size, &p, 0);
    if (rc) {
        *api = VMM_NAMES[F_CREATE];
        return rc;
    }
    if ((rc = CALL(F_MAP, map_fn, ptr, size, 0, h, 0))) {
        *api = VMM_NAMES[F_MAP];
        CALL(F_RELEASE, release_fn, h);
        return rc;
    }
    if ((rc = CALL(F_ACCESS, access_fn, ptr, size, &a, 1))) {
        *api = VMM_NAMES[F_ACCESS];
        CALL(F_UNMAP, range_fn, ptr, size);
        CALL(F_RELEASE, release_fn, h);
        return rc;
    }
    *out = h;
    return 0;
}

/* Give the physical memory back (cuMemUnmap, then cuMemRelease); the range stays. */
static int unback(entry_t *e, const char **api)
{
    int rc = CALL(F_UNMAP, range_fn, e->ptr, e->size);
    if (rc) {
        *api = VMM_NAMES[F_UNMAP];
        return rc;
    }
    e->mapped = 0;
    rc = CALL(F_RELEASE, release_fn, e->handle);
    e->handle = 0;
    if (rc)
        *api = VMM_NAMES[F_RELEASE];
    return rc;
}

static int ready(const char **api)
{
    for (int i = 0; i < F_COUNT; i++)
        if (!F[i]) {
            *api = "pycudagraph._cuda._vmm (driver entry points not set)";
            return VMM_ERR_NOT_INITIALIZED;
        }
    return 0;
}

static int add_entry(entry_t e, const char **api)
{
    if (count == capacity) {
        size_t n = capacity ? 2 * capacity : 64;
        entry_t *t = realloc(table, n * sizeof *t);
        if (!t) {
            *api = "malloc (the allocation table)";
            return VMM_ERR_OUT_OF_MEMORY;
        }
        table = t;
        capacity = n;
    }
    table[count++] = e;
    return 0;
}

/* One allocation of at least size bytes (rounded up to the device's granularity). */
int vmm_alloc(size_t size, int device, vmm_tag tag, dptr *out,
                     const char **api)
{
    int rc = ready(api);
    if (rc)
        return rc;
    if (device < 0 || device >= MAX_DEVICES) {
        *api = "pcg_vmm_malloc (device ordinal out of range)";
        return VMM_ERR_INVALID_VALUE;
    }
    int mode = CAPTURE_RELAXED;  /* allowed inside a stream capture, as cudaMalloc is */
    if ((rc = CALL(F_CAPTURE_MODE, mode_fn, &mode))) {
        *api = VMM_NAMES[F_CAPTURE_MODE];
        return rc;
    }
    pthread_mutex_lock(&lock);
    size_t g = 0;
    dptr ptr = 0;
    handle_t h = 0;
    if (!(rc = ensure_ctx(device, api)) && !(rc = granule(device, &g, api))) {
        size = (size + g - 1) / g * g;
        if ((rc = CALL(F_RESERVE, reserve_fn, &ptr, size, g, 0, 0))) {
            *api = VMM_NAMES[F_RESERVE];
        } else if ((rc = back(ptr, size, device, &h, api))) {
            CALL(F_ADDRESS_FREE, range_fn, ptr, size);
        } else {
            entry_t e = {ptr, size, h, device, 1, tag};
            if ((rc = add_entry(e, api))) {
                CALL(F_UNMAP, range_fn, ptr, size);
                CALL(F_RELEASE, release_fn, h);
                CALL(F_ADDRESS_FREE, range_fn, ptr, size);
            }
        }
    }
    pthread_mutex_unlock(&lock);
    CALL(F_CAPTURE_MODE, mode_fn, &mode);
    if (!rc)
        *out = ptr;
    return rc;
}

/* Free an allocation of the table: wait for its device's work (cuCtxSynchronize, as
 * cudaFree does), unmap and release what is mapped, free the range. */
int vmm_free(dptr ptr, const char **api)
{
    int rc = ready(api);
    if (rc)
        return rc;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < count && table[i].ptr != ptr)
        i++;
    if (i == count) {
        pthread_mutex_unlock(&lock);
        *api = "pcg_vmm_free (not an allocation of this table)";
        return VMM_ERR_INVALID_VALUE;
    }
    entry_t e = table[i];
    table[i] = table[--count];
    void *ctx = NULL, *old = NULL;
    if (e.mapped && !primary_ctx(e.device, &ctx, api) && !CALL(F_PUSH, ctx_in_fn, ctx)) {
        ((void_fn)F[F_CTX_SYNC])();  /* best effort: inside a capture it is refused */
        CALL(F_POP, ctx_out_fn, &old);
    }
    rc = e.mapped ? unback(&e, api) : 0;
    int rc2 = CALL(F_ADDRESS_FREE, range_fn, e.ptr, e.size);
    pthread_mutex_unlock(&lock);
    if (!rc && rc2) {
        rc = rc2;
        *api = VMM_NAMES[F_ADDRESS_FREE];
    }
    return rc;
}

static void note_failure(const char *api, int rc)
{
    pthread_mutex_lock(&lock);
    last_api = api;
    last_rc = rc;
    pthread_mutex_unlock(&lock);
}

/* PyTorch's CUDAPluggableAllocator calls these two (no GIL). */
PCG_EXPORT void *pcg_vmm_malloc(size_t size, int device, void *stream)
{
    (void)stream;
    if (!size)
        return NULL;
    dptr ptr = 0;
    const char *api = NULL;
    int rc = vmm_alloc(size, device, current_tag, &ptr, &api);
    if (rc) {
        note_failure(api, rc);
        return NULL;
    }
    return (void *)(uintptr_t)ptr;
}

PCG_EXPORT void pcg_vmm_free(void *ptr, size_t size, int device, void *stream)
{
    (void)size; (void)device; (void)stream;
    const char *api = NULL;
    int rc = ptr ? vmm_free((dptr)(uintptr_t)ptr, &api) : 0;
    if (rc)
        note_failure(api, rc);
}

/* ---------------------------------------------------------------------------------- */
/* What the Python module (_vmm.c) calls */

void vmm_set_driver(void *const entry_points[VMM_ENTRY_COUNT])
{
    pthread_mutex_lock(&lock);
    memcpy(F, entry_points, sizeof F);
    memset(granularity, 0, sizeof granularity);
    memset(primary, 0, sizeof primary);
    pthread_mutex_unlock(&lock);
}

vmm_tag vmm_set_tag(vmm_tag tag)
{
    vmm_tag old = current_tag;
    current_tag = tag;
    return old;
}

/* Unmap and release the physical memory of every mapped allocation of tag; the ranges stay
 * reserved. Stops at the first failure (what was unmapped before it stays unmapped). */
int vmm_unmap(vmm_tag tag, size_t *n, size_t *bytes, const char **api)
{
    *n = *bytes = 0;
    pthread_mutex_lock(&lock);
    int rc = ready(api);
    for (size_t i = 0; !rc && i < count; i++) {
        entry_t *e = &table[i];
        if (e->tag != tag || !e->mapped)
            continue;
        if (!(rc = unback(e, api))) {
            *n += 1;
            *bytes += e->size;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Back every unmapped allocation of tag with new physical memory at its address. All or
 * nothing: on a failure, what this call mapped is unmapped again. */
int vmm_remap(vmm_tag tag, size_t *n, size_t *bytes, const char **api)
{
    *n = *bytes = 0;
    pthread_mutex_lock(&lock);
    size_t *done = malloc((count ? count : 1) * sizeof *done);
    int rc = done ? ready(api) : VMM_ERR_OUT_OF_MEMORY;
    if (!done)
        *api = "malloc (remap)";
    for (size_t i = 0; !rc && i < count; i++) {
        entry_t *e = &table[i];
        if (e->tag != tag || e->mapped)
            continue;
        if (!(rc = ensure_ctx(e->device, api)) &&
            !(rc = back(e->ptr, e->size, e->device, &e->handle, api))) {
            e->mapped = 1;
            done[(*n)++] = i;
            *bytes += e->size;
        }
    }
    if (rc && done) {
        const char *ignored = NULL;
        for (size_t k = 0; k < *n; k++)
            unback(&table[done[k]], &ignored);
        *n = *bytes = 0;
    }
    free(done);
    pthread_mutex_unlock(&lock);
    return rc;
}

vmm_entry *vmm_snapshot(size_t *n)
{
    pthread_mutex_lock(&lock);
    *n = count;
    vmm_entry *copy = malloc((count ? count : 1) * sizeof *copy);
    if (copy && count)
        memcpy(copy, table, count * sizeof *copy);
    pthread_mutex_unlock(&lock);
    return copy;
}

const char *vmm_take_error(int *rc)
{
    pthread_mutex_lock(&lock);
    const char *api = last_api;
    *rc = last_rc;
    last_api = NULL;
    last_rc = 0;
    pthread_mutex_unlock(&lock);
    return api;
}

/* The table of sleepable device memory (_vmm_table.c) as the Python module (_vmm.c) sees it.
 * Each function returns a CUresult (0: success) and, on failure, the name of the call
 * that failed in *api. */
#ifndef PCG_VMM_H
#define PCG_VMM_H

#include <stddef.h>

/* Internal to the extension: only PyInit__vmm and the two allocator functions are exported. */
#define VMM_API __attribute__((visibility("hidden")))

#define VMM_ENTRY_COUNT 15
#define VMM_ERR_INVALID_VALUE 1
#define VMM_ERR_OUT_OF_MEMORY 2
#define VMM_ERR_NOT_INITIALIZED 3

typedef unsigned long long dptr;
typedef unsigned long long vmm_tag;

/* One allocation: its range, device, whether physical memory backs it now, its tag. */
typedef struct {
    dptr ptr;
    size_t size;
    unsigned long long handle;
    int device, mapped;
    vmm_tag tag;
} vmm_entry;

/* The driver entry points, by name, in the order set_driver takes them. */
VMM_API extern const char *const VMM_NAMES[VMM_ENTRY_COUNT];

VMM_API void vmm_set_driver(void *const entry_points[VMM_ENTRY_COUNT]);
VMM_API vmm_tag vmm_set_tag(vmm_tag tag);
VMM_API int vmm_alloc(size_t size, int device, vmm_tag tag, dptr *out, const char **api);
VMM_API int vmm_free(dptr ptr, const char **api);
VMM_API int vmm_unmap(vmm_tag tag, size_t *n, size_t *bytes, const char **api);
VMM_API int vmm_remap(vmm_tag tag, size_t *n, size_t *bytes, const char **api);
/* A copy of the table (malloc'd; the caller frees it), its length in *n; NULL when out of
 * memory. */
VMM_API vmm_entry *vmm_snapshot(size_t *n);
/* The allocator functions' last failure (its call's name, NULL when none), cleared. */
VMM_API const char *vmm_take_error(int *rc);

#endif

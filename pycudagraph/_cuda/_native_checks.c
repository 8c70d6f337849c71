/* records_pass: a graph file's binary kernel records and relocations judged in one pass over
 * the tables (files/bulk_format.py's _records_pass, whose rules this follows check for
 * check; the file's check takes this where the extension is built, the Python pass on the
 * ctypes route).
 *
 * records_pass(recs, nargs, ndeps, relocs, blocks, nkernels, sizes, nslots) -> bool.
 * recs: records of 12 little-endian u32 (files: _cuda/bulk.py's RECORD); relocs: entries of
 * record, at, kind, target (u32) and offset (u64); blocks: per kernel its argument bytes
 * (int64, -1 for none); sizes: per slot (sorted by name) its bytes (int64, -1: an event).
 * True only when none of the named checks would fail; False sends the file through them,
 * which name what is wrong. No CUDA call, no Python object made per entry. */
#include "_native.h"

#include <string.h>

enum { W_KERNEL, W_GRID, W_BLOCK = 4, W_SHM = 7, W_OFF, W_LEN, W_DEP_FIRST, W_DEP_COUNT,
       W_WORDS };
enum { RELOC_BYTES = 24 };

#define MOST_GRID ((1ull << 31) - 1)
#define MOST_BLOCK 1024ull
#define MOST_SHARED (1ull << 24)

static int records_ok(const Py_buffer *rb, long long nargs, long long ndeps,
                      const long long *blocks, long long nblocks, long long nkernels)
{
    Py_ssize_t n = rb->len / (W_WORDS * 4);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t w[W_WORDS];
        memcpy(w, (const char *)rb->buf + i * sizeof w, sizeof w);
        if ((long long)w[W_KERNEL] >= nkernels || (long long)w[W_KERNEL] >= nblocks ||
            (long long)w[W_LEN] != blocks[w[W_KERNEL]] ||
            (long long)w[W_OFF] + w[W_LEN] > nargs ||
            (long long)w[W_DEP_FIRST] + w[W_DEP_COUNT] > ndeps)
            return 0;
        for (int d = 0; d < 3; d++)
            if (w[W_GRID + d] < 1 || w[W_GRID + d] > MOST_GRID || w[W_BLOCK + d] < 1 ||
                w[W_BLOCK + d] > MOST_BLOCK)
                return 0;
        if (w[W_SHM] > MOST_SHARED ||
            (uint64_t)w[W_BLOCK] * w[W_BLOCK + 1] * w[W_BLOCK + 2] > MOST_BLOCK)
            return 0;
    }
    return 1;
}

static int relocs_ok(const Py_buffer *rb, const Py_buffer *lb, const long long *sizes,
                     long long nsizes, long long nslots)
{
    Py_ssize_t n = rb->len / (W_WORDS * 4), m = lb->len / RELOC_BYTES;
    uint64_t prev = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        uint32_t e[4];
        uint64_t offset;
        const char *at = (const char *)lb->buf + j * RELOC_BYTES;
        memcpy(e, at, sizeof e);
        memcpy(&offset, at + 16, sizeof offset);
        if ((Py_ssize_t)e[0] >= n || e[2] > 1)
            return 0;
        uint32_t len;
        memcpy(&len, (const char *)rb->buf + e[0] * (Py_ssize_t)(W_WORDS * 4) + 4 * W_LEN,
               sizeof len);
        if ((uint64_t)e[1] + 8 > len)
            return 0;
        uint64_t key = ((uint64_t)e[0] << 32) | e[1];
        if (j && (key < prev || key - prev < 8))   /* in order, none overlapping */
            return 0;
        prev = key;
        if (e[2] == 0) {   /* a slot: inside it (allocations are checked by their nodes) */
            if ((long long)e[3] >= nslots || (long long)e[3] >= nsizes || sizes[e[3]] < 0 ||
                offset > (uint64_t)sizes[e[3]])
                return 0;
        }
    }
    return 1;
}

PyObject *records_pass(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "records_pass(recs, nargs, ndeps, relocs, blocks, "
                        "nkernels, sizes, nslots)");
        return NULL;
    }
    long long num[4];   /* nargs, ndeps, nkernels, nslots */
    const int at[4] = {1, 2, 5, 7};
    for (int i = 0; i < 4; i++)
        if ((num[i] = PyLong_AsLongLong(a[at[i]])) == -1 && PyErr_Occurred())
            return NULL;
    PyObject *const objs[4] = {a[0], a[3], a[4], a[6]};
    Py_buffer v[4];   /* recs, relocs, blocks, sizes */
    if (views(v, objs, 4))
        return NULL;
    int ok = 0, whole = !(v[0].len % (W_WORDS * 4) || v[1].len % RELOC_BYTES ||
                          v[2].len % 8 || v[3].len % 8);
    if (!whole)
        PyErr_SetString(PyExc_ValueError, "records_pass: a table is not a whole number of "
                        "entries");
    else if (v[0].len == 0)
        ok = v[1].len == 0;
    else
        ok = records_ok(&v[0], num[0], num[1], v[2].buf, v[2].len / 8, num[2]) &&
             relocs_ok(&v[0], &v[1], v[3].buf, v[3].len / 8, num[3]);
    release_views(v, 4);
    return whole ? PyBool_FromLong(ok) : NULL;
}

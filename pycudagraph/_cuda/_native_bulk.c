/* add_kernel_nodes: kernel nodes added from fixed records, with no Python call per node
 * (what a loaded graph file's kernel nodes take).
 *
 * add_kernel_nodes(table, kernels, recs, argbytes, deps, made) -> how many were added.
 * recs: n records of 12 little-endian u32 (kernel index, grid[3], block[3], shared memory,
 * argument offset and length into argbytes, first and count of its dependencies in deps);
 * argbytes: per node its argument slots as its kernel's Layout packs them (from the end of
 * the pointer array to the end of the pack); deps: u32 indices of nodes made earlier in the
 * same call. fast.add_kernel_nodes has checked all of it before (and raises naming what is
 * wrong); this file checks again what it reads and, at the first node it does not add
 * itself (a kernel whose plan it lacks or whose limits the launch passes, a graph closed, a
 * trace, several devices, a refused driver call), stops: the nodes it made are in made,
 * recorded, and the Python twin adds the rest (and raises the error a refusal makes).
 * Per node: a new bytearray pack (header, pointer array, the slots copied), its ArgPack and
 * KernelNode made as add_node makes them (refs: the arguments as plain ints, floats and
 * bools), cuGraphAddKernelNode, and the node recorded (node_added, _native_nodes.c).
 */
#include "_native.h"

#include <string.h>

enum { R_KERNEL, R_GRID, R_BLOCK = 4, R_SHM = 7, R_ARG_OFF, R_ARG_LEN, R_DEP_FIRST, R_DEP_COUNT,
       R_WORDS };

/* The value of a slot of kind k at p, as a new Python object (NULL with an error set). */
static PyObject *slot_value(int k, const char *p)
{
    union { int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32; uint32_t u32;
            int64_t i64; uint64_t u64; float f32; double f64; } v;
    memcpy(&v, p, KIND_SIZE[k]);
    switch (k) {
    case K_I8: return PyLong_FromLong(v.i8);
    case K_U8: return PyLong_FromLong(v.u8);
    case K_I16: return PyLong_FromLong(v.i16);
    case K_U16: return PyLong_FromLong(v.u16);
    case K_I32: return PyLong_FromLong(v.i32);
    case K_U32: return PyLong_FromUnsignedLong(v.u32);
    case K_I64: return PyLong_FromLongLong(v.i64);
    case K_F32: return PyFloat_FromDouble(v.f32);
    case K_F64: return PyFloat_FromDouble(v.f64);
    case K_BOOL: return PyBool_FromLong(v.u8 != 0);
    default: return PyLong_FromUnsignedLongLong(v.u64);   /* K_U64, K_PTR */
    }
}

/* deps[d] = the handle of the node ix[d] names, for d < count: each an index below i (a
 * node made earlier in the same call), else 0 with nothing more read; 1 when all were. */
static int resolve_deps(void **deps, const uint32_t *ix, uint32_t count, void *const *handles,
                        Py_ssize_t i)
{
    for (uint32_t d = 0; d < count; d++) {
        if ((Py_ssize_t)ix[d] >= i)
            return 0;
        deps[d] = handles[ix[d]];
    }
    return 1;
}

/* Whether record r's launch is one the compiled adds take with plan p: the plan names a
 * function whose limits are read, the launch is 1-D and within them, and the record's
 * argument bytes are the plan's argument slots. */
static int record_fits(const plan_head *p, const uint32_t *r)
{
    return p->func && p->block1 && r[R_GRID + 1] == 1 && r[R_GRID + 2] == 1 &&
           r[R_BLOCK + 1] == 1 && r[R_BLOCK + 2] == 1 && r[R_GRID] && r[R_BLOCK] &&
           r[R_GRID] <= p->grid1 && r[R_BLOCK] <= p->block1 && r[R_SHM] <= p->smem &&
           p->size >= HEADER + 8 * p->n && r[R_ARG_LEN] == p->size - (HEADER + 8 * p->n);
}

/* One node: 1 added (appended to made), 0 not added here (no error set), -1 error set. */
static int one(PyObject *table, PyObject *kernel, const uint32_t *r, const char *args,
               const uint32_t *dep_ix, void **handles, Py_ssize_t i, PyObject *made)
{
    PyObject *hot = ((kernel_obj *)kernel)->hot;
    const plan_head *p = hot ? hot_plan(hot) : NULL;
    void *graph_h;
    PyObject *nodes, *layout = p ? plan_layout(hot) : NULL;
    if (!layout || !p->simple || !record_fits(p, r) || table_open(table, &graph_h, &nodes) ||
        r[R_DEP_COUNT] > STACK_DEPS)
        return 0;
    void *deps[STACK_DEPS];
    if (!resolve_deps(deps, dep_ix, r[R_DEP_COUNT], handles, i))
        return 0;
    Py_INCREF(hot);   /* held for the node: record may run Python code (a shared ledger) */
    int status = -1;
    PyObject *pack = NULL, *node = NULL, *refs = NULL, *addr = NULL;
    PyObject *buf = PyByteArray_FromStringAndSize(NULL, p->size);
    if (!buf)
        goto done;
    char *mem = PyByteArray_AS_STRING(buf);
    kparams *h = (kparams *)mem;
    const plan_slot *slots = (const plan_slot *)(p + 1);
    uint32_t start = HEADER + 8 * p->n;
    memset(mem, 0, start);
    memcpy(mem + start, args, r[R_ARG_LEN]);
    h->func = p->func;
    memcpy(h->grid, r + R_GRID, 3 * sizeof(uint32_t));
    memcpy(h->block, r + R_BLOCK, 3 * sizeof(uint32_t));
    h->shared_mem = r[R_SHM];
    h->kernel_params = (uint64_t)(uintptr_t)(mem + HEADER);
    uint64_t *ptrs = (uint64_t *)(mem + HEADER);
    if (!(refs = PyList_New(p->n)))
        goto done;
    for (uint32_t k = 0; k < p->n; k++) {
        const plan_slot *s = &slots[k];
        if (s->kind >= K_OTHER || s->offset < start || s->offset + KIND_SIZE[s->kind] > p->size) {
            status = 0;   /* a plan this file does not read: the twin adds it */
            goto done;
        }
        ptrs[k] = (uint64_t)(uintptr_t)(mem + s->offset);
        PyObject *v = slot_value(s->kind, mem + s->offset);
        if (!v)
            goto done;
        PyList_SET_ITEM(refs, k, v);
    }
    if (!(addr = PyLong_FromVoidPtr(mem)) ||
        !(node = pack_and_node(table, kernel, layout, refs, buf, addr, &pack)))
        goto done;
    void *node_h = NULL;
    if (S.add_kernel(&node_h, graph_h, r[R_DEP_COUNT] ? deps : NULL, r[R_DEP_COUNT], mem)) {
        status = 0;   /* the twin repeats it through the route, which raises naming it */
        goto done;
    }
    if (node_added(table, node, pack, node_h) || PyList_Append(made, node))
        goto done;
    handles[i] = node_h;
    status = 1;
done:
    Py_XDECREF(node);
    Py_XDECREF(pack);
    Py_XDECREF(addr);
    Py_XDECREF(refs);
    Py_XDECREF(buf);
    Py_DECREF(hot);
    return status;
}

/* Read-only C-contiguous buffers of the n objects (bytes, bytearray, memoryview, numpy
 * array) into b[0 .. n): 0, or -1 with an error set and none of them held. */
int views(Py_buffer *b, PyObject *const *objs, int n)
{
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(objs[i], &b[i], PyBUF_C_CONTIGUOUS)) {
            release_views(b, i);
            return -1;
        }
    }
    return 0;
}

void release_views(Py_buffer *b, int n)
{
    while (n-- > 0)
        PyBuffer_Release(&b[n]);
}

PyObject *add_kernel_nodes(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyTuple_CheckExact(a[1]) || !PyList_CheckExact(a[5])) {
        PyErr_SetString(PyExc_TypeError, "add_kernel_nodes(table, kernels: tuple, recs, "
                        "argbytes, deps, made: list)");
        return NULL;
    }
    PyObject *table = a[0], *kernels = a[1], *made = a[5];
    Py_buffer v[3];   /* recs, argbytes, deps */
    if (views(v, a + 2, 3))
        return NULL;
    Py_buffer rb = v[0], ab = v[1], db = v[2];
    Py_ssize_t n = rb.len / (R_WORDS * 4), nk = PyTuple_GET_SIZE(kernels), done = 0;
    Py_ssize_t ndeps = db.len / 4;
    void **handles = n ? PyMem_Malloc(sizeof(void *) * n) : NULL;
    int st = 1;
    if (n && !handles) {
        PyErr_NoMemory();
        st = -1;
    }
    /* the records are copied word by word (memcpy): the buffers need no alignment */
    for (Py_ssize_t i = 0; i < n && st == 1 && PyList_GET_SIZE(made) == i; i++) {
        uint32_t r[R_WORDS];
        memcpy(r, (const char *)rb.buf + i * sizeof r, sizeof r);
        if (r[R_KERNEL] >= (uint64_t)nk || (uint64_t)r[R_ARG_OFF] + r[R_ARG_LEN] > (uint64_t)ab.len ||
            (uint64_t)r[R_DEP_FIRST] + r[R_DEP_COUNT] > (uint64_t)ndeps)
            break;
        PyObject *kernel = PyTuple_GET_ITEM(kernels, r[R_KERNEL]);
        if (!PyObject_TypeCheck(kernel, &KernelBase_Type))
            break;
        uint32_t dep_ix[STACK_DEPS];
        uint32_t nd = r[R_DEP_COUNT] <= STACK_DEPS ? r[R_DEP_COUNT] : 0;
        memcpy(dep_ix, (const char *)db.buf + 4 * (size_t)r[R_DEP_FIRST], 4 * (size_t)nd);
        st = one(table, kernel, r, (const char *)ab.buf + r[R_ARG_OFF], dep_ix, handles, i, made);
        done += st == 1;
    }
    PyMem_Free(handles);
    release_views(v, 3);
    return st < 0 ? NULL : PyLong_FromSsize_t(done);
}

/* What add_param_nodes and add_record_nodes share: n records of rb, each one's
 * dependencies (u32 positions in db of earlier records) resolved and its node added
 * (cuGraphAddKernelNode) with the params struct params(ctx, i, record) gives, NULL for a
 * record the caller does not take here (code -1, no call made for it). Stops at the first
 * record it does not add: (handles of the nodes added before it, code), code 0 when every
 * node was added, else the refusal's CUresult or -1. */
typedef const void *(*params_fn)(void *ctx, Py_ssize_t i, const uint32_t *r);

static PyObject *add_records(void *graph_h, Py_buffer *rb, Py_buffer *db, params_fn params,
                             void *ctx)
{
    Py_ssize_t n = rb->len / (R_WORDS * 4), ndeps = db->len / 4, i = 0;
    void **handles = PyMem_Malloc(sizeof(void *) * (n ? n : 1));
    void **deps = PyMem_Malloc(sizeof(void *) * (ndeps ? ndeps : 1));
    uint32_t *ix = PyMem_Malloc(sizeof(uint32_t) * (ndeps ? ndeps : 1));
    PyObject *out = NULL, *list = NULL;
    int code = 0;
    if (!handles || !deps || !ix) {
        PyErr_NoMemory();
        goto done;
    }
    for (; i < n && !code; i++) {
        uint32_t r[R_WORDS];
        memcpy(r, (const char *)rb->buf + i * sizeof r, sizeof r);
        if ((uint64_t)r[R_DEP_FIRST] + r[R_DEP_COUNT] > (uint64_t)ndeps) {
            code = -1;
            break;
        }
        /* the u32 indices copied out (the buffer needs no alignment), then resolved */
        memcpy(ix, (const char *)db->buf + 4 * (size_t)r[R_DEP_FIRST], 4 * (size_t)r[R_DEP_COUNT]);
        const void *pp = resolve_deps(deps, ix, r[R_DEP_COUNT], handles, i) ? params(ctx, i, r)
                                                                             : NULL;
        if (!pp) {
            code = -1;
            break;
        }
        void *h = NULL;
        code = (int)S.add_kernel(&h, graph_h, r[R_DEP_COUNT] ? deps : NULL, r[R_DEP_COUNT], pp);
        if (code)
            break;
        handles[i] = h;
    }
    if (!(list = PyList_New(i)))
        goto done;
    for (Py_ssize_t j = 0; j < i; j++) {
        PyObject *h = PyLong_FromVoidPtr(handles[j]);
        if (!h)
            goto done;
        PyList_SET_ITEM(list, j, h);
    }
    out = Py_BuildValue("(Oi)", list, code);
done:
    Py_XDECREF(list);
    PyMem_Free(handles);
    PyMem_Free(deps);
    PyMem_Free(ix);
    return out;
}

typedef struct {
    char *base;
    Py_ssize_t stride;
} strided;

static const void *strided_params(void *ctx, Py_ssize_t i, const uint32_t *r)
{
    (void)r;
    strided *c = ctx;
    return c->base + i * c->stride;
}

/* add_param_nodes(graph_h, params_addr, stride, recs, deps) -> (handles, code):
 * cuGraphAddKernelNode for each of the n records with the params struct at params_addr +
 * i * stride (CUDA_KERNEL_NODE_PARAMS_v2, written by the caller: fast.add_function_nodes),
 * its dependencies the handles of the earlier nodes deps[first .. first + count) names.
 * Stops at the first record it does not add: the handles of the nodes added before it, and
 * the refusal's CUresult, or -1 for a record whose dependencies are not all earlier records
 * inside deps (nothing called for it); code 0 when every node was added. The caller removes
 * what was added before a stop. No Python object is made per node but its handle. None when
 * the call is not made here (no entry point, a thread with no context marked yet, a trace
 * open): the caller's twin makes it. */
PyObject *add_param_nodes(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "add_param_nodes(graph_h, params_addr, stride, recs, "
                        "deps)");
        return NULL;
    }
    void *graph_h, *params;
    Py_ssize_t stride = PyLong_AsSsize_t(a[2]);
    if (stride == -1 && PyErr_Occurred())
        return NULL;
    if (!S.add_kernel || !ready() || as_ptr(a[0], &graph_h) || as_ptr(a[1], &params)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer v[2];   /* recs, deps */
    if (views(v, a + 3, 2))
        return NULL;
    strided c = {params, stride};
    PyObject *out = add_records(graph_h, &v[0], &v[1], strided_params, &c);
    release_views(v, 2);
    return out;
}

enum { MAX_RECORD_PARAMS = 64 };

typedef struct {
    PyObject *kernels;
    const char *args;
    Py_ssize_t nargs;
    kparams head;                       /* rewritten per record: the driver copies it */
    uint64_t ptrs[MAX_RECORD_PARAMS];   /* what head.kernel_params points at */
} record_ctx;

/* The params struct of record r: its kernel's plan (func, 1-D limits, slots) and its
 * argument bytes in place; NULL for a record not taken here (no plan or limits, a launch
 * not 1-D or over them, an argument length not the plan's). */
static const void *record_params(void *ctx, Py_ssize_t i, const uint32_t *r)
{
    (void)i;
    record_ctx *c = ctx;
    if (r[R_KERNEL] >= (uint64_t)PyTuple_GET_SIZE(c->kernels))
        return NULL;
    PyObject *kernel = PyTuple_GET_ITEM(c->kernels, r[R_KERNEL]);
    if (!PyObject_TypeCheck(kernel, &KernelBase_Type))
        return NULL;
    PyObject *hot = ((kernel_obj *)kernel)->hot;
    const plan_head *p = hot ? hot_plan(hot) : NULL;
    if (!p || p->n > MAX_RECORD_PARAMS || !record_fits(p, r) ||
        (uint64_t)r[R_ARG_OFF] + r[R_ARG_LEN] > (uint64_t)c->nargs)
        return NULL;
    uint32_t start = HEADER + 8 * p->n;
    const plan_slot *slots = (const plan_slot *)(p + 1);
    const char *base = c->args + r[R_ARG_OFF];
    for (uint32_t k = 0; k < p->n; k++) {
        if (slots[k].offset < start || slots[k].offset >= p->size)
            return NULL;
        c->ptrs[k] = (uint64_t)(uintptr_t)(base + (slots[k].offset - start));
    }
    memset(&c->head, 0, sizeof c->head);
    c->head.func = p->func;
    memcpy(c->head.grid, r + R_GRID, 3 * sizeof(uint32_t));
    memcpy(c->head.block, r + R_BLOCK, 3 * sizeof(uint32_t));
    c->head.shared_mem = r[R_SHM];
    c->head.kernel_params = (uint64_t)(uintptr_t)c->ptrs;
    return &c->head;
}

/* add_record_nodes(graph_h, kernels, recs, argbytes, deps) -> (handles, code):
 * cuGraphAddKernelNode for each record (kernels: a tuple of Kernels; recs, argbytes and
 * deps as add_kernel_nodes reads them) with its params struct written here from its
 * kernel's plan, its arguments read where they lie in argbytes, which must stay alive and
 * unchanged while the call runs (the driver copies them); no Python object made per node
 * but its handle. (handles, code) as add_param_nodes returns them, code -1 also for a
 * record whose kernel has no plan or limits here or whose launch is not 1-D or over them:
 * the caller removes what was added and adds the run its own way (fast.add_function_nodes),
 * which checks and names what is wrong. None when the call is not made here (no entry
 * point, no context marked, several devices in use). */
PyObject *add_record_nodes(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyTuple_CheckExact(a[1])) {
        PyErr_SetString(PyExc_TypeError, "add_record_nodes(graph_h, kernels: tuple, recs, "
                        "argbytes, deps)");
        return NULL;
    }
    void *graph_h;
    if (!S.add_kernel || !ready() || S.multi || as_ptr(a[0], &graph_h)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer v[3];   /* recs, argbytes, deps */
    if (views(v, a + 2, 3))
        return NULL;
    record_ctx *c = PyMem_Malloc(sizeof *c);
    PyObject *out = NULL;
    if (!c) {
        PyErr_NoMemory();
    } else {
        c->kernels = a[1];
        c->args = v[1].buf;
        c->nargs = v[1].len;
        out = add_records(graph_h, &v[0], &v[2], record_params, c);
        PyMem_Free(c);
    }
    release_views(v, 3);
    return out;
}

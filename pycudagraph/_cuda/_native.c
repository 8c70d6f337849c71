/* pycudagraph._cuda._native: the compiled hot calls behind pycudagraph/_cuda/fast.py.
 *
 * A plain CPython extension with no CUDA header and no link to libcuda: the driver entry
 * points (cuGraphLaunch, cuLaunchKernel, cuGraphAddKernelNode_v2,
 * cuGraphExecKernelNodeSetParams_v2) are handed over at run time by
 * fast.py as addresses it read from libcuda, so one build serves CUDA 12.x and 13.x
 * drivers and both cuda-bindings majors.
 *
 * Every entry point returns an int:
 *    0   done: the driver call was made and succeeded;
 *   -1   not handled here, nothing was called: a value this code does not convert, a
 *        thread whose context fast.py has not yet ensured, or a trace being recorded;
 *   >0   the CUresult of a failed driver call.
 * On anything but 0 the caller runs the checked Python path (fast.py), which ensures the
 * context, converts with the full diagnosis, traces, and raises the clear error. The
 * compiled path never raises for a user's value: that is the Python path's job.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
typedef CUresult (*graph_launch_fn)(void *exec, void *stream);
typedef CUresult (*launch_kernel_fn)(void *f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                     void *stream, void **params, void **extra);
typedef CUresult (*add_kernel_fn)(void **node, void *graph, void *const *deps, size_t n,
                                  const void *params);
typedef CUresult (*exec_set_fn)(void *exec, void *node, const void *params);

static graph_launch_fn p_graph_launch;
static launch_kernel_fn p_launch_kernel;
static add_kernel_fn p_add_kernel;
static exec_set_fn p_exec_set;

/* CUDA_KERNEL_NODE_PARAMS_v2, as pycudagraph/_cuda/structs.py names it. */
typedef struct {
    uint64_t func;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem;
    uint32_t pad;
    uint64_t kernel_params;
    uint64_t extra;
    uint64_t kern;
    uint64_t ctx;
} kparams;
_Static_assert(sizeof(kparams) == 72, "CUDA_KERNEL_NODE_PARAMS_v2 is 72 bytes");

#define HEADER 72
#define STACK_PACK 4096
#define MAX_DEPS 64

/* Parameter kinds (fast.py names the same codes). */
enum { K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64, K_F32, K_F64, K_BOOL, K_PTR,
       K_OTHER };
static const int KIND_SIZE[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 1, 8, 0};

static PyObject *check_dict;   /* pycudagraph._cuda.check.__dict__: its "tracer" */
static PyObject *s_tracer, *s_layout, *s_native, *s_address, *s_refs, *s_graph, *s_h,
    *s_kernel, *s_buf, *s_raw;
static PyTypeObject *argpack_type;
static PyObject *removed_marker;   /* the _raw of a node removed from its graph */
static _Thread_local int thread_ready;

/* ---------------------------------------------------------------------------------- */
/* Layout: where each argument goes in an ArgPack buffer, and how it is converted.    */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    Py_ssize_t size;            /* whole buffer: header + pointer array + slots */
    int simple;                 /* every kind is one this file converts */
    unsigned char *kinds;
    Py_ssize_t *offsets;        /* from the start of the buffer */
    PyObject *converters;       /* tuple: the Python converter of each slot, or None */
} Layout;

static void layout_dealloc(Layout *self)
{
    PyMem_Free(self->kinds);
    PyMem_Free(self->offsets);
    Py_XDECREF(self->converters);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *layout_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    const char *kinds;
    Py_ssize_t nk, size;
    PyObject *offsets, *converters;
    if (!PyArg_ParseTuple(args, "y#O!nO!", &kinds, &nk, &PyTuple_Type, &offsets, &size,
                          &PyTuple_Type, &converters))
        return NULL;
    if (PyTuple_GET_SIZE(offsets) != nk || PyTuple_GET_SIZE(converters) != nk) {
        PyErr_SetString(PyExc_ValueError, "kinds, offsets and converters differ in length");
        return NULL;
    }
    if (size < HEADER + 8 * nk) {
        PyErr_SetString(PyExc_ValueError, "size is smaller than the header and pointer array");
        return NULL;
    }
    Layout *self = (Layout *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->n = nk;
    self->size = size;
    self->simple = 1;
    self->kinds = PyMem_Malloc(nk ? nk : 1);
    self->offsets = PyMem_Malloc(sizeof(Py_ssize_t) * (nk ? nk : 1));
    Py_INCREF(converters);
    self->converters = converters;
    if (!self->kinds || !self->offsets) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        int k = (unsigned char)kinds[i];
        Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        if (off == -1 && PyErr_Occurred()) {
            Py_DECREF(self);
            return NULL;
        }
        if (k > K_OTHER) {
            PyErr_Format(PyExc_ValueError, "unknown kind %d", k);
            Py_DECREF(self);
            return NULL;
        }
        if (k == K_OTHER)
            self->simple = 0;
        else if (off < HEADER + 8 * nk || off + KIND_SIZE[k] > size) {
            PyErr_Format(PyExc_ValueError, "slot %zd at offset %zd is outside the buffer", i, off);
            Py_DECREF(self);
            return NULL;
        }
        self->kinds[i] = (unsigned char)k;
        self->offsets[i] = off;
    }
    return (PyObject *)self;
}

static PyObject *layout_simple(Layout *self, void *closure)
{
    return PyBool_FromLong(self->simple);
}

static PyGetSetDef layout_getset[] = {
    {"simple", (getter)layout_simple, NULL, "every argument kind is converted in C", NULL},
    {NULL}};

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.Layout",
    .tp_basicsize = sizeof(Layout),
    .tp_dealloc = (destructor)layout_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Layout(kinds: bytes, offsets: tuple, size: int, converters: tuple)",
    .tp_new = layout_new,
    .tp_getset = layout_getset,
};

/* ---------------------------------------------------------------------------------- */
/* Conversions. Each returns 0, or -1 with no Python error set (the caller falls back). */

static int fail(void)
{
    PyErr_Clear();
    return -1;
}

static int as_u64(PyObject *v, uint64_t *out)
{
    if (!PyLong_Check(v))
        return -1;
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return fail();
    *out = x;
    return 0;
}

static int put_int(int kind, char *dst, PyObject *v)
{
    PyObject *idx = NULL;
    if (!PyLong_Check(v)) {
        if (PyFloat_Check(v) || !PyIndex_Check(v))
            return -1;
        idx = PyNumber_Index(v);   /* numpy integers, as struct takes them */
        if (!idx)
            return fail();
        v = idx;
    }
    int rc = 0;
    if (kind == K_U64) {
        uint64_t x;
        rc = as_u64(v, &x);
        if (!rc)
            memcpy(dst, &x, 8);
    } else {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            rc = fail();
        } else {
            switch (kind) {
            case K_I8:  if (x < -128 || x > 127) rc = -1; else { int8_t y = (int8_t)x; memcpy(dst, &y, 1); } break;
            case K_U8:  if (x < 0 || x > 255) rc = -1; else { uint8_t y = (uint8_t)x; memcpy(dst, &y, 1); } break;
            case K_I16: if (x < -32768 || x > 32767) rc = -1; else { int16_t y = (int16_t)x; memcpy(dst, &y, 2); } break;
            case K_U16: if (x < 0 || x > 65535) rc = -1; else { uint16_t y = (uint16_t)x; memcpy(dst, &y, 2); } break;
            case K_I32: if (x < INT32_MIN || x > INT32_MAX) rc = -1; else { int32_t y = (int32_t)x; memcpy(dst, &y, 4); } break;
            case K_U32: if (x < 0 || x > UINT32_MAX) rc = -1; else { uint32_t y = (uint32_t)x; memcpy(dst, &y, 4); } break;
            case K_I64: memcpy(dst, &x, 8); break;
            default: rc = -1;
            }
        }
    }
    Py_XDECREF(idx);
    return rc;
}

static int put_value(int kind, char *dst, PyObject *v)
{
    switch (kind) {
    case K_F32:
    case K_F64: {
        double d = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred())
            return fail();
        if (kind == K_F64) {
            memcpy(dst, &d, 8);
        } else {
            float f = (float)d;
            if (isinf(f) && !isinf(d))
                return -1;   /* struct refuses it: "float too large to pack with f format" */
            memcpy(dst, &f, 4);
        }
        return 0;
    }
    case K_BOOL:
        if (v == Py_True)
            *dst = 1;
        else if (v == Py_False)
            *dst = 0;
        else
            return -1;
        return 0;
    case K_PTR: {
        uint64_t x;
        if (as_u64(v, &x))
            return -1;
        memcpy(dst, &x, 8);
        return 0;
    }
    case K_OTHER:
        return -1;
    default:
        return put_int(kind, dst, v);
    }
}

/* One argument into its slot: the slot's Python converter first when it has one (a
 * pointer given as a plain int skips device_pointer, which returns it unchanged). */
static int put(int kind, char *dst, PyObject *v, PyObject *converter)
{
    if (converter == Py_None || (kind == K_PTR && PyLong_CheckExact(v)))
        return put_value(kind, dst, v);
    if (kind == K_OTHER)
        return -1;
    PyObject *r = PyObject_CallOneArg(converter, v);
    if (!r)
        return fail();
    int rc = put_value(kind, dst, r);
    Py_DECREF(r);
    return rc;
}

/* grid / block: an int, or a tuple of 1 to 3 ints, each in [1, 2**32). */
static int dims(PyObject *o, uint32_t out[3])
{
    out[0] = out[1] = out[2] = 1;
    if (PyLong_CheckExact(o)) {
        uint64_t x;
        if (as_u64(o, &x) || x == 0 || x > UINT32_MAX)
            return -1;
        out[0] = (uint32_t)x;
        return 0;
    }
    if (!PyTuple_CheckExact(o))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(o);
    if (n < 1 || n > 3)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(o, i);
        uint64_t x;
        if (!PyLong_CheckExact(v) || as_u64(v, &x) || x == 0 || x > UINT32_MAX)
            return -1;
        out[i] = (uint32_t)x;
    }
    return 0;
}

static int as_u32(PyObject *o, uint32_t *out)
{
    uint64_t x;
    if (!PyLong_CheckExact(o) || as_u64(o, &x) || x > UINT32_MAX)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

static int as_ptr(PyObject *o, void **out)
{
    uint64_t x;
    if (!PyLong_CheckExact(o) || as_u64(o, &x))
        return -1;
    *out = (void *)(uintptr_t)x;
    return 0;
}

/* Ready for a compiled call: initialised, no trace recording, context ensured here. */
static int ready(void)
{
    if (!thread_ready || check_dict == NULL)
        return 0;
    PyObject *t = PyDict_GetItemWithError(check_dict, s_tracer);
    if (t == NULL) {
        PyErr_Clear();
        return 0;
    }
    return t == Py_None;
}

/* Fill a pack buffer (header, pointer array, values). 0, or -1 (fall back). */
static int fill(Layout *L, char *buf, uint64_t func, PyObject *grid, PyObject *block,
                PyObject *shm, PyObject *args)
{
    kparams *h = (kparams *)buf;
    if (!L->simple || dims(grid, h->grid) || dims(block, h->block) ||
        as_u32(shm, &h->shared_mem))
        return -1;
    if (!PyTuple_CheckExact(args) && !PyList_CheckExact(args))
        return -1;
    if (PySequence_Fast_GET_SIZE(args) != L->n)
        return -1;
    /* A list is copied: a converter (a __cuda_array_interface__ property) could change it. */
    PyObject *seq = PyList_CheckExact(args) ? PyList_AsTuple(args) : Py_NewRef(args);
    if (!seq)
        return fail();
    Py_ssize_t n = L->n;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    h->func = func;
    h->pad = 0;
    h->kernel_params = (uint64_t)(uintptr_t)(buf + HEADER);
    h->extra = h->kern = h->ctx = 0;
    uint64_t *ptrs = (uint64_t *)(buf + HEADER);
    for (Py_ssize_t i = 0; i < n; i++) {
        char *slot = buf + L->offsets[i];
        ptrs[i] = (uint64_t)(uintptr_t)slot;
        if (put(L->kinds[i], slot, items[i], PyTuple_GET_ITEM(L->converters, i))) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* The calls                                                                          */

#define NARGS(want)                                                                    \
    if (nargs != (want)) {                                                             \
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments", __func__, (want));      \
        return NULL;                                                                   \
    }

/* graph_launch(exec_h, stream_h) -> int: cuGraphLaunch. */
static PyObject *graph_launch(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(2);
    void *e, *s;
    if (!p_graph_launch || !ready() || as_ptr(a[0], &e) || as_ptr(a[1], &s))
        return PyLong_FromLong(-1);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = p_graph_launch(e, s);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

/* launch_kernel(layout, func, grid, block, args, stream_h, shared_mem) -> int: cuLaunchKernel. */
static PyObject *launch_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(7);
    if (!p_launch_kernel || !ready() || Py_TYPE(a[0]) != &LayoutType)
        return PyLong_FromLong(-1);
    Layout *L = (Layout *)a[0];
    _Alignas(16) char buf[STACK_PACK];
    void *func, *s;
    if (L->size > STACK_PACK || as_ptr(a[1], &func) || !func || as_ptr(a[5], &s) ||
        fill(L, buf, (uint64_t)(uintptr_t)func, a[2], a[3], a[6], a[4]))
        return PyLong_FromLong(-1);
    kparams *h = (kparams *)buf;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = p_launch_kernel(func, h->grid[0], h->grid[1], h->grid[2], h->block[0], h->block[1],
                         h->block[2], h->shared_mem, s, (void **)(buf + HEADER), NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

/* 1 if obj.name is target, 0 if not, -1 if it cannot be read (error cleared). */
static int attr_is(PyObject *obj, PyObject *name, PyObject *target)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v)
        return fail();
    int same = v == target;
    Py_DECREF(v);
    return same;
}

/* The handles of dependency nodes that all belong to graph, none twice; 0, or -1 (the
 * Python path, which raises for a repeat, as the driver is not relied on to). */
static int dep_handles(PyObject *deps, PyObject *graph, void **out)
{
    PyObject *seq = PySequence_Tuple(deps);   /* a list is copied: attribute reads run code */
    if (!seq)
        return fail();
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq) && !rc; i++) {
        PyObject *d = PyTuple_GET_ITEM(seq, i);
        if (attr_is(d, s_graph, graph) != 1 ||
            (removed_marker && attr_is(d, s_raw, removed_marker) != 0)) {
            rc = -1;
            break;
        }
        PyObject *hv = PyObject_GetAttr(d, s_h);
        if (!hv) {
            rc = fail();
            break;
        }
        rc = as_ptr(hv, &out[i]);
        Py_DECREF(hv);
        for (Py_ssize_t j = 0; j < i && !rc; j++)
            if (out[j] == out[i])
                rc = -1;   /* listed twice: the Python path names it */
    }
    Py_DECREF(seq);
    return rc;
}

/* add_kernel(native_layout, layout, kernel, func, grid, block, args, shared_mem, graph, deps)
 *   -> (node_handle, ArgPack) or int: cuGraphAddKernelNode with the launch packed in a new
 * buffer (a bytearray the ArgPack owns). Every dependency must be a node whose .graph is
 * graph, in a tuple; anything else goes to the Python path, which checks membership. */
static PyObject *add_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(10);
    if (!p_add_kernel || !argpack_type || !ready() || Py_TYPE(a[0]) != &LayoutType)
        return PyLong_FromLong(-1);
    Layout *L = (Layout *)a[0];
    PyObject *layout = a[1], *kernel = a[2], *args = a[6], *graph = a[8], *deps = a[9];
    void *func;
    if (as_ptr(a[3], &func) || !func)
        return PyLong_FromLong(-1);
    if (!PyTuple_CheckExact(deps) && !PyList_CheckExact(deps))  /* one node: Python path */
        return PyLong_FromLong(-1);
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(deps);
    if (nd > MAX_DEPS)
        return PyLong_FromLong(-1);
    void *dep_h[MAX_DEPS];
    if (dep_handles(deps, graph, dep_h))
        return PyLong_FromLong(-1);
    PyObject *gh = PyObject_GetAttr(graph, s_h);
    if (!gh) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    void *graph_h;
    int bad = as_ptr(gh, &graph_h);
    Py_DECREF(gh);
    if (bad || !graph_h)
        return PyLong_FromLong(-1);

    PyObject *bufobj = PyByteArray_FromStringAndSize(NULL, L->size);
    if (!bufobj)
        return NULL;
    char *buf = PyByteArray_AS_STRING(bufobj);
    memset(buf, 0, L->size);
    if (fill(L, buf, (uint64_t)(uintptr_t)func, a[4], a[5], a[7], args)) {
        Py_DECREF(bufobj);
        return PyLong_FromLong(-1);
    }
    /* The ArgPack is complete before the node exists: nothing can fail after the add. */
    PyObject *pack = argpack_type->tp_alloc(argpack_type, 0);
    PyObject *refs = PySequence_List(args);
    PyObject *addr = PyLong_FromVoidPtr(buf);
    if (!pack || !refs || !addr || PyObject_GenericSetAttr(pack, s_layout, layout) ||
        PyObject_GenericSetAttr(pack, s_kernel, kernel) ||
        PyObject_GenericSetAttr(pack, s_refs, refs) ||
        PyObject_GenericSetAttr(pack, s_buf, bufobj) ||
        PyObject_GenericSetAttr(pack, s_address, addr)) {
        Py_XDECREF(pack);
        Py_XDECREF(refs);
        Py_XDECREF(addr);
        Py_DECREF(bufobj);
        return NULL;
    }
    Py_DECREF(refs);
    Py_DECREF(addr);
    Py_DECREF(bufobj);
    void *node = NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = p_add_kernel(&node, graph_h, nd ? dep_h : NULL, (size_t)nd, buf);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(pack);
        return PyLong_FromLong(rc);
    }
    PyObject *hnode = PyLong_FromVoidPtr(node);
    if (!hnode) {
        Py_DECREF(pack);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, hnode, pack);
    Py_DECREF(hnode);
    Py_DECREF(pack);
    return out;
}

/* exec_set_arg(exec_h, node_h, pack, index, value) -> int, or (old,): one argument of a
 * kernel node of an exec, cuGraphExecKernelNodeSetParams with the exec's own pack.
 * Returns (old,) when the value it replaced is not a plain int/float/bool: the caller
 * retires it (a queued launch may still read it). */
static PyObject *exec_set_arg(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(5);
    void *e, *node;
    if (!p_exec_set || !ready() || as_ptr(a[0], &e) || as_ptr(a[1], &node) ||
        !PyLong_CheckExact(a[3]))
        return PyLong_FromLong(-1);
    PyObject *pack = a[2], *value = a[4];
    Py_ssize_t i = PyLong_AsSsize_t(a[3]);
    if (i == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    PyObject *layout = PyObject_GetAttr(pack, s_layout);
    if (!layout) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    PyObject *nl = PyObject_GetAttr(layout, s_native);
    Py_DECREF(layout);
    if (!nl) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    PyObject *refs = NULL, *addr = NULL, *result = NULL;
    Layout *L = (Layout *)nl;
    if (Py_TYPE(nl) != &LayoutType || i < 0 || i >= L->n || L->kinds[i] == K_OTHER)
        goto fallback;
    refs = PyObject_GetAttr(pack, s_refs);
    addr = PyObject_GetAttr(pack, s_address);
    if (!refs || !addr) {
        PyErr_Clear();
        goto fallback;
    }
    void *base;
    if (!PyList_CheckExact(refs) || PyList_GET_SIZE(refs) != L->n || as_ptr(addr, &base))
        goto fallback;
    char tmp[8], saved[8];
    int kind = L->kinds[i], size = KIND_SIZE[kind];
    if (put(kind, tmp, value, PyTuple_GET_ITEM(L->converters, i)))
        goto fallback;
    char *slot = (char *)base + L->offsets[i];
    memcpy(saved, slot, size);
    memcpy(slot, tmp, size);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = p_exec_set(e, node, base);
    Py_END_ALLOW_THREADS
    if (rc) {
        memcpy(slot, saved, size);
        result = PyLong_FromLong(rc);
        goto done;
    }
    if (PyList_GET_SIZE(refs) <= i) {   /* changed by another thread meanwhile */
        result = PyLong_FromLong(0);
        goto done;
    }
    PyObject *old = PyList_GET_ITEM(refs, i);
    Py_INCREF(value);
    PyList_SET_ITEM(refs, i, value);
    PyTypeObject *t = Py_TYPE(old);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || old == value) {
        Py_DECREF(old);
        result = PyLong_FromLong(0);
    } else {
        result = PyTuple_Pack(1, old);
        Py_DECREF(old);
    }
    goto done;
fallback:
    result = PyLong_FromLong(-1);
done:
    Py_DECREF(nl);
    Py_XDECREF(refs);
    Py_XDECREF(addr);
    return result;
}

/* ---------------------------------------------------------------------------------- */
/* Set-up                                                                             */

static void *entry(PyObject *table, const char *name)
{
    PyObject *v = PyDict_GetItemString(table, name);
    if (!v)
        return NULL;
    void *p = PyLong_AsVoidPtr(v);
    if (!p && PyErr_Occurred())
        PyErr_Clear();
    return p;
}

/* init(entry_points: dict[str, int], check_namespace: dict) */
static PyObject *init(PyObject *m, PyObject *args)
{
    PyObject *table, *ns;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &table, &PyDict_Type, &ns))
        return NULL;
    p_graph_launch = (graph_launch_fn)entry(table, "cuGraphLaunch");
    p_launch_kernel = (launch_kernel_fn)entry(table, "cuLaunchKernel");
    p_add_kernel = (add_kernel_fn)entry(table, "cuGraphAddKernelNode_v2");
    p_exec_set = (exec_set_fn)entry(table, "cuGraphExecKernelNodeSetParams_v2");
    Py_XSETREF(check_dict, Py_NewRef(ns));
    Py_RETURN_NONE;
}

/* set_pack_type(ArgPack): the class add_kernel makes its packs of. */
static PyObject *set_pack_type(PyObject *m, PyObject *t)
{
    if (!PyType_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "set_pack_type needs a class");
        return NULL;
    }
    Py_XSETREF(argpack_type, (PyTypeObject *)Py_NewRef(t));
    Py_RETURN_NONE;
}

/* set_removed(marker): a dependency whose _raw is marker was removed from its graph. */
static PyObject *set_removed(PyObject *m, PyObject *marker)
{
    Py_XSETREF(removed_marker, Py_NewRef(marker));
    Py_RETURN_NONE;
}

/* mark_thread(): the calling thread has a current context (fast.py ensured it). */
static PyObject *mark_thread(PyObject *m, PyObject *unused)
{
    thread_ready = 1;
    Py_RETURN_NONE;
}

static PyObject *thread_is_ready(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(thread_ready);
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS, "init(entry_points, check_namespace)"},
    {"set_pack_type", set_pack_type, METH_O, "set_pack_type(ArgPack)"},
    {"set_removed", set_removed, METH_O, "set_removed(marker): the _raw of a removed node"},
    {"mark_thread", mark_thread, METH_NOARGS, "the calling thread has a current context"},
    {"thread_ready", thread_is_ready, METH_NOARGS, "whether mark_thread ran in this thread"},
    {"graph_launch", (PyCFunction)(void (*)(void))graph_launch, METH_FASTCALL,
     "graph_launch(exec_h, stream_h) -> int: cuGraphLaunch"},
    {"launch_kernel", (PyCFunction)(void (*)(void))launch_kernel, METH_FASTCALL,
     "launch_kernel(layout, func, grid, block, args, stream_h, shared_mem) -> int: cuLaunchKernel"},
    {"add_kernel", (PyCFunction)(void (*)(void))add_kernel, METH_FASTCALL,
     "add_kernel(native, layout, kernel, func, grid, block, args, shared_mem, graph, deps)"
     " -> (node_h, ArgPack) or int: cuGraphAddKernelNode"},
    {"exec_set_arg", (PyCFunction)(void (*)(void))exec_set_arg, METH_FASTCALL,
     "exec_set_arg(exec_h, node_h, pack, index, value) -> int or (old,): "
     "cuGraphExecKernelNodeSetParams"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_native",
                                    "pycudagraph's compiled hot calls (see _cuda/fast.py)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&LayoutType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    if (!(s_tracer = PyUnicode_InternFromString("tracer")) ||
        !(s_layout = PyUnicode_InternFromString("layout")) ||
        !(s_native = PyUnicode_InternFromString("native")) ||
        !(s_address = PyUnicode_InternFromString("address")) ||
        !(s_refs = PyUnicode_InternFromString("refs")) ||
        !(s_graph = PyUnicode_InternFromString("graph")) ||
        !(s_h = PyUnicode_InternFromString("_h")) ||
        !(s_kernel = PyUnicode_InternFromString("kernel")) ||
        !(s_buf = PyUnicode_InternFromString("buf")) ||
        !(s_raw = PyUnicode_InternFromString("_raw"))) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LayoutType);
    if (PyModule_AddObject(m, "Layout", (PyObject *)&LayoutType) < 0) {
        Py_DECREF(&LayoutType);
        Py_DECREF(m);
        return NULL;
    }
    static const char *names[] = {"K_I8", "K_U8", "K_I16", "K_U16", "K_I32", "K_U32", "K_I64",
                                  "K_U64", "K_F32", "K_F64", "K_BOOL", "K_PTR", "K_OTHER"};
    for (int k = 0; k <= K_OTHER; k++)
        PyModule_AddIntConstant(m, names[k], k);
    PyModule_AddIntConstant(m, "STACK_PACK", STACK_PACK);
    PyModule_AddIntConstant(m, "MAX_DEPS", MAX_DEPS);
    return m;
}

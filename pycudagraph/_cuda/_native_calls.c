/* The hot calls. Each makes the driver call when it can and returns what fast.py's
 * route for it would return; otherwise it returns what that route returns, called with
 * the same arguments (see _native.h). Their signatures are fast.py's. */
#include "_native.h"

#include <string.h>

#define NARGS(want)                                                                    \
    if (nargs != (want)) {                                                             \
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments", __func__, (want));      \
        return NULL;                                                                   \
    }

static int capturing(void)
{
    return S.captures != NULL && PyList_GET_SIZE(S.captures) > 0;
}

/* fast.py's ctypes route of call r, with the same arguments. */
PyObject *route(int r, PyObject *const *a, Py_ssize_t nargs)
{
    if (!S.route[r]) {
        PyErr_SetString(PyExc_RuntimeError, "pycudagraph._cuda._native has no routes: "
                        "pycudagraph._cuda.fast sets them when it is imported");
        return NULL;
    }
    return PyObject_Vectorcall(S.route[r], a, nargs, NULL);
}

/* fn(a) with a reference to each argument held for the call: what a method in C reads from
 * slots is borrowed, and a converter (Python code) or another thread while the GIL is
 * released could replace it; a Python caller's frame holds its arguments the same way. */
PyObject *call_held(native_fn fn, PyObject *const *a, Py_ssize_t nargs)
{
    for (Py_ssize_t i = 0; i < nargs; i++)
        Py_INCREF(a[i]);
    PyObject *out = fn(NULL, a, nargs);
    for (Py_ssize_t i = 0; i < nargs; i++)
        Py_DECREF(a[i]);
    return out;
}

/* launch_graph(exec_h, stream, exe) -> None: cuGraphLaunch. */
PyObject *launch_graph(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(3);
    void *e, *s;
    if (S.graph_launch && ready() && !as_ptr(a[0], &e) && !stream_of(a[1], &s)) {
        CUresult rc;
        Py_BEGIN_ALLOW_THREADS
        rc = S.graph_launch(e, s);
        Py_END_ALLOW_THREADS
        if (!rc)
            Py_RETURN_NONE;
    }
    return route(R_LAUNCH_GRAPH, a, nargs);
}

/* cuLaunchKernel of hot's plan (hot: a Plan) with the arguments packed on
 * the C stack: 0 launched, -1 not made here (no driver call: a value it does not convert, a
 * trace, a new thread, several devices), 1 the driver refused it. While a capture is open
 * only a configuration within the function's known limits goes (a refused launch could
 * invalidate the capture). */
int launch_core(PyObject *hot, PyObject *grid, PyObject *block, PyObject *args,
                PyObject *stream, PyObject *shm)
{
    const plan_head *p;
    void *s;
    if (!S.launch_kernel || !ready() || S.multi || (p = hot_plan(hot)) == NULL ||
        p->size > STACK_PACK || stream_of(stream, &s) || (capturing() && !fits(p, grid, block, shm)))
        return -1;
    _Alignas(16) char buf[STACK_PACK];
    if (fill(p, PLAN(hot)->converters, buf, grid, block, shm, args))
        return -1;
    kparams *h = (kparams *)buf;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = S.launch_kernel((void *)(uintptr_t)h->func, h->grid[0], h->grid[1], h->grid[2],
                         h->block[0], h->block[1], h->block[2], h->shared_mem, s,
                         (void **)(buf + HEADER), NULL);
    Py_END_ALLOW_THREADS
    return rc ? 1 : 0;
}

/* launch_kernel(hot, grid, block, args, stream, shared_mem, kernel, prepare) -> None:
 * cuLaunchKernel (launch_core), or the ctypes route with the same arguments. */
PyObject *launch_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(8);
    if (!launch_core(a[0], a[1], a[2], a[3], a[4], a[5]))
        Py_RETURN_NONE;
    return route(R_LAUNCH_KERNEL, a, nargs);
}

/* add_kernel's maker: the pack (new_pack, _native_nodes.c) of the kernel a[8] and its
 * plan's layout. */
static PyObject *pack_maker(void *ctx, PyObject *refs, PyObject *buf, PyObject *addr)
{
    PyObject *const *a = ctx;
    return new_pack(PLAN(a[0])->layout, a[8], refs, buf, addr);
}

/* add_kernel(hot, grid, block, args, shared_mem, graph_h, deps, nodes, kernel, graph,
 *            prepare) -> (node_h, pack): cuGraphAddKernelNode with the launch packed into a
 * new buffer, made the node's pack (new_pack) before the node is added. hot: the kernel's
 * Plan (with its layout). deps: the dependencies (node objects, a tuple or list),
 * judged against nodes, the graph's handle -> node dict (dep_handles). */
PyObject *add_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(11);
    void *graph_h, *node_h;
    const plan_head *p;
    PyObject *pack;
    if (S.add_kernel && ready() && !S.multi && pack_class_known() &&
        (p = hot_plan(a[0])) != NULL &&
        plan_layout(a[0]) && !as_ptr(a[5], &graph_h)) {
        int st = add_core(p, a[0], a[1], a[2], a[3], a[4], graph_h, a[6], a[7], pack_maker,
                          (void *)a, &pack, &node_h);
        if (st == ADD_ERROR)
            return NULL;
        if (st == ADD_DONE) {
            PyObject *h = PyLong_FromVoidPtr(node_h), *out = h ? PyTuple_Pack(2, h, pack) : NULL;
            Py_XDECREF(h);
            Py_DECREF(pack);
            return out;
        }
    }
    return route(R_ADD_KERNEL, a, nargs);
}

/* The object a set_arg replaced, for the caller to retire, or None when nothing needs
 * keeping (the same object, or a plain int / float / bool). Steals old. */
static PyObject *replaced(PyObject *old, PyObject *value)
{
    PyTypeObject *t = Py_TYPE(old);
    if (old == value || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type) {
        Py_DECREF(old);
        Py_RETURN_NONE;
    }
    return old;
}

/* The index of the argument a set_arg key names: an int, or a parameter name looked up in
 * names (the layout's name -> index dict); -1 when not judged here. */
static Py_ssize_t key_index(PyObject *key, PyObject *names)
{
    if (PyUnicode_CheckExact(key) && PyDict_CheckExact(names)) {
        key = PyDict_GetItemWithError(names, key);   /* a str key runs no Python code */
        if (!key) {
            PyErr_Clear();
            return -1;
        }
    }
    if (!PyLong_CheckExact(key))
        return -1;
    Py_ssize_t i = PyLong_AsSsize_t(key);
    if (i == -1 && PyErr_Occurred())
        PyErr_Clear();
    return i;
}

/* set_arg(exec_h, node_h, hot, address, refs, key, value, pack, exe, node) -> the replaced
 * object or None: one argument (key: its index, or its parameter's name) of a kernel node
 * of an exec, written into the exec's pack at address, then cuGraphExecKernelNodeSetParams.
 * hot: the layout's Plan (with its names). A failed call leaves the slot unchanged. */
PyObject *set_arg(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(10);
    const plan_head *p;
    void *e, *node, *base;
    PyObject *refs = a[4], *value = a[6];
    if (!S.exec_set || !ready() || (p = hot_plan(a[2])) == NULL || as_ptr(a[0], &e) ||
        as_ptr(a[1], &node) || as_ptr(a[3], &base) || !base || !PyList_CheckExact(refs))
        return route(R_SET_ARG, a, nargs);
    Py_ssize_t i = key_index(a[5], PLAN(a[2])->names), n = p->n;
    PyObject *conv = PLAN(a[2])->converters;
    if (i < 0 || i >= n || !PyTuple_CheckExact(conv) || PyTuple_GET_SIZE(conv) != n ||
        PyList_GET_SIZE(refs) != n)
        return route(R_SET_ARG, a, nargs);
    const plan_slot *s = (const plan_slot *)(p + 1) + i;
    if (s->kind >= K_OTHER || s->offset < HEADER + 8 * n ||
        s->offset + KIND_SIZE[s->kind] > p->size)
        return route(R_SET_ARG, a, nargs);
    int size = KIND_SIZE[s->kind];
    char saved[8], *slot = (char *)base + s->offset;
    memcpy(saved, slot, size);
    if (put(s->kind, slot, value, PyTuple_GET_ITEM(conv, i)))
        return route(R_SET_ARG, a, nargs);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = S.exec_set(e, node, base);
    Py_END_ALLOW_THREADS
    if (rc) {
        memcpy(slot, saved, size);
        return route(R_SET_ARG, a, nargs);
    }
    if (PyList_GET_SIZE(refs) <= i)   /* a converter shrank it meanwhile */
        Py_RETURN_NONE;
    PyObject *old = PyList_GET_ITEM(refs, i);
    PyList_SET_ITEM(refs, i, Py_NewRef(value));
    return replaced(old, value);
}

/* set_args(exec_h, node_h, hot, address, refs, args, pack, exe, node) -> a list or None:
 * every argument of a kernel node of an exec rewritten in the exec's pack at address (all
 * converted before the call), then cuGraphExecKernelNodeSetParams; the pack's refs take
 * args. The list has, per argument, the object replaced (for the caller to retire) or
 * None (the same object, or a plain int / float / bool); None when no argument has one.
 * A refused value or call leaves the pack as it was: the slots' region is saved first. */
PyObject *set_args(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(9);
    const plan_head *p;
    void *e, *node;
    char *base;
    PyObject *refs = a[4], *args = a[5];
    if (!S.exec_set || !ready() || (p = hot_plan(a[2])) == NULL || !p->simple ||
        p->size > STACK_PACK || as_ptr(a[0], &e) || as_ptr(a[1], &node) ||
        as_ptr(a[3], (void **)&base) || !base || !PyList_CheckExact(refs) ||
        (!PyTuple_CheckExact(args) && !PyList_CheckExact(args)))
        return route(R_SET_ARGS, a, nargs);
    Py_ssize_t n = p->n;
    PyObject *conv = PLAN(a[2])->converters;
    if (!PyTuple_CheckExact(conv) || PyTuple_GET_SIZE(conv) != n ||
        PyList_GET_SIZE(refs) != n || PySequence_Fast_GET_SIZE(args) != n)
        return route(R_SET_ARGS, a, nargs);
    /* A list is copied: a converter (a __cuda_array_interface__ property) could change it.
     * The result is made before anything is written: nothing can fail after the call. */
    PyObject *seq = PyList_CheckExact(args) ? PyList_AsTuple(args) : Py_NewRef(args);
    PyObject *out = seq ? PyList_New(n) : NULL;
    if (!out) {
        Py_XDECREF(seq);
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    const plan_slot *slots = (const plan_slot *)(p + 1);
    size_t start = HEADER + 8 * (size_t)n, len = p->size - start;
    char saved[STACK_PACK];
    memcpy(saved, base + start, len);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && !rc; i++) {
        const plan_slot *s = &slots[i];
        rc = s->kind >= K_OTHER || s->offset < start || s->offset + KIND_SIZE[s->kind] > p->size ||
             put(s->kind, base + s->offset, items[i], PyTuple_GET_ITEM(conv, i));
    }
    if (!rc) {
        CUresult cr;
        Py_BEGIN_ALLOW_THREADS
        cr = S.exec_set(e, node, base);
        Py_END_ALLOW_THREADS
        rc = cr != 0;
    }
    if (rc || PyList_GET_SIZE(refs) != n) {   /* refused, or a converter changed refs */
        memcpy(base + start, saved, len);
        Py_DECREF(out);
        Py_DECREF(seq);
        return route(R_SET_ARGS, a, nargs);   /* it repeats the update, or raises */
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *old = PyList_GET_ITEM(refs, i), *value = items[i];
        PyList_SET_ITEM(refs, i, Py_NewRef(value));
        PyObject *r = replaced(old, value);   /* steals old */
        kept += r != Py_None;
        PyList_SET_ITEM(out, i, r);
    }
    Py_DECREF(seq);
    if (!kept) {   /* nothing to retire: the common case */
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* graph_instantiate(graph_h, flags, graph) -> the exec handle, or 0 if the driver refused:
 * cuGraphInstantiateWithFlags. `graph` names the graph in the trace (the ctypes route). */
PyObject *graph_instantiate(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(3);
    void *g;
    uint64_t flags;
    if (S.instantiate && ready() && !as_ptr(a[0], &g) && PyLong_CheckExact(a[1]) &&
        !as_u64(a[1], &flags)) {
        void *exec = NULL;
        CUresult rc;
        Py_BEGIN_ALLOW_THREADS
        rc = S.instantiate(&exec, g, flags);
        Py_END_ALLOW_THREADS
        return PyLong_FromVoidPtr(rc ? NULL : exec);
    }
    return route(R_INSTANTIATE, a, nargs);
}

/* exec_update(exec_h, graph_h, exe, graph) -> 0, or (CUresult, result, error node) if the
 * driver refused: cuGraphExecUpdate with its CUgraphExecUpdateResultInfo on this stack (the
 * caller explains a refusal). `exe` and `graph` name them in the trace (the ctypes route). */
PyObject *exec_update(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(4);
    void *e, *g;
    if (S.exec_update && ready() && !as_ptr(a[0], &e) && !as_ptr(a[1], &g)) {
        struct {
            int result;
            void *error_node, *error_from_node;
        } info = {0, NULL, NULL};
        CUresult rc;
        Py_BEGIN_ALLOW_THREADS
        rc = S.exec_update(e, g, &info);
        Py_END_ALLOW_THREADS
        if (!rc)
            return PyLong_FromLong(0);
        return Py_BuildValue("(iiN)", (int)rc, info.result, PyLong_FromVoidPtr(info.error_node));
    }
    return route(R_EXEC_UPDATE, a, nargs);
}

/* exec_node_set_slots(exec_h, node_h, params_address, slots, ptrs) -> the CUresult of
 * cuGraphExecKernelNodeSetParams(exec, node, params) after writing each slot, or -1 where
 * it is not made here (no entry point, a thread with no context marked yet, a trace open, a
 * value that is not a plain int; then nothing was written, and the caller makes the call
 * itself and reports a refusal). `slots` is a flat tuple (address, input, delta, ...),
 * empty for the set-params call alone: the 8 bytes at `address` (inside the argument
 * buffers the params name, which the caller keeps) become ptrs[input] + delta. Every value
 * is read before any byte is written. */
PyObject *exec_node_set_slots(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    NARGS(5);
    void *e, *node, *params;
    PyObject *slots = a[3], *ptrs = a[4];
    if (!S.exec_set || !ready() || as_ptr(a[0], &e) || as_ptr(a[1], &node) ||
        as_ptr(a[2], &params) || !params || !PyTuple_CheckExact(slots) ||
        !PyList_CheckExact(ptrs) || PyTuple_GET_SIZE(slots) % 3 || PyTuple_GET_SIZE(slots) > 3 * 64)
        return PyLong_FromLong(-1);
    Py_ssize_t n = PyTuple_GET_SIZE(slots) / 3, np = PyList_GET_SIZE(ptrs);
    uint64_t *where[64], value[64];
    for (Py_ssize_t k = 0; k < n; k++) {
        void *at;
        uint64_t ptr;
        PyObject *io = PyTuple_GET_ITEM(slots, 3 * k + 1), *d = PyTuple_GET_ITEM(slots, 3 * k + 2);
        if (as_ptr(PyTuple_GET_ITEM(slots, 3 * k), &at) || !at || !PyLong_CheckExact(io) ||
            !PyLong_CheckExact(d))
            return PyLong_FromLong(-1);
        Py_ssize_t i = PyLong_AsSsize_t(io);
        long long delta = PyLong_AsLongLong(d);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return PyLong_FromLong(-1);
        }
        if (i < 0 || i >= np || as_u64(PyList_GET_ITEM(ptrs, i), &ptr)) {
            PyErr_Clear();
            return PyLong_FromLong(-1);
        }
        where[k] = (uint64_t *)at;
        value[k] = ptr + (uint64_t)delta;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        memcpy(where[k], &value[k], 8);  /* the buffers need not be 8-byte aligned */
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = S.exec_set(e, node, params);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong((long)rc);
}

/* The base types KernelBase (Kernel extends it) and GraphBase (Graph extends it): the struct
 * of each holds what its hot method reads (a kernel's compiled-route view, _hot; a graph's
 * node table), and the methods are ordinary methods of the type, inherited.
 *
 * KernelBase.launch(grid, block, args=(), stream=None, shared_mem=0) is cuLaunchKernel with
 * the arguments packed on the C stack (launch_core, _native_calls.c); what it does not make
 * itself (a value it does not convert, a trace, a new thread, several devices) or the driver
 * refuses goes to fast.py's ctypes route with the class's _prepare_launch (the checked
 * packing), as fast.launch_kernel does; a launch while a capture is open is kept by the
 * open captures (keep_launched); a call it does not parse is the subclass's _launch_checked.
 *
 * GraphBase.add_kernel(kernel, grid, block, args=(), shared_mem=0, deps=()) is
 * add_node(table, deps, kernel, grid, block, args, shared_mem) (_native_nodes.c), which
 * hands what it does not do to KernelNode.build; a call with an attribute keyword, or one
 * it does not parse, is the subclass's _add_kernel_checked.
 *
 * hot_base.py has their pure-Python twins. */
#include "_native.h"

#include <stddef.h>
#include <structmember.h>   /* PyMemberDef (in descrobject.h from Python 3.12) */

static PyObject *zero, *empty, *name_launch, *name_prepare, *name_add;
static PyObject *K_kw[5], *G_kw[6];   /* the keyword names, interned */
static const char *const KW[] = {"grid", "block", "args", "stream", "shared_mem"};
static const char *const GKW[] = {"kernel", "grid", "block", "args", "shared_mem", "deps"};

/* The parameter a keyword names (0 to n-1), or -1: by identity first (the interned names
 * kw a call site passes), then by value (names). */
static inline int keyword_at(PyObject *name, PyObject *const *kw, const char *const *names,
                             int n)
{
    for (int w = 0; w < n; w++)
        if (name == kw[w])
            return w;
    for (int w = 0; w < n; w++)
        if (PyUnicode_CompareWithASCIIString(name, names[w]) == 0)
            return w;
    return -1;
}

/* Positional arguments a and keywords kwnames into v[0..n-1] (defaults already there):
 * 1, or 0 when the call is not one of these n parameters given once each (another keyword,
 * a name given twice, too many): the Python method's then, which says what is wrong. In
 * line in each method (a call would cost every launch some 40 instructions). */
#if defined(__GNUC__) || defined(__clang__)
#define IN_LINE inline __attribute__((always_inline))
#else
#define IN_LINE inline
#endif
static IN_LINE int parse(PyObject **v, int n,
        PyObject *const *a, Py_ssize_t nargs, PyObject *kwnames, PyObject *const *kw,
        const char *const *names)
{
    if (nargs > n)
        return 0;
    for (Py_ssize_t i = 0; i < nargs; i++)
        v[i] = a[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        int at = keyword_at(PyTuple_GET_ITEM(kwnames, j), kw, names, n);
        if (at < nargs)   /* unknown (-1), or given by position too */
            return 0;
        v[at] = a[nargs + j];
    }
    return 1;
}

/* A launch made while a capture is open: every open capture's list keeps the kernel (its
 * module stays loaded while the captured graph lives), unless it is one of the list's last
 * two items, and, when there are any, the arguments as a tuple: _lifetime.keep_launched's
 * rule (the Python route's). The tuple is made first (it may run Python code); the appends
 * run none, so the lists are walked in place. 0, or -1 with an exception set. */
static int keep_launched(PyObject *kernel, PyObject *args)
{
    PyObject *t = PySequence_Tuple(args);
    if (!t)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; !rc && i < PyList_GET_SIZE(S.keeps); i++) {
        PyObject *kept = PyList_GET_ITEM(S.keeps, i);
        if (!PyList_Check(kept)) {
            PyErr_SetString(PyExc_TypeError, "check.capture_keeps holds a non-list");
            rc = -1;
            break;
        }
        Py_ssize_t n = PyList_GET_SIZE(kept);
        int known = (n > 0 && PyList_GET_ITEM(kept, n - 1) == kernel) ||
                    (n > 1 && PyList_GET_ITEM(kept, n - 2) == kernel);
        if ((!known && PyList_Append(kept, kernel)) ||
            (PyTuple_GET_SIZE(t) && PyList_Append(kept, t)))
            rc = -1;
    }
    Py_DECREF(t);
    return rc;
}

/* k.launch(grid, block, args=(), stream=None, shared_mem=0): cuLaunchKernel. While a
 * capture is open launch_core launches only within the kernel's known limits, and the
 * open captures keep the kernel and arguments (keep_launched). */
static PyObject *kernel_launch(kernel_obj *self, PyObject *const *a, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    PyObject *v[5] = {NULL, NULL, empty, Py_None, zero};
    if (!parse(v, 5, a, nargs, kwnames, K_kw, KW) || !v[0] || !v[1])
        return call_checked((PyObject *)self, name_launch, a, nargs, kwnames);
    /* the plan is read from the struct: held for the call (a converter could replace it) */
    PyObject *hot = Py_NewRef(self->hot ? self->hot : Py_None);
    int st = launch_core(hot, v[0], v[1], v[2], v[3], v[4]);
    PyObject *out = NULL;
    if (!st) {
        out = Py_NewRef(Py_None);
    } else {   /* not made here, or refused: the ctypes route packs, checks and raises */
        PyObject *prepare = PyObject_GetAttr((PyObject *)Py_TYPE(self), name_prepare);
        if (prepare) {
            PyObject *call[] = {hot, v[0], v[1], v[2], v[3], v[4], (PyObject *)self, prepare};
            out = route(R_LAUNCH_KERNEL, call, 8);
            Py_DECREF(prepare);
        }
    }
    Py_DECREF(hot);
    if (out && S.keeps && PyList_GET_SIZE(S.keeps) && keep_launched((PyObject *)self, v[2]))
        Py_CLEAR(out);
    return out;
}

/* g.add_kernel(kernel, grid, block, args=(), shared_mem=0, deps=()): cuGraphAddKernelNode. */
static PyObject *graph_add_kernel(graph_obj *self, PyObject *const *a, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    PyObject *v[6] = {NULL, NULL, NULL, empty, zero, empty}, *table = self->table;
    if (!table || !pack_class_known() || !parse(v, 6, a, nargs, kwnames, G_kw, GKW) ||
        !v[0] || !v[1] || !v[2])
        return call_checked((PyObject *)self, name_add, a, nargs, kwnames);
    Py_INCREF(table);   /* held for the add: a converter (Python code) could replace it */
    PyObject *call[] = {table, v[5], v[0], v[1], v[2], v[3], v[4]};
    PyObject *node = add_node(NULL, call, 7);
    Py_DECREF(table);
    return node;
}

#define FASTKW(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef kernel_methods[] = {
    FASTKW("launch", kernel_launch,
           "launch($self, grid, block, args=(), stream=None, shared_mem=0)\n--\n\n"
           "Launch the kernel now (``cuLaunchKernel``, the driver twin of\n"
           "``cudaLaunchKernel``).\n\n"
           "Parameters\n----------\ngrid, block : int or tuple of up to 3 ints\n"
           "args : sequence\n"
           "    One value per parameter: Python/numpy scalars, device arrays\n"
           "    (``__cuda_array_interface__`` / DLPack), :class:`DeviceBuffer`, int pointers.\n"
           "stream : Stream or stream-like, optional\n"
           "    Defaults to the legacy default stream.\n"
           "shared_mem : int\n"
           "    Dynamic shared memory in bytes. Above 48 KiB the kernel's\n"
           "    ``cudaFuncAttributeMaxDynamicSharedMemorySize`` is raised for you, up to the\n"
           "    device's opt-in maximum.\n\n"
           "Raises\n------\nArgumentError\n"
           "    Grid, block or shared memory outside the device's or the kernel's limits,\n"
           "    or arguments that do not match the signature; nothing is launched.\n"
           "DeviceMismatchError\n"
           "    When a :class:`DeviceBuffer` argument lives on another device than the\n"
           "    stream and peer access to it is not enabled.\n\n"
           "Notes\n-----\n"
           "The launch is made on the stream's device (for a stream made elsewhere, in a\n"
           "process that uses several devices, ``cuStreamGetDevice`` tells which). CUDA\n"
           "launches only on streams of the current device: a stream of another device is\n"
           "launched on with that device made current for the call (``cudaSetDevice`` there\n"
           "and back); inside ``with pcg.device(...)`` of the stream's device no switch is\n"
           "made."),
    {NULL, NULL, 0, NULL}};

static PyMethodDef graph_methods[] = {
    FASTKW("add_kernel", graph_add_kernel,
           "add_kernel($self, kernel, grid, block, args=(), shared_mem=0, deps=(), *, "
           "priority=None, cluster=None, cooperative=None, access_policy=None, "
           "mem_sync_domain=None, device_updatable=None)\n--\n\n"
           "Add a kernel launch node (``cuGraphAddKernelNode``, i.e.\n"
           "``cudaGraphAddKernelNode``).\n\n"
           "Parameters\n----------\nkernel : Kernel\n"
           "grid, block : int or tuple of up to 3 ints\n"
           "args : sequence\n"
           "    One value per kernel parameter (packed from the kernel's signature).\n"
           "shared_mem : int\n    Dynamic shared memory in bytes.\n"
           "deps : sequence of Node\n"
           "priority, cluster, cooperative, access_policy, mem_sync_domain, device_updatable\n"
           "    Kernel-node attributes, set with ``cudaGraphKernelNodeSetAttribute`` when not\n"
           "    ``None`` (:mod:`pycudagraph.nodes.attributes`; ``node.attributes`` reads them)."),
    {NULL, NULL, 0, NULL}};

static int kernel_traverse(kernel_obj *o, visitproc visit, void *arg)
{
    Py_VISIT(o->hot);
    return 0;
}

static int kernel_clear(kernel_obj *o)
{
    Py_CLEAR(o->hot);
    return 0;
}

static void kernel_dealloc(kernel_obj *o)
{
    PyObject_GC_UnTrack(o);
    Py_CLEAR(o->hot);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static int graph_traverse(graph_obj *o, visitproc visit, void *arg)
{
    Py_VISIT(o->table);
    return 0;
}

static int graph_clear(graph_obj *o)
{
    Py_CLEAR(o->table);
    return 0;
}

static void graph_dealloc(graph_obj *o)
{
    PyObject_GC_UnTrack(o);
    Py_CLEAR(o->table);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMemberDef kernel_members[] = {
    {"_hot", T_OBJECT_EX, offsetof(kernel_obj, hot), 0,
     "the compiled route's view: a Plan (plan, converters, layout), or None"},
    {NULL, 0, 0, 0, NULL}};

static PyMemberDef graph_members[] = {
    {"table", T_OBJECT_EX, offsetof(graph_obj, table), 0,
     "the graph's nodes and what they keep alive (a NodeTable)"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject KernelBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.KernelBase",
    .tp_doc = "What an eager launch reads of a kernel (its compiled-route view), and the "
              "launch; Kernel extends it.",
    .tp_basicsize = sizeof(kernel_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_traverse = (traverseproc)kernel_traverse,
    .tp_clear = (inquiry)kernel_clear,
    .tp_methods = kernel_methods,
    .tp_members = kernel_members,
};

PyTypeObject GraphBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.GraphBase",
    .tp_doc = "What a kernel-node add reads of a graph (its node table), and the add; Graph "
              "extends it.",
    .tp_basicsize = sizeof(graph_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_traverse = (traverseproc)graph_traverse,
    .tp_clear = (inquiry)graph_clear,
    .tp_methods = graph_methods,
    .tp_members = graph_members,
};

/* KernelBase and GraphBase ready and added to module m, the parsers' state made; -1 with
 * an error set. */
int add_method_types(PyObject *m)
{
    if ((!zero && !(zero = PyLong_FromLong(0))) || (!empty && !(empty = PyTuple_New(0))))
        return -1;
    struct { PyObject **at; const char *name; } names[] = {
        {&name_launch, "_launch_checked"}, {&name_prepare, "_prepare_launch"},
        {&name_add, "_add_kernel_checked"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!*names[i].at && !(*names[i].at = PyUnicode_InternFromString(names[i].name)))
            return -1;
    for (int w = 0; w < 5; w++)
        if (!K_kw[w] && !(K_kw[w] = PyUnicode_InternFromString(KW[w])))
            return -1;
    for (int w = 0; w < 6; w++)
        if (!G_kw[w] && !(G_kw[w] = PyUnicode_InternFromString(GKW[w])))
            return -1;
    if (PyModule_AddType(m, &KernelBase_Type) < 0 || PyModule_AddType(m, &GraphBase_Type) < 0)
        return -1;
    return 0;
}

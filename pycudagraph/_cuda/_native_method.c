/* Kernel.launch and Graph.add_kernel as methods of their classes in C (installed by
 * fast.method_kernel_launch and fast.method_graph_add_kernel), and what methods in C share:
 * call_method (a Python method called with a C method's arguments) and method_doc. */
#include "_native.h"

#include <string.h>

/* fn(self, *a, **kw): a Python method called with the arguments a method in C was given. */
PyObject *call_method(PyObject *fn, PyObject *self, PyObject *const *a, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **all = total < 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (total + 1));
    if (!all)
        return PyErr_NoMemory();
    all[0] = self;
    memcpy(all + 1, a, sizeof(PyObject *) * total);
    PyObject *out = PyObject_Vectorcall(fn, all, nargs + 1, kwnames);
    if (all != small)
        PyMem_Free(all);
    return out;
}

/* def->ml_doc = a copy of doc (kept as long as the process), once; -1 with an error set. */
int method_doc(PyMethodDef *def, const char *doc)
{
    if (def->ml_doc)
        return 0;
    char *copy = PyMem_RawMalloc(strlen(doc) + 1);
    if (!copy) {
        PyErr_NoMemory();
        return -1;
    }
    strcpy(copy, doc);
    def->ml_doc = copy;
    return 0;
}

/* Kernel.launch as a method of the class in C: the eager launch without the Python frame of
 * the method. kernel_launch_method hands over the class, its _hot slot, the Python method
 * (the fallback of a call it cannot parse), the checked packing (prepare, what
 * launch_kernel's route runs), the list that is not empty while a capture keeps launched
 * arguments, and the function that hands them to it (keep(args)). A call is the Python
 * method's: launch_kernel(hot, grid, block, args, stream, shared_mem, kernel, prepare) (the
 * compiled call, which takes its ctypes route for what it does not do itself), then
 * keep(args) while a capture is open. */
static struct {
    PyTypeObject *type;
    Py_ssize_t hot_slot;
    PyObject *fallback, *prepare, *keeps, *keep, *zero, *empty;
    PyObject *kw[5];   /* the keyword names, interned: a call site's names are these objects */
} K;

static const char *const KW[] = {"grid", "block", "args", "stream", "shared_mem"};

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

/* What a method's parser fills in (0 and () as defaults, into *zero and *empty) and its n
 * keyword names interned into kw (a call site's names are these objects): made once, in
 * the method's own state, where its calls read them. -1 with the error set if not. */
static int parser_state(PyObject **zero, PyObject **empty, PyObject **kw,
                        const char *const *names, int n)
{
    if ((!*zero && !(*zero = PyLong_FromLong(0))) || (!*empty && !(*empty = PyTuple_New(0))))
        return -1;
    for (int w = 0; w < n; w++)
        if (!kw[w] && !(kw[w] = PyUnicode_InternFromString(names[w])))
            return -1;
    return 0;
}

/* k.launch(grid, block, args=(), stream=None, shared_mem=0): cuLaunchKernel. */
static PyObject *kernel_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    PyObject *v[5] = {NULL, NULL, K.empty, Py_None, K.zero};
    int ok = K.type && PyObject_TypeCheck(self, K.type) &&
             parse(v, 5, a, nargs, kwnames, K.kw, KW);
    if (!ok || !v[0] || !v[1])
        return call_method(K.fallback, self, a, nargs, kwnames);
    /* the plan is read from a slot: held for the call (a converter could replace it); the
     * other arguments are the caller's */
    PyObject *hot = *(PyObject **)((char *)self + K.hot_slot);
    hot = Py_NewRef(hot ? hot : Py_None);
    PyObject *call[] = {hot, v[0], v[1], v[2], v[3], v[4], self, K.prepare};
    PyObject *r = launch_kernel(NULL, call, 8);
    Py_DECREF(hot);
    if (!r || !PyList_GET_SIZE(K.keeps) ||
        ((PyTuple_CheckExact(v[2]) || PyList_CheckExact(v[2])) && !PySequence_Fast_GET_SIZE(v[2])))
        return r;   /* no capture open, or nothing launched to keep */
    Py_DECREF(r);
    return PyObject_CallOneArg(K.keep, v[2]);   /* a capture keeps what was launched */
}

static PyMethodDef kernel_launch_def = {"launch", (PyCFunction)(void (*)(void))kernel_launch,
                                        METH_FASTCALL | METH_KEYWORDS, NULL};

/* kernel_launch_method(cls, hot_descriptor, fallback, prepare, keeps, keep, doc) -> the
 * method descriptor. */
PyObject *kernel_launch_method(PyObject *m, PyObject *args)
{
    PyObject *cls, *hot_descr, *fb, *prepare, *keeps, *keep;
    const char *doc;
    if (!PyArg_ParseTuple(args, "O!OOOO!Os", &PyType_Type, &cls, &hot_descr, &fb, &prepare,
                          &PyList_Type, &keeps, &keep, &doc))
        return NULL;
    Py_ssize_t at = slot_offset(cls, hot_descr);
    if (at < 0)
        return NULL;
    if (!PyCallable_Check(fb) || !PyCallable_Check(prepare) || !PyCallable_Check(keep)) {
        PyErr_SetString(PyExc_TypeError, "kernel_launch_method: callables were expected");
        return NULL;
    }
    if (parser_state(&K.zero, &K.empty, K.kw, KW, 5) || method_doc(&kernel_launch_def, doc))
        return NULL;
    Py_XSETREF(K.type, (PyTypeObject *)Py_NewRef(cls));
    K.hot_slot = at;
    Py_XSETREF(K.fallback, Py_NewRef(fb));
    Py_XSETREF(K.prepare, Py_NewRef(prepare));
    Py_XSETREF(K.keeps, Py_NewRef(keeps));
    Py_XSETREF(K.keep, Py_NewRef(keep));
    return PyDescr_NewMethod((PyTypeObject *)cls, &kernel_launch_def);
}

/* Graph.add_kernel as a method of the class in C: the common kernel-node add (no attribute
 * keyword) without the Python frame of the method. graph_add_kernel_method hands over the
 * class, its table slot and the Python method (the fallback of a call with an attribute
 * keyword, or one it cannot parse). A call is what the Python method does then:
 * add_node(table, deps, kernel, grid, block, args, shared_mem), which takes
 * KernelNode.build for anything it does not do itself. */
static struct {
    PyTypeObject *type;
    Py_ssize_t table_slot;
    PyObject *fallback, *zero, *empty;
    PyObject *kw[6];   /* the keyword names, interned */
} G;

static const char *const GKW[] = {"kernel", "grid", "block", "args", "shared_mem", "deps"};

/* g.add_kernel(kernel, grid, block, args=(), shared_mem=0, deps=()): cuGraphAddKernelNode. */
static PyObject *graph_add_kernel(PyObject *self, PyObject *const *a, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    PyObject *v[6] = {NULL, NULL, NULL, G.empty, G.zero, G.empty}, *table;
    if (!G.type || !PyObject_TypeCheck(self, G.type) || !pack_class_known() ||
        !parse(v, 6, a, nargs, kwnames, G.kw, GKW) || !v[0] || !v[1] || !v[2])
        return call_method(G.fallback, self, a, nargs, kwnames);
    if (!(table = *(PyObject **)((char *)self + G.table_slot)))   /* a half-made graph */
        return call_method(G.fallback, self, a, nargs, kwnames);
    Py_INCREF(table);   /* held for the add: a converter (Python code) could replace it */
    PyObject *call[] = {table, v[5], v[0], v[1], v[2], v[3], v[4]};
    PyObject *node = add_node(NULL, call, 7);
    Py_DECREF(table);
    return node;
}

static PyMethodDef graph_add_kernel_def = {
    "add_kernel", (PyCFunction)(void (*)(void))graph_add_kernel, METH_FASTCALL | METH_KEYWORDS,
    NULL};

/* graph_add_kernel_method(cls, table_descriptor, fallback, doc) -> the method descriptor. */
PyObject *graph_add_kernel_method(PyObject *m, PyObject *args)
{
    PyObject *cls, *table_descr, *fb;
    const char *doc;
    if (!PyArg_ParseTuple(args, "O!OOs", &PyType_Type, &cls, &table_descr, &fb, &doc))
        return NULL;
    Py_ssize_t at = slot_offset(cls, table_descr);
    if (at < 0)
        return NULL;
    if (!PyCallable_Check(fb)) {
        PyErr_SetString(PyExc_TypeError, "graph_add_kernel_method: fallback must be callable");
        return NULL;
    }
    if (parser_state(&G.zero, &G.empty, G.kw, GKW, 6) ||
        method_doc(&graph_add_kernel_def, doc))
        return NULL;
    Py_XSETREF(G.type, (PyTypeObject *)Py_NewRef(cls));
    G.table_slot = at;
    Py_XSETREF(G.fallback, Py_NewRef(fb));
    return PyDescr_NewMethod((PyTypeObject *)cls, &graph_add_kernel_def);
}

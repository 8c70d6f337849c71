/* _bare: the driver calls pycudagraph's hot paths make, with nothing around them, for the
 * benchmarks' "driver" column (benchmarks/bare.py builds it; see benchmarks/README.md).
 *
 * Each function takes ints (handles, the addresses of arguments packed beforehand), makes one
 * driver call with the GIL released (as pycudagraph's compiled calls do) and raises
 * RuntimeError naming the call when it fails. No CUDA header: bare.py hands over the entry
 * points it read from libcuda (set_driver), as pycudagraph/_cuda/fast.py does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

typedef int CUresult;

enum { LAUNCH, LAUNCH_KERNEL, ADD, EXEC_SET, INSTANTIATE, EXEC_DESTROY, UPDATE, CREATE, DESTROY,
       BEGIN, END, COUNT };
static const char *NAMES[COUNT] = {
    "cuGraphLaunch", "cuLaunchKernel", "cuGraphAddKernelNode_v2",
    "cuGraphExecKernelNodeSetParams_v2", "cuGraphInstantiateWithFlags", "cuGraphExecDestroy",
    "cuGraphExecUpdate_v2", "cuGraphCreate", "cuGraphDestroy", "cuStreamBeginCapture_v2",
    "cuStreamEndCapture"};
static void *fn[COUNT];

static PyObject *failed(int which, CUresult rc)
{
    if (!fn[which])
        PyErr_Format(PyExc_RuntimeError, "%s is not available", NAMES[which]);
    else
        PyErr_Format(PyExc_RuntimeError, "%s failed: CUresult %d", NAMES[which], rc);
    return NULL;
}

static int ptrs(PyObject *const *a, Py_ssize_t nargs, Py_ssize_t want, void **out)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "takes %zd arguments", want);
        return -1;
    }
    for (Py_ssize_t i = 0; i < want; i++) {
        out[i] = PyLong_AsVoidPtr(a[i]);
        if (!out[i] && PyErr_Occurred())
            return -1;
    }
    return 0;
}

#define CALL(which, type, ...)                                      \
    CUresult rc = -1;                                               \
    if (fn[which]) {                                                \
        Py_BEGIN_ALLOW_THREADS                                      \
        rc = ((type)fn[which])(__VA_ARGS__);                        \
        Py_END_ALLOW_THREADS                                        \
    }                                                               \
    if (rc)                                                         \
        return failed(which, rc);

/* graph_launch(exec, stream) */
static PyObject *graph_launch(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[2];
    if (ptrs(a, nargs, 2, p))
        return NULL;
    CALL(LAUNCH, CUresult (*)(void *, void *), p[0], p[1]);
    Py_RETURN_NONE;
}

/* launch_kernel(func, stream, kernel_params): grid and block 1, no shared memory */
static PyObject *launch_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[3];
    if (ptrs(a, nargs, 3, p))
        return NULL;
    CALL(LAUNCH_KERNEL, CUresult (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, unsigned, void *, void **, void **),
         p[0], 1, 1, 1, 1, 1, 1, 0, p[1], (void **)p[2], NULL);
    Py_RETURN_NONE;
}

/* add_kernel(graph, dependency or 0, params) -> node */
static PyObject *add_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[3], *node = NULL;
    if (ptrs(a, nargs, 3, p))
        return NULL;
    CALL(ADD, CUresult (*)(void **, void *, void *const *, size_t, const void *), &node, p[0],
         p[1] ? &p[1] : NULL, p[1] ? 1 : 0, p[2]);
    return PyLong_FromVoidPtr(node);
}

/* exec_set(exec, node, params) */
static PyObject *exec_set(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[3];
    if (ptrs(a, nargs, 3, p))
        return NULL;
    CALL(EXEC_SET, CUresult (*)(void *, void *, const void *), p[0], p[1], p[2]);
    Py_RETURN_NONE;
}

/* instantiate(graph) -> exec */
static PyObject *instantiate(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[1], *exec = NULL;
    if (ptrs(a, nargs, 1, p))
        return NULL;
    CALL(INSTANTIATE, CUresult (*)(void **, void *, unsigned long long), &exec, p[0], 0);
    return PyLong_FromVoidPtr(exec);
}

/* exec_destroy(exec) */
static PyObject *exec_destroy(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[1];
    if (ptrs(a, nargs, 1, p))
        return NULL;
    CALL(EXEC_DESTROY, CUresult (*)(void *), p[0]);
    Py_RETURN_NONE;
}

/* exec_update(exec, graph): the update result must be success too */
static PyObject *exec_update(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[2];
    struct { int result; int pad; void *error_node, *error_from; } info = {0};
    if (ptrs(a, nargs, 2, p))
        return NULL;
    CALL(UPDATE, CUresult (*)(void *, void *, void *), p[0], p[1], &info);
    if (info.result)
        return failed(UPDATE, 1000 + info.result);
    Py_RETURN_NONE;
}

/* graph_create() -> graph */
static PyObject *graph_create(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *graph = NULL;
    if (ptrs(a, nargs, 0, NULL))
        return NULL;
    CALL(CREATE, CUresult (*)(void **, unsigned), &graph, 0);
    return PyLong_FromVoidPtr(graph);
}

/* graph_destroy(graph) */
static PyObject *graph_destroy(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[1];
    if (ptrs(a, nargs, 1, p))
        return NULL;
    CALL(DESTROY, CUresult (*)(void *), p[0]);
    Py_RETURN_NONE;
}

/* begin_capture(stream): global mode */
static PyObject *begin_capture(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[1];
    if (ptrs(a, nargs, 1, p))
        return NULL;
    CALL(BEGIN, CUresult (*)(void *, int), p[0], 0);
    Py_RETURN_NONE;
}

/* end_capture(stream) -> graph */
static PyObject *end_capture(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[1], *graph = NULL;
    if (ptrs(a, nargs, 1, p))
        return NULL;
    CALL(END, CUresult (*)(void *, void **), p[0], &graph);
    return PyLong_FromVoidPtr(graph);
}

/* repeat(which, n, a0, a1, a2) -> ns: one of graph_launch (0: exec, stream), launch_kernel
 * (1: func, stream, params) or exec_set (3: exec, node, params) made n times in a C loop, the
 * GIL released once around the loop: the driver call's own cost in this process, with no
 * Python between two calls (what a C++ program pays). Per-call time is ns / n. */
static PyObject *repeat(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[5];
    if (ptrs(a, nargs, 5, p))
        return NULL;
    int which = (int)(intptr_t)p[0];
    long n = (long)(intptr_t)p[1];
    if ((which != LAUNCH && which != LAUNCH_KERNEL && which != EXEC_SET) || n <= 0 || !fn[which]) {
        PyErr_SetString(PyExc_ValueError, "repeat: which is 0, 1 or 3 (and available); n > 0");
        return NULL;
    }
    CUresult rc = 0;
    struct timespec t0, t1;
    Py_BEGIN_ALLOW_THREADS
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n && !rc; i++) {
        if (which == LAUNCH)
            rc = ((CUresult (*)(void *, void *))fn[LAUNCH])(p[2], p[3]);
        else if (which == EXEC_SET)
            rc = ((CUresult (*)(void *, void *, const void *))fn[EXEC_SET])(p[2], p[3], p[4]);
        else
            rc = ((CUresult (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, unsigned, void *, void **, void **))fn[LAUNCH_KERNEL])(
                p[2], 1, 1, 1, 1, 1, 1, 0, p[3], (void **)p[4], NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_END_ALLOW_THREADS
    if (rc)
        return failed(which, rc);
    return PyLong_FromLongLong((long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL +
                               (t1.tv_nsec - t0.tv_nsec));
}

/* exec_set_gil(exec, node, params): exec_set with the GIL held across the call */
static PyObject *exec_set_gil(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    void *p[3];
    if (ptrs(a, nargs, 3, p))
        return NULL;
    CUresult rc = fn[EXEC_SET] ? ((CUresult (*)(void *, void *, const void *))fn[EXEC_SET])(
                                     p[0], p[1], p[2]) : -1;
    if (rc)
        return failed(EXEC_SET, rc);
    Py_RETURN_NONE;
}

/* set_driver({name: address}): the entry points (a missing one makes its function raise) */
static PyObject *set_driver(PyObject *m, PyObject *table)
{
    if (!PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "set_driver takes a dict of entry points");
        return NULL;
    }
    for (int i = 0; i < COUNT; i++) {
        PyObject *v = PyDict_GetItemString(table, NAMES[i]);
        fn[i] = v ? PyLong_AsVoidPtr(v) : NULL;
        if (PyErr_Occurred())
            return NULL;
    }
    Py_RETURN_NONE;
}

#define FAST(name) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, NULL}

static PyMethodDef methods[] = {
    FAST(graph_launch), FAST(launch_kernel), FAST(add_kernel), FAST(exec_set), FAST(instantiate),
    FAST(exec_destroy), FAST(exec_update), FAST(graph_create), FAST(graph_destroy),
    FAST(begin_capture), FAST(end_capture), FAST(repeat), FAST(exec_set_gil),
    {"set_driver", set_driver, METH_O, "set_driver({name: address})"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_bare",
                                    "bare driver calls for the benchmarks", -1, methods};

PyMODINIT_FUNC PyInit__bare(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (m && PyModule_AddObject(m, "ENTRY_POINTS", Py_BuildValue(
                 "(sssssssssss)", NAMES[0], NAMES[1], NAMES[2], NAMES[3], NAMES[4], NAMES[5],
                 NAMES[6], NAMES[7], NAMES[8], NAMES[9], NAMES[10])) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

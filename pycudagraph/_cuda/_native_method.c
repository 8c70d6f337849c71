/* GraphExec.launch as a method of the class in C: the held graph launch without the Python
 * frame of the method.
 *
 * fast.py hands over (exec_launch_method) the class, the member descriptors of its handle
 * slot and of the slot that remembers the last launch's stream (checked as every slot is), the Python method itself
 * (the fallback), the function that raises a host node's pending error (after) and the list
 * of pending errors. It gets back a method descriptor of the class, which it installs as
 * the class's `launch`. A call does what the Python method does: cuGraphLaunch of the handle
 * on the stream (read as launch_graph reads it), then the stream into the slot, then
 * `after` if an error is pending. Anything else (a closed exec, a stream it does not read,
 * keyword arguments, a trace, a thread not ready) is the Python method's, called with the
 * same arguments; a failed call is repeated by launch_graph's ctypes route, which raises the
 * CudaError naming it.
 * The slots are read and written only on objects of the class (the descriptor checks).
 */
#include "_native.h"

#include <string.h>

static struct {
    PyTypeObject *type;
    Py_ssize_t h_slot, last_slot;
    PyObject *fallback, *after, *pending;
} X;

static PyObject *fallback(PyObject *self, PyObject *const *a, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **all = total < 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (total + 1));
    if (!all)
        return PyErr_NoMemory();
    all[0] = self;
    memcpy(all + 1, a, sizeof(PyObject *) * total);
    PyObject *out = PyObject_Vectorcall(X.fallback, all, nargs + 1, kwnames);
    if (all != small)
        PyMem_Free(all);
    return out;
}

/* exe.launch(stream=None): cuGraphLaunch, as GraphExec.launch. */
static PyObject *exec_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    void *e, *s;
    PyObject *stream = nargs ? a[0] : Py_None, *h;
    if (kwnames || nargs > 1 || !S.graph_launch || !thread_ready || S.tracing || !X.type ||
        !PyObject_TypeCheck(self, X.type) || PyList_GET_SIZE(X.pending) ||
        !(h = *(PyObject **)((char *)self + X.h_slot)) || as_ptr(h, &e) || stream_of(stream, &s))
        return fallback(self, a, nargs, kwnames);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = S.graph_launch(e, s);
    Py_END_ALLOW_THREADS
    if (rc) {   /* the ctypes route repeats it (and raises the CudaError naming it) */
        PyObject *route_args[] = {h, stream, self};
        PyObject *r = S.route[R_LAUNCH_GRAPH]
                          ? PyObject_Vectorcall(S.route[R_LAUNCH_GRAPH], route_args, 3, NULL)
                          : fallback(self, a, nargs, kwnames);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    Py_XSETREF(*(PyObject **)((char *)self + X.last_slot), Py_NewRef(stream));
    if (PyList_GET_SIZE(X.pending))   /* a host node of this launch may have failed already */
        return PyObject_CallOneArg(X.after, self);
    Py_RETURN_NONE;
}

static PyMethodDef launch_def = {"launch", (PyCFunction)(void (*)(void))exec_launch,
                                 METH_FASTCALL | METH_KEYWORDS, NULL};

/* exec_launch_method(cls, handle_descriptor, last_descriptor, fallback, after, pending, doc)
 * -> the method descriptor: the slots are cls's own object slots (slot_offset checks). */
PyObject *exec_launch_method(PyObject *m, PyObject *args)
{
    PyObject *cls, *h_descr, *last_descr, *fb, *after, *pending;
    const char *doc;
    if (!PyArg_ParseTuple(args, "O!OOOOO!s", &PyType_Type, &cls, &h_descr, &last_descr, &fb,
                          &after, &PyList_Type, &pending, &doc))
        return NULL;
    Py_ssize_t h_at = slot_offset(cls, h_descr), last_at = h_at < 0 ? -1 : slot_offset(cls, last_descr);
    if (last_at < 0)
        return NULL;
    if (!PyCallable_Check(fb) || !PyCallable_Check(after)) {
        PyErr_SetString(PyExc_TypeError, "exec_launch_method: fallback and after must be callable");
        return NULL;
    }
    if (!launch_def.ml_doc) {   /* the method's docstring lives as long as the process */
        char *copy = PyMem_RawMalloc(strlen(doc) + 1);
        if (!copy)
            return PyErr_NoMemory();
        strcpy(copy, doc);
        launch_def.ml_doc = copy;
    }
    Py_XSETREF(X.type, (PyTypeObject *)Py_NewRef(cls));
    X.h_slot = h_at;
    X.last_slot = last_at;
    Py_XSETREF(X.fallback, Py_NewRef(fb));
    Py_XSETREF(X.after, Py_NewRef(after));
    Py_XSETREF(X.pending, Py_NewRef(pending));
    return PyDescr_NewMethod((PyTypeObject *)cls, &launch_def);
}

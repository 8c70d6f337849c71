/* The module pycudagraph._cuda._vmm: the table of sleepable device memory (_vmm_table.c)
 * seen from Python. pycudagraph/_cuda/vmm.py is its one user: it hands over the driver
 * entry points and turns each failure into the CudaError naming the call.
 *
 * Each function that makes driver calls returns (rc, api, value): rc is the CUresult of the
 * first failing call (0: success) and api its name (None on success). The GIL is released
 * around the table's work: PyTorch's allocator calls the table from other threads without
 * it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_vmm.h"

static PyObject *result(int rc, const char *api, PyObject *value)
{
    if (!value)
        return NULL;
    return Py_BuildValue("(isN)", rc, rc ? api : NULL, value);
}

static int read_tag(PyObject *obj, vmm_tag *out)
{
    *out = PyLong_AsUnsignedLongLong(obj);
    return !(*out == (vmm_tag)-1 && PyErr_Occurred());
}

/* set_driver(entry_points: dict[str, int]): every name of ENTRY_POINTS, an address each */
static PyObject *py_set_driver(PyObject *m, PyObject *table)
{
    if (!PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "set_driver takes a dict of entry points");
        return NULL;
    }
    void *found[VMM_ENTRY_COUNT];
    for (int i = 0; i < VMM_ENTRY_COUNT; i++) {
        PyObject *v = PyDict_GetItemString(table, VMM_NAMES[i]);
        found[i] = v ? PyLong_AsVoidPtr(v) : NULL;
        if (!found[i]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "set_driver: no entry point for %s",
                             VMM_NAMES[i]);
            return NULL;
        }
    }
    vmm_set_driver(found);
    Py_RETURN_NONE;
}

static PyObject *py_set_tag(PyObject *m, PyObject *arg)
{
    vmm_tag tag;
    if (!read_tag(arg, &tag))
        return NULL;
    return PyLong_FromUnsignedLongLong(vmm_set_tag(tag));
}

static PyObject *py_alloc(PyObject *m, PyObject *args)
{
    Py_ssize_t size;
    int device;
    unsigned long long tag;
    if (!PyArg_ParseTuple(args, "niK", &size, &device, &tag))
        return NULL;
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "alloc: size must be positive");
        return NULL;
    }
    dptr ptr = 0;
    const char *api = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = vmm_alloc((size_t)size, device, tag, &ptr, &api);
    Py_END_ALLOW_THREADS
    return result(rc, api, PyLong_FromUnsignedLongLong(ptr));
}

static PyObject *py_free(PyObject *m, PyObject *arg)
{
    dptr ptr = PyLong_AsUnsignedLongLong(arg);
    if (ptr == (dptr)-1 && PyErr_Occurred())
        return NULL;
    const char *api = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = vmm_free(ptr, &api);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    return result(rc, api, Py_None);
}

/* unmap(tag) / remap(tag) -> (rc, api, (allocations, bytes)) */
static PyObject *unmap_or_remap(PyObject *arg, int remap)
{
    vmm_tag tag;
    if (!read_tag(arg, &tag))
        return NULL;
    const char *api = NULL;
    size_t n = 0, bytes = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = remap ? vmm_remap(tag, &n, &bytes, &api) : vmm_unmap(tag, &n, &bytes, &api);
    Py_END_ALLOW_THREADS
    return result(rc, api, Py_BuildValue("(nn)", (Py_ssize_t)n, (Py_ssize_t)bytes));
}

static PyObject *py_unmap(PyObject *m, PyObject *arg)
{
    return unmap_or_remap(arg, 0);
}

static PyObject *py_remap(PyObject *m, PyObject *arg)
{
    return unmap_or_remap(arg, 1);
}

/* allocations(tag=None) -> [(address, size, device, mapped, tag)] */
static PyObject *py_allocations(PyObject *m, PyObject *args)
{
    PyObject *tag_obj = Py_None;
    vmm_tag tag = 0;
    if (!PyArg_ParseTuple(args, "|O", &tag_obj))
        return NULL;
    if (tag_obj != Py_None && !read_tag(tag_obj, &tag))
        return NULL;
    size_t n = 0;
    vmm_entry *copy = vmm_snapshot(&n);
    if (!copy)
        return PyErr_NoMemory();
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < n; i++) {
        vmm_entry *e = &copy[i];
        if (tag_obj != Py_None && e->tag != tag)
            continue;
        PyObject *item = Py_BuildValue("(KniNK)", e->ptr, (Py_ssize_t)e->size, e->device,
                                       PyBool_FromLong(e->mapped), e->tag);
        if (!item || PyList_Append(out, item))
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    free(copy);
    return out;
}

/* take_error() -> (api, rc) of the allocator functions' last failure, or None; clears it */
static PyObject *py_take_error(PyObject *m, PyObject *unused)
{
    int rc = 0;
    const char *api = vmm_take_error(&rc);
    if (!api)
        Py_RETURN_NONE;
    return Py_BuildValue("(si)", api, rc);
}

static PyMethodDef methods[] = {
    {"set_driver", py_set_driver, METH_O, "set_driver(entry_points: dict[str, int])"},
    {"set_tag", py_set_tag, METH_O, "set_tag(tag) -> the old tag (this thread's)"},
    {"alloc", py_alloc, METH_VARARGS, "alloc(size, device, tag) -> (rc, api, address)"},
    {"free", py_free, METH_O, "free(address) -> (rc, api, None)"},
    {"unmap", py_unmap, METH_O, "unmap(tag) -> (rc, api, (allocations, bytes))"},
    {"remap", py_remap, METH_O, "remap(tag) -> (rc, api, (allocations, bytes))"},
    {"allocations", py_allocations, METH_VARARGS,
     "allocations(tag=None) -> [(address, size, device, mapped, tag)]"},
    {"take_error", py_take_error, METH_NOARGS, "take_error() -> (api, rc) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_vmm",
    .m_doc = "Device memory that sleeps and wakes at the same addresses "
             "(see pycudagraph/_cuda/vmm.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__vmm(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "MALLOC", "pcg_vmm_malloc") ||
        PyModule_AddStringConstant(m, "FREE", "pcg_vmm_free")) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *names = PyTuple_New(VMM_ENTRY_COUNT);
    for (int i = 0; names && i < VMM_ENTRY_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(VMM_NAMES[i]);
        if (!s)
            Py_CLEAR(names);
        else
            PyTuple_SET_ITEM(names, i, s);
    }
    if (!names || PyModule_AddObject(m, "ENTRY_POINTS", names)) {
        Py_XDECREF(names);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* dep_handles: the judging of a node add's dependency list, for both node adds (add_node in
 * _native_nodes.c, add_kernel in _native_calls.c). It calls into no other file but the
 * converters' as_ptr and fail. */
#include "_native.h"

#include <stdlib.h>
#include <string.h>

static int cmp_handle(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t)*(void *const *)x, b = (uintptr_t)*(void *const *)y;
    return (a > b) - (a < b);
}

/* No handle twice among n (pairwise for a few, sorted in scratch for many). */
static int distinct(void **h, Py_ssize_t n)
{
    if (n <= 8) {
        for (Py_ssize_t i = 1; i < n; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                if (h[i] == h[j])
                    return 0;
        return 1;
    }
    void **tmp = PyMem_Malloc(sizeof(void *) * n);
    if (!tmp)
        return fail() + 1;   /* not judged here: the route judges */
    memcpy(tmp, h, sizeof(void *) * n);
    qsort(tmp, (size_t)n, sizeof(void *), cmp_handle);
    int ok = 1;
    for (Py_ssize_t i = 1; i < n && ok; i++)
        ok = tmp[i] != tmp[i - 1];
    PyMem_Free(tmp);
    return ok;
}

/* The handles of a dependency list (a tuple or list of node objects), judged as every
 * builder's deps= is: each the graph's own node object for its handle (`nodes`, the
 * graph's handle -> node dict: a node of another graph, a removed node or a node of a
 * destroyed graph is not there), not marked removed, none twice. Handles are read from
 * the nodes' slot (set_node_slots), only of objects of the node type. Up to STACK_DEPS go
 * in stack; more in memory the caller frees when *out != stack. -1: not judged here (the
 * route raises the error naming the node). */
int dep_handles(PyObject *deps, PyObject *nodes, void **stack, void ***out, Py_ssize_t *n)
{
    if ((!PyTuple_CheckExact(deps) && !PyList_CheckExact(deps)) || !PyDict_CheckExact(nodes) ||
        !S.node_type)
        return -1;
    *n = PySequence_Fast_GET_SIZE(deps);
    *out = *n > STACK_DEPS ? PyMem_Malloc(sizeof(void *) * *n) : stack;
    if (!*out)
        return fail();
    PyObject **items = PySequence_Fast_ITEMS(deps);
    int ok = 1;
    for (Py_ssize_t i = 0; i < *n && ok; i++) {
        PyObject *d = items[i];
        if (!PyObject_TypeCheck(d, S.node_type)) {
            ok = 0;
            break;
        }
        PyObject *h = *(PyObject **)((char *)d + S.node_h_slot);
        PyObject *raw = *(PyObject **)((char *)d + S.node_raw_slot);
        /* an int key: looking it up runs no Python code */
        ok = h && PyLong_CheckExact(h) && raw != S.removed &&
             PyDict_GetItemWithError(nodes, h) == d && !as_ptr(h, &(*out)[i]);
    }
    if (ok)
        ok = distinct(*out, *n);
    if (!ok) {
        PyErr_Clear();
        if (*out != stack)
            PyMem_Free(*out);
        return -1;
    }
    if (!*n)
        *out = NULL;
    return 0;
}


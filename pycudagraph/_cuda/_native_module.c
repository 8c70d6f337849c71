/* The module: the state fast.py sets (entry points, routes, flags, the slots of buffers and
 * nodes the calls read), the base types (_native_types.c), and two test entries
 * that expose the converters to the CPU tests comparing them with the Python ones. */
#include "_native.h"

#include <stddef.h>
#include <string.h>
#include <structmember.h>   /* PyMemberDef (in descrobject.h from Python 3.12) */

_Alignas(64) native_state S;
_Thread_local int thread_ready;

_Static_assert(sizeof(kparams) == HEADER, "CUDA_KERNEL_NODE_PARAMS_v2 is 72 bytes");
_Static_assert(sizeof(plan_head) == 32 && sizeof(plan_slot) == 8, "fast.py's PLAN_* formats");
_Static_assert(offsetof(native_state, buffer_slot) + sizeof(Py_ssize_t) <= 64,
               "what every hot call reads of S fits its first cache line");

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

/* set_driver(entry_points: dict[str, int]): the driver functions the calls make. */
static PyObject *set_driver(PyObject *m, PyObject *table)
{
    if (!PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "set_driver takes a dict of entry points");
        return NULL;
    }
    S.graph_launch = (graph_launch_fn)entry(table, "cuGraphLaunch");
    S.launch_kernel = (launch_kernel_fn)entry(table, "cuLaunchKernel");
    S.add_kernel = (add_kernel_fn)entry(table, "cuGraphAddKernelNode_v2");
    S.exec_set = (exec_set_fn)entry(table, "cuGraphExecKernelNodeSetParams_v2");
    S.instantiate = (instantiate_fn)entry(table, "cuGraphInstantiateWithFlags");
    S.exec_update = (exec_update_fn)entry(table, "cuGraphExecUpdate_v2");
    Py_RETURN_NONE;
}

/* set_routes(routes: tuple, captures: list, keeps: list, host_errors: list): fast.py's
 * route of each call (in the order of R_*), the list that is not empty while a capture is
 * open, the list of the open captures' keep lists, and the list of host nodes' pending
 * errors. */
static PyObject *set_routes(PyObject *m, PyObject *args)
{
    PyObject *routes, *captures, *keeps, *host_errors;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyTuple_Type, &routes, &PyList_Type, &captures,
                          &PyList_Type, &keeps, &PyList_Type, &host_errors))
        return NULL;
    if (PyTuple_GET_SIZE(routes) != R_COUNT) {
        PyErr_Format(PyExc_ValueError, "set_routes takes %d routes", R_COUNT);
        return NULL;
    }
    for (int r = 0; r < R_COUNT; r++) {
        if (!PyCallable_Check(PyTuple_GET_ITEM(routes, r))) {
            PyErr_Format(PyExc_TypeError, "route %d is not callable", r);
            return NULL;
        }
    }
    for (int r = 0; r < R_COUNT; r++)
        Py_XSETREF(S.route[r], Py_NewRef(PyTuple_GET_ITEM(routes, r)));
    Py_XSETREF(S.captures, Py_NewRef(captures));
    Py_XSETREF(S.keeps, Py_NewRef(keeps));
    Py_XSETREF(S.host_errors, Py_NewRef(host_errors));
    Py_RETURN_NONE;
}

/* The type and slot offset of one (cls, descriptor) pair of args into *type and *slot. */
static PyObject *set_type_slot(PyObject *args, PyTypeObject **type, Py_ssize_t *slot)
{
    PyObject *cls, *descr;
    if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &cls, &descr))
        return NULL;
    Py_ssize_t at = slot_offset(cls, descr);
    if (at < 0)
        return NULL;
    Py_XSETREF(*type, (PyTypeObject *)Py_NewRef(cls));
    *slot = at;
    Py_RETURN_NONE;
}

/* set_pointer_slot(cls, descriptor): objects of exactly type cls keep their device address
 * (0 once freed) in that slot: the address put() takes for a pointer argument. */
static PyObject *set_pointer_slot(PyObject *m, PyObject *args)
{
    return set_type_slot(args, &S.buffer_type, &S.buffer_slot);
}

/* set_stream_slot(cls, descriptor): streams of exactly type cls keep their handle (an int,
 * None once closed) in that slot: what launches read a stream argument's handle from. */
static PyObject *set_stream_slot(PyObject *m, PyObject *args)
{
    return set_type_slot(args, &S.stream_type, &S.stream_slot);
}

/* set_node_slots(cls, handle_descriptor, raw_descriptor, removed): objects of type cls (and
 * its subclasses) keep their handle (an int) in one slot and `removed` in the other once
 * removed from their graph: what dep_handles() judges a dependency list by. */
static PyObject *set_node_slots(PyObject *m, PyObject *args)
{
    PyObject *cls, *h_descr, *raw_descr, *removed;
    if (!PyArg_ParseTuple(args, "O!OOO", &PyType_Type, &cls, &h_descr, &raw_descr, &removed))
        return NULL;
    Py_ssize_t h_at = slot_offset(cls, h_descr), raw_at = h_at < 0 ? -1 : slot_offset(cls, raw_descr);
    if (raw_at < 0)
        return NULL;
    Py_XSETREF(S.node_type, (PyTypeObject *)Py_NewRef(cls));
    Py_XSETREF(S.removed, Py_NewRef(removed));
    S.node_h_slot = h_at;
    S.node_raw_slot = raw_at;
    Py_RETURN_NONE;
}

/* set_table_slots(node_table_descriptor, table_cls, dead_descriptor): a node (of the class
 * set_node_slots named) keeps its table in one slot; a table (exactly table_cls) keeps why
 * its graph is gone ("" while valid) in another: with the removed mark, node_live's rule. */
static PyObject *set_table_slots(PyObject *m, PyObject *args)
{
    PyObject *t_descr, *cls, *d_descr;
    if (!PyArg_ParseTuple(args, "OO!O", &t_descr, &PyType_Type, &cls, &d_descr))
        return NULL;
    if (!S.node_type) {
        PyErr_SetString(PyExc_RuntimeError, "set_table_slots: set_node_slots first");
        return NULL;
    }
    Py_ssize_t t_at = member_offset(S.node_type, t_descr);
    Py_ssize_t d_at = t_at < 0 ? -1 : slot_offset(cls, d_descr);
    if (d_at < 0)
        return NULL;
    S.node_table_slot = t_at;
    Py_XSETREF(S.table_type, (PyTypeObject *)Py_NewRef(cls));
    S.table_dead_slot = d_at;
    Py_RETURN_NONE;
}

/* node_live(node) -> bool: node_live (_native_lookup.c), the one definition of Node.live. */
static PyObject *node_live_py(PyObject *m, PyObject *node)
{
    return PyBool_FromLong(node_live(node));
}

/* set_flags(tracing, multi): a trace records; several devices are in use. */
static PyObject *set_flags(PyObject *m, PyObject *args)
{
    int tracing, multi;
    if (!PyArg_ParseTuple(args, "pp", &tracing, &multi))
        return NULL;
    S.tracing = tracing;
    S.multi = multi;
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

/* dims(value) -> (x, y, z) or None: the grid/block normaliser, for the tests. */
static PyObject *dims_entry(PyObject *m, PyObject *value)
{
    uint32_t d[3];
    if (dims(value, d))
        Py_RETURN_NONE;
    return Py_BuildValue("(III)", d[0], d[1], d[2]);
}

/* convert(kind, value, converter) -> bytes or None: the slot writer, for the tests. */
static PyObject *convert_entry(PyObject *m, PyObject *args)
{
    int kind;
    PyObject *value, *converter;
    if (!PyArg_ParseTuple(args, "iOO", &kind, &value, &converter))
        return NULL;
    if (kind < 0 || kind > K_OTHER) {
        PyErr_Format(PyExc_ValueError, "unknown kind %d", kind);
        return NULL;
    }
    char slot[8];
    if (put(kind, slot, value, converter))
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(slot, KIND_SIZE[kind]);
}

#define FAST(name, doc) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    FAST(launch_graph, "launch_graph(exec_h, stream, exe) -> None: cuGraphLaunch"),
    FAST(graph_instantiate, "graph_instantiate(graph_h, flags, graph) -> exec handle, 0 if "
                            "refused: cuGraphInstantiateWithFlags"),
    FAST(exec_update, "exec_update(exec_h, graph_h, exe, graph) -> 0, or (CUresult, result, "
                      "error node) if refused: cuGraphExecUpdate"),
    FAST(launch_kernel, "launch_kernel(hot, grid, block, args, stream, shared_mem, kernel, "
                        "prepare) -> None: cuLaunchKernel"),
    FAST(add_kernel, "add_kernel(hot, grid, block, args, shared_mem, graph_h, deps, nodes, "
                     "kernel, graph, prepare) -> (node_h, pack): cuGraphAddKernelNode"),
    FAST(set_arg, "set_arg(exec_h, node_h, hot, address, refs, key, value, pack, exe, node)"
                  " -> replaced object or None: cuGraphExecKernelNodeSetParams"),
    FAST(set_args, "set_args(exec_h, node_h, hot, address, refs, args, pack, exe, node)"
                   " -> list of replaced objects or None: cuGraphExecKernelNodeSetParams"),
    FAST(exec_node_set_slots, "exec_node_set_slots(exec_h, node_h, params_address, slots, ptrs)"
                              " -> CUresult, or -1 if not made here (nothing written): the "
                              "slots (address, input, delta, ...) set to ptrs[input] + delta,"
                              " then cuGraphExecKernelNodeSetParams"),
    FAST(add_node, "add_node(table, deps, kernel, grid, block, args, shared_mem) -> the new "
                   "KernelNode, registered: cuGraphAddKernelNode"),
    FAST(add_kernel_nodes, "add_kernel_nodes(table, kernels, recs, argbytes, deps, made) -> "
                           "how many nodes were added (appended to made): cuGraphAddKernelNode"),
    FAST(add_param_nodes, "add_param_nodes(graph_h, params_addr, stride, recs, deps) -> "
                          "(handles, CUresult), or None if not made here: "
                          "cuGraphAddKernelNode per params struct"),
    FAST(add_record_nodes, "add_record_nodes(graph_h, kernels, recs, argbytes, deps) -> "
                           "(handles, CUresult), or None if not made here: "
                           "cuGraphAddKernelNode per record, params from its kernel's plan"),
    FAST(records_pass, "records_pass(recs, nargs, ndeps, relocs, blocks, nkernels, sizes, "
                       "nslots) -> bool: a graph file's kernel records and relocations pass "
                       "every check (one pass, no CUDA call)"),
    FAST(register_node, "register_node(table, node, *keep) -> node: NodeTable.register "
                        "(nodes[int(node)] = node, the ledger holds (node, *keep))"),
    {"node_live", node_live_py, METH_O, "node_live(node) -> bool: Node.live's rule, not "
                                        "removed and its graph not destroyed"},
    {"set_node_maker", set_node_maker, METH_VARARGS,
     "set_node_maker(table_cls, table_slots, ledger_cls, ledger_slots, node_cls, node_slots, "
     "pack_cls, fallback, hold): what add_node reads and makes (slots: name -> member "
     "descriptor)"},
    {"set_driver", set_driver, METH_O, "set_driver(entry_points: dict[str, int])"},
    {"set_routes", set_routes, METH_VARARGS,
     "set_routes(routes: tuple, captures: list, keeps: list, host_errors: list)"},
    {"set_table_slots", set_table_slots, METH_VARARGS,
     "set_table_slots(node_table_descriptor, table_cls, dead_descriptor): what node_live "
     "reads besides the removed mark"},
    {"set_flags", set_flags, METH_VARARGS, "set_flags(tracing: bool, multi: bool)"},
    {"set_pointer_slot", set_pointer_slot, METH_VARARGS,
     "set_pointer_slot(cls, descriptor): where a cls object keeps its device address"},
    {"set_stream_slot", set_stream_slot, METH_VARARGS,
     "set_stream_slot(cls, descriptor): where a cls object keeps its stream handle"},
    {"set_node_slots", set_node_slots, METH_VARARGS,
     "set_node_slots(cls, handle_descriptor, raw_descriptor, removed): a node's handle slot"
     " and removed mark"},
    {"mark_thread", mark_thread, METH_NOARGS, "the calling thread has a current context"},
    {"thread_ready", thread_is_ready, METH_NOARGS, "whether mark_thread ran in this thread"},
    {"dims", dims_entry, METH_O, "dims(value) -> (x, y, z) or None (not converted here)"},
    {"convert", convert_entry, METH_VARARGS,
     "convert(kind, value, converter) -> the slot's bytes, or None (not converted here)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_native",
                                    "pycudagraph's compiled hot calls (see _cuda/fast.py)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    static const char *names[] = {"K_I8", "K_U8", "K_I16", "K_U16", "K_I32", "K_U32", "K_I64",
                                  "K_U64", "K_F32", "K_F64", "K_BOOL", "K_PTR", "K_OTHER"};
    for (int k = 0; k <= K_OTHER; k++) {
        if (PyModule_AddIntConstant(m, names[k], k) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (add_types(m) < 0 || add_method_types(m) < 0 || add_plan_type(m) < 0 ||
        PyModule_AddIntConstant(m, "STACK_PACK", STACK_PACK) < 0 ||
        PyModule_AddIntConstant(m, "PLAN_HEAD_SIZE", sizeof(plan_head)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* The hot path's base types, owned here: ExecBase (GraphExec extends it), ExecNodeBase
 * (ExecNode), ArgPackBase (ArgPack) and LayoutBase (Layout). Each struct holds exactly what
 * launch, set_arg and set_params(node, args=...) read, as named members; the Python classes
 * add everything else. pycudagraph/_cuda/hot_base.py is their pure-Python twin (the same
 * attribute names and methods), used with PYCUDAGRAPH_NO_NATIVE=1.
 *
 * ExecBase's methods launch, set_arg and set_params are ordinary methods of the type,
 * inherited by GraphExec. Each does the common case itself (the held launch; one or every
 * argument of a kernel node the exec has a record of) and hands anything else to the
 * subclass's checked method of the same call, with the same arguments: _launch_checked,
 * _set_arg_checked, _set_params_checked (Python; they raise the clear errors). _block, why
 * launches are refused (GraphExec.block_launches), is kept as NULL while they are not.
 *
 * Liveness of a node is node_live (_native_lookup.c), the one C reading of Node.check_live's
 * rule. The calls themselves (set_arg, set_args, launch routes) are _native_calls.c's.
 */
#include "_native.h"

#include <stddef.h>
#include <string.h>
#include <structmember.h>   /* PyMemberDef (in descrobject.h from Python 3.12) */

static PyObject *name_launch, *name_set_arg, *name_set_params, *name_after, *name_args,
                *name_stream;

/* Every member is an object pointer after the head: one traverse and clear for all four. */
#define FIELDS(o) ((PyObject **)((char *)(o) + sizeof(PyObject)))
#define COUNT(T) ((Py_ssize_t)((sizeof(T) - sizeof(PyObject)) / sizeof(PyObject *)))

static int visit_fields(PyObject *o, Py_ssize_t n, visitproc visit, void *arg)
{
    PyObject **f = FIELDS(o);
    for (Py_ssize_t i = 0; i < n; i++)
        Py_VISIT(f[i]);
    return 0;
}

static void clear_fields(PyObject *o, Py_ssize_t n)
{
    PyObject **f = FIELDS(o);
    for (Py_ssize_t i = 0; i < n; i++)
        Py_CLEAR(f[i]);
}

/* traverse, clear and dealloc of a base type whose struct is T */
#define GC_OF(prefix, T)                                                                  \
    static int prefix##_traverse(PyObject *o, visitproc visit, void *arg)                 \
    {                                                                                     \
        return visit_fields(o, COUNT(T), visit, arg);                                     \
    }                                                                                     \
    static int prefix##_clear(PyObject *o)                                                \
    {                                                                                     \
        clear_fields(o, COUNT(T));                                                        \
        return 0;                                                                         \
    }                                                                                     \
    static void prefix##_dealloc(PyObject *o)                                             \
    {                                                                                     \
        PyObject_GC_UnTrack(o);                                                           \
        clear_fields(o, COUNT(T));                                                        \
        Py_TYPE(o)->tp_free(o);                                                           \
    }

GC_OF(exec, exec_obj)
GC_OF(record, record_obj)
GC_OF(pack, pack_obj)
GC_OF(layout, layout_obj)

/* ---- ExecBase ------------------------------------------------------------------------ */

/* exe.launch(stream=None): cuGraphLaunch of the exec's handle on the stream, the stream kept
 * in _last_stream, then _after_launch() if a host node's error is pending. A blocked or
 * closed exec, a stream it does not read, a trace, a thread not ready: _launch_checked. */
static PyObject *exec_launch(exec_obj *self, PyObject *const *a, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    PyObject *stream = nargs ? a[0] : Py_None, *h = self->h;
    if (nargs > 1 || (kwnames && (nargs || PyTuple_GET_SIZE(kwnames) != 1 ||
                                  (PyTuple_GET_ITEM(kwnames, 0) != name_stream &&
                                   PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), name_stream))))) {
        PyErr_SetString(PyExc_TypeError, "launch() takes one argument, stream=None");
        return NULL;
    }
    if (kwnames)
        stream = a[0];
    void *e, *s;
    if (self->block || !h || !S.graph_launch || !thread_ready || S.tracing ||
        (S.host_errors && PyList_GET_SIZE(S.host_errors)) || as_ptr(h, &e) ||
        stream_of(stream, &s))
        return call_checked((PyObject *)self, name_launch, &stream, 1, NULL);
    CUresult rc;
    Py_INCREF(h);   /* another thread may close the exec while the GIL is released */
    Py_BEGIN_ALLOW_THREADS
    rc = S.graph_launch(e, s);
    Py_END_ALLOW_THREADS
    if (rc) {   /* the ctypes route repeats it (and raises the CudaError naming it) */
        PyObject *route_args[] = {h, stream, (PyObject *)self};
        PyObject *r = route(R_LAUNCH_GRAPH, route_args, 3);
        Py_DECREF(h);
        if (!r)
            return NULL;
        Py_DECREF(r);
    } else {
        Py_DECREF(h);
    }
    Py_XSETREF(self->last_stream, Py_NewRef(stream));
    if (S.host_errors && PyList_GET_SIZE(S.host_errors))   /* a host node may have failed */
        return call_checked((PyObject *)self, name_after, NULL, 0, NULL);
    Py_RETURN_NONE;
}

/* The exec's record of node (borrowed) when the compiled update may use it, its pack in
 * *pack and the pack's layout's Plan in *hot; NULL (no error set) otherwise. */
static record_obj *record_of(exec_obj *self, PyObject *node, pack_obj **pack, PyObject **hot)
{
    PyObject *nodes = self->nodes;
    if (!thread_ready || S.tracing || S.multi || !self->h || self->h == Py_None || !nodes ||
        !PyDict_Check(nodes))   /* ExecNodes, a dict subclass without its own lookup */
        return NULL;
    PyObject *key = PyLong_FromVoidPtr(node);
    PyObject *rec = key ? PyDict_GetItemWithError(nodes, key) : NULL;   /* an int key */
    Py_XDECREF(key);
    if (!rec) {
        PyErr_Clear();
        return NULL;
    }
    record_obj *r = (record_obj *)rec;
    if (!PyObject_TypeCheck(rec, &ExecNodeBase_Type) || r->node != node || !node_live(node) ||
        !r->node_h || !r->exec_raw || !r->exec_h || !r->retire || !r->args ||
        !PyObject_TypeCheck(r->args, &ArgPackBase_Type))
        return NULL;
    pack_obj *p = (pack_obj *)r->args;
    if (!p->layout || !PyObject_TypeCheck(p->layout, &LayoutBase_Type) ||
        !(*hot = ((layout_obj *)p->layout)->hot) || !p->address || !p->refs)
        return NULL;
    *pack = p;
    return r;
}

/* rec.retire(old) for each replaced object (old: one object, or a list with Nones). Steals
 * old. */
static PyObject *retire(record_obj *rec, PyObject *old, int many)
{
    PyObject *fn = Py_NewRef(rec->retire);
    Py_ssize_t n = many ? PyList_GET_SIZE(old) : 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = many ? PyList_GET_ITEM(old, i) : old;
        if (o == Py_None)
            continue;
        PyObject *r = PyObject_CallOneArg(fn, o);
        if (!r) {
            Py_DECREF(fn);
            Py_DECREF(old);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(fn);
    Py_DECREF(old);
    Py_RETURN_NONE;
}

/* exe.set_arg(node, index_or_name, value): cuGraphExecKernelNodeSetParams. */
static PyObject *exec_set_arg(exec_obj *self, PyObject *const *a, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *hot;
    pack_obj *pack;
    record_obj *rec;
    if (kwnames || nargs != 3 || !(rec = record_of(self, a[0], &pack, &hot)))
        return call_checked((PyObject *)self, name_set_arg, a, nargs, kwnames);
    PyObject *call[] = {rec->exec_h, rec->node_h, hot, pack->address, pack->refs, a[1], a[2],
                        (PyObject *)pack, rec->exec_raw, a[0]};
    Py_INCREF(rec);   /* a converter could drop the exec's records meanwhile */
    PyObject *old = call_held(set_arg, call, 10);
    PyObject *out = !old ? NULL : old == Py_None ? old : retire(rec, old, 0);
    Py_DECREF(rec);
    return out;
}

/* exe.set_params(node, **changes): every argument of a kernel node with a record
 * (args=a tuple or list, nothing else) here; any other change is _set_params_checked's. */
static PyObject *exec_set_params(exec_obj *self, PyObject *const *a, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    PyObject *hot, *args;
    pack_obj *pack;
    record_obj *rec;
    if (nargs != 1 || !kwnames || PyTuple_GET_SIZE(kwnames) != 1 ||
        (PyTuple_GET_ITEM(kwnames, 0) != name_args &&
         PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), name_args) != 0) ||
        (!PyTuple_CheckExact(args = a[1]) && !PyList_CheckExact(args)) ||
        !(rec = record_of(self, a[0], &pack, &hot)))
        return call_checked((PyObject *)self, name_set_params, a, nargs, kwnames);
    PyObject *call[] = {rec->exec_h, rec->node_h, hot, pack->address, pack->refs, args,
                        (PyObject *)pack, rec->exec_raw, a[0]};
    Py_INCREF(rec);
    PyObject *olds = call_held(set_args, call, 9);
    PyObject *out = !olds ? NULL : olds == Py_None ? olds
                  : PyList_CheckExact(olds) ? retire(rec, olds, 1) : olds;
    Py_DECREF(rec);
    return out;
}

/* _block: why launches are refused (block_launches), or None, kept as NULL so that a
 * launch tests one pointer. */
static PyObject *exec_get_block(exec_obj *self, void *closure)
{
    return Py_NewRef(self->block ? self->block : Py_None);
}

static int exec_set_block(exec_obj *self, PyObject *value, void *closure)
{
    Py_XSETREF(self->block, value == NULL || value == Py_None ? NULL : Py_NewRef(value));
    return 0;
}

#define FASTKW(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef exec_methods[] = {
    FASTKW("launch", exec_launch,
           "launch($self, stream=None)\n--\n\n"
           "Launch the graph on ``stream`` (``cuGraphLaunch``, i.e. ``cudaGraphLaunch``).\n\n"
           "Raises the first pending exception of one of this exec's host nodes, and\n"
           "``PyCudaGraphError(reason)`` while launches are blocked (``block_launches``).\n\n"
           "Parameters\n----------\nstream : Stream or stream-like, optional\n"
           "    ``None`` is the legacy default stream."),
    FASTKW("set_arg", exec_set_arg,
           "set_arg($self, node, index_or_name, value)\n--\n\n"
           "Change one argument of a kernel node (``cuGraphExecKernelNodeSetParams``).\n\n"
           "Only that argument's slot is rewritten; the exec's next launch uses it. A value\n"
           "that is refused leaves the exec's arguments as they were.\n\n"
           "Parameters\n----------\nnode : KernelNode\n"
           "    A node of the graph the exec was made from (or of its bodies), or its twin\n"
           "    in a graph given to :meth:`update`.\n"
           "index_or_name : int or str\n"
           "    The kernel parameter, by position or name (by position for a kernel node\n"
           "    read back from the driver).\n"
           "value\n    Converted and checked as the kernel's signature says."),
    FASTKW("set_params", exec_set_params,
           "set_params($self, node, /, **changes)\n--\n\n"
           "Change parameters of one node of the exec; fields not given keep their values.\n\n"
           "=============== ================================================== ========================================\n"
           "node            changes                                            raw call\n"
           "=============== ================================================== ========================================\n"
           "KernelNode      args (sequence or {index/name: v}), grid, block,    ``cuGraphExecKernelNodeSetParams``\n"
           "                shared_mem\n"
           "MemcpyNode      dst, src, nbytes                                   ``cudaGraphExecMemcpyNodeSetParams1D``\n"
           "MemsetNode      dst, value, count, element_size, height, pitch     ``cudaGraphExecMemsetNodeSetParams``\n"
           "HostNode        fn, args                                           ``cudaGraphExecHostNodeSetParams``\n"
           "ChildGraphNode  graph                                              ``cudaGraphExecChildGraphNodeSetParams``\n"
           "EventRecordNode event                                              ``cudaGraphExecEventRecordNodeSetEvent``\n"
           "EventWaitNode   event                                              ``cudaGraphExecEventWaitNodeSetEvent``\n"
           "=============== ================================================== ========================================\n\n"
           "``node`` may be in a conditional node's body, or be its twin in a graph given to\n"
           ":meth:`update`. External-semaphore nodes take ``semaphores`` and ``values``\n"
           "(``cudaGraphExecExternalSemaphoresSignalNodeSetParams``,\n"
           "``cudaGraphExecExternalSemaphoresWaitNodeSetParams``); batch memory-op nodes take\n"
           "``ops`` (``cuGraphExecBatchMemOpNodeSetParams``). A refused change leaves the exec\n"
           "as it was."),
    {NULL, NULL, 0, NULL}};

static PyGetSetDef exec_getset[] = {
    {"_block", (getter)exec_get_block, (setter)exec_set_block,
     "why launches are refused (block_launches), or None", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef exec_members[] = {
    {"_h", T_OBJECT_EX, offsetof(exec_obj, h), 0, "the exec handle (an int), None once closed"},
    {"_last_stream", T_OBJECT_EX, offsetof(exec_obj, last_stream), 0,
     "the stream object of the last launch"},
    {"_nodes", T_OBJECT_EX, offsetof(exec_obj, nodes), 0, "id(node) -> the exec's record"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject ExecBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.ExecBase",
    .tp_doc = "What an exec's launch and argument updates read (the handle, the last "
              "stream, the launch block, the records), and those calls; GraphExec extends it.",
    .tp_basicsize = sizeof(exec_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = exec_dealloc,
    .tp_traverse = exec_traverse,
    .tp_clear = exec_clear,
    .tp_methods = exec_methods,
    .tp_members = exec_members,
    .tp_getset = exec_getset,
};

/* ---- ExecNodeBase, ArgPackBase, LayoutBase: what the updates read of a record ------- */

static PyMemberDef record_members[] = {
    {"node", T_OBJECT_EX, offsetof(record_obj, node), 0, "the node of the exec's graph"},
    {"node_h", T_OBJECT_EX, offsetof(record_obj, node_h), 0, "its handle (an int)"},
    {"exec_raw", T_OBJECT_EX, offsetof(record_obj, exec_raw), 0, "the exec's raw handle"},
    {"exec_h", T_OBJECT_EX, offsetof(record_obj, exec_h), 0, "the exec's handle (an int)"},
    {"args", T_OBJECT_EX, offsetof(record_obj, args), 0,
     "the exec's own argument storage of a kernel node (an ArgPack, or argument bytes)"},
    {"retire", T_OBJECT_EX, offsetof(record_obj, retire), 0,
     "the exec's function for objects an update replaced"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject ExecNodeBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.ExecNodeBase",
    .tp_doc = "What an argument update reads of an exec's record of a node; ExecNode "
              "extends it.",
    .tp_basicsize = sizeof(record_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = record_dealloc,
    .tp_traverse = record_traverse,
    .tp_clear = record_clear,
    .tp_members = record_members,
};

static PyMemberDef pack_members[] = {
    {"layout", T_OBJECT_EX, offsetof(pack_obj, layout), 0, "the kernel's Layout"},
    {"buf", T_OBJECT_EX, offsetof(pack_obj, buf), 0, "the buffer"},
    {"address", T_OBJECT_EX, offsetof(pack_obj, address), 0,
     "address of the buffer: a CUDA_KERNEL_NODE_PARAMS_v2*"},
    {"refs", T_OBJECT_EX, offsetof(pack_obj, refs), 0,
     "the Python objects the arguments came from, kept alive with the pack"},
    {"kernel", T_OBJECT_EX, offsetof(pack_obj, kernel), 0, "the kernel"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject ArgPackBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.ArgPackBase",
    .tp_doc = "What a launch or an argument update reads of a packed kernel launch; ArgPack "
              "extends it.",
    .tp_basicsize = sizeof(pack_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = pack_dealloc,
    .tp_traverse = pack_traverse,
    .tp_clear = pack_clear,
    .tp_members = pack_members,
};

static PyMemberDef layout_members[] = {
    {"hot", T_OBJECT_EX, offsetof(layout_obj, hot), 0,
     "the compiled route's view: a Plan (plan, converters, names)"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject LayoutBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.LayoutBase",
    .tp_doc = "What an argument update reads of a kernel's argument layout; Layout extends it.",
    .tp_basicsize = sizeof(layout_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = layout_dealloc,
    .tp_traverse = layout_traverse,
    .tp_clear = layout_clear,
    .tp_members = layout_members,
};

/* The types ready and added to module m (and the names the methods call interned); -1
 * with an error set. */
int add_types(PyObject *m)
{
    struct { PyObject **at; const char *name; } names[] = {
        {&name_launch, "_launch_checked"}, {&name_set_arg, "_set_arg_checked"},
        {&name_set_params, "_set_params_checked"}, {&name_after, "_after_launch"},
        {&name_args, "args"}, {&name_stream, "stream"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!*names[i].at && !(*names[i].at = PyUnicode_InternFromString(names[i].name)))
            return -1;
    PyTypeObject *types[] = {&ExecBase_Type, &ExecNodeBase_Type, &ArgPackBase_Type,
                             &LayoutBase_Type};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyModule_AddType(m, types[i]) < 0)
            return -1;
    return 0;
}

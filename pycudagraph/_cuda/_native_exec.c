/* GraphExec.set_arg and GraphExec.set_params(node, args=...) as methods of the class in C:
 * the one-argument and every-argument updates of a kernel node without the Python frames of
 * the methods and of exec_set_arg / exec_set_args.
 *
 * exec_update_methods hands over the slots they read (by the offsets of member descriptors
 * of the classes they belong to, checked as every slot is): the exec's handle and record
 * dict, a record's node, handles, argument pack and retire function (ExecNode), a node's
 * removed mark and table (Node), a table's reason for being gone (NodeTable), a pack's
 * layout, address and refs (ArgPack) and a layout's plan (Layout.hot); the kernel-node class
 * set_params takes, the removed mark, and the Python methods themselves. A call does what
 * the Python method does for a node the exec already has a record of: the record found by
 * the node's identity, the node checked live, then set_arg / set_args (_native_calls.c,
 * which take their ctypes route for what they do not do themselves), then the replaced
 * objects handed to the record's retire. Anything else (keywords it does not take, a twin,
 * a node without a record yet, a removed node, a closed exec, bytes read back from the
 * driver, several devices) is the Python method's, called with the same arguments.
 */
#include "_native.h"

#include <string.h>

#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))

enum { E_H, E_NODES, R_NODE, R_NODE_H, R_EXEC_RAW, R_EXEC_H, R_ARGS, R_RETIRE, N_RAW, N_TABLE,
       T_DEAD, P_LAYOUT, P_ADDRESS, P_REFS, L_HOT, AT_COUNT };
enum { C_EXEC, C_RECORD, C_NODE, C_TABLE, C_PACK, C_LAYOUT, C_KERNEL_NODE, C_COUNT };

static struct {
    PyTypeObject *cls[C_COUNT];
    Py_ssize_t at[AT_COUNT];
    PyObject *removed, *set_arg_py, *set_params_py, *args_name;
} U;

/* Which class each slot belongs to. */
static const int OWNER[AT_COUNT] = {C_EXEC, C_EXEC, C_RECORD, C_RECORD, C_RECORD, C_RECORD,
                                    C_RECORD, C_RECORD, C_NODE, C_NODE, C_TABLE, C_PACK,
                                    C_PACK, C_PACK, C_LAYOUT};

/* The exec's record of node (borrowed) when the compiled update may use it, with *hot set
 * to its layout's plan; NULL (no error set) otherwise. */
static PyObject *record_of(PyObject *self, PyObject *node, PyObject **hot)
{
    if (!U.set_arg_py || !thread_ready || S.tracing || S.multi ||
        !PyObject_TypeCheck(self, U.cls[C_EXEC]))
        return NULL;
    PyObject *h = SLOT(self, U.at[E_H]), *nodes = SLOT(self, U.at[E_NODES]);
    if (!h || h == Py_None || !nodes || !PyDict_Check(nodes))
        return NULL;
    PyObject *key = PyLong_FromVoidPtr(node);
    PyObject *rec = key ? PyDict_GetItemWithError(nodes, key) : NULL;   /* an int key */
    Py_XDECREF(key);
    if (!rec) {
        PyErr_Clear();
        return NULL;
    }
    if (!Py_IS_TYPE(rec, U.cls[C_RECORD]) || SLOT(rec, U.at[R_NODE]) != node ||
        !PyObject_TypeCheck(node, U.cls[C_NODE]) || SLOT(node, U.at[N_RAW]) == U.removed)
        return NULL;
    PyObject *table = SLOT(node, U.at[N_TABLE]), *dead, *pack, *layout;
    if (!table || !Py_IS_TYPE(table, U.cls[C_TABLE]) || !(dead = SLOT(table, U.at[T_DEAD])) ||
        !PyUnicode_CheckExact(dead) || PyUnicode_GET_LENGTH(dead) != 0)
        return NULL;   /* its graph destroyed: the Python method raises the ClosedError */
    pack = SLOT(rec, U.at[R_ARGS]);
    if (!pack || !Py_IS_TYPE(pack, U.cls[C_PACK]) || !(layout = SLOT(pack, U.at[P_LAYOUT])) ||
        !Py_IS_TYPE(layout, U.cls[C_LAYOUT]) || !(*hot = SLOT(layout, U.at[L_HOT])))
        return NULL;
    for (int i = R_NODE; i <= R_RETIRE; i++)
        if (!SLOT(rec, U.at[i]))
            return NULL;
    if (!SLOT(pack, U.at[P_ADDRESS]) || !SLOT(pack, U.at[P_REFS]))
        return NULL;
    return rec;
}

/* rec.retire(old) for each replaced object (old: one object, or a list with Nones). */
static PyObject *retire(PyObject *rec, PyObject *old, int many)
{
    PyObject *fn = Py_NewRef(SLOT(rec, U.at[R_RETIRE]));
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
static PyObject *exec_set_arg(PyObject *self, PyObject *const *a, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *hot, *rec;
    if (kwnames || nargs != 3 || !(rec = record_of(self, a[0], &hot)))
        return call_method(U.set_arg_py, self, a, nargs, kwnames);
    PyObject *pack = SLOT(rec, U.at[R_ARGS]);
    PyObject *call[] = {SLOT(rec, U.at[R_EXEC_H]), SLOT(rec, U.at[R_NODE_H]), hot,
                        SLOT(pack, U.at[P_ADDRESS]), SLOT(pack, U.at[P_REFS]), a[1], a[2], pack,
                        SLOT(rec, U.at[R_EXEC_RAW]), a[0]};
    Py_INCREF(rec);   /* a converter could drop the exec's records meanwhile */
    PyObject *old = call_held(set_arg, call, 10);
    PyObject *out = !old ? NULL : old == Py_None ? old : retire(rec, old, 0);
    Py_DECREF(rec);
    return out;
}

/* exe.set_params(node, args=sequence) for a kernel node: cuGraphExecKernelNodeSetParams. */
static PyObject *exec_set_params(PyObject *self, PyObject *const *a, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    PyObject *hot, *rec, *args;
    if (nargs != 1 || !kwnames || PyTuple_GET_SIZE(kwnames) != 1 ||
        PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), U.args_name) != 0 ||
        !Py_IS_TYPE(a[0], U.cls[C_KERNEL_NODE]) ||
        (!PyTuple_CheckExact(args = a[1]) && !PyList_CheckExact(args)) ||
        !(rec = record_of(self, a[0], &hot)))
        return call_method(U.set_params_py, self, a, nargs, kwnames);
    PyObject *pack = SLOT(rec, U.at[R_ARGS]);
    PyObject *call[] = {SLOT(rec, U.at[R_EXEC_H]), SLOT(rec, U.at[R_NODE_H]), hot,
                        SLOT(pack, U.at[P_ADDRESS]), SLOT(pack, U.at[P_REFS]), args, pack,
                        SLOT(rec, U.at[R_EXEC_RAW]), a[0]};
    Py_INCREF(rec);
    PyObject *olds = call_held(set_args, call, 9);
    PyObject *out = !olds ? NULL : olds == Py_None ? olds
                  : PyList_CheckExact(olds) ? retire(rec, olds, 1) : olds;
    Py_DECREF(rec);
    return out;
}

static PyMethodDef set_arg_def = {"set_arg", (PyCFunction)(void (*)(void))exec_set_arg,
                                  METH_FASTCALL | METH_KEYWORDS, NULL};
static PyMethodDef set_params_def = {"set_params", (PyCFunction)(void (*)(void))exec_set_params,
                                     METH_FASTCALL | METH_KEYWORDS, NULL};

/* exec_update_methods(classes, slots, removed, set_arg, set_params, set_arg_doc,
 * set_params_doc) -> (set_arg, set_params) method descriptors. classes: (GraphExec,
 * ExecNode, Node, NodeTable, ArgPack, Layout, KernelNode); slots: the member descriptors in
 * the order of the enum above, each of its OWNER class or one of its bases. */
PyObject *exec_update_methods(PyObject *m, PyObject *args)
{
    PyObject *classes, *slots, *removed, *fa, *fp;
    const char *doc_a, *doc_p;
    if (!PyArg_ParseTuple(args, "O!O!OOOss", &PyTuple_Type, &classes, &PyTuple_Type, &slots,
                          &removed, &fa, &fp, &doc_a, &doc_p))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != C_COUNT || PyTuple_GET_SIZE(slots) != AT_COUNT) {
        PyErr_Format(PyExc_TypeError, "exec_update_methods: %d classes and %d slots expected",
                     C_COUNT, AT_COUNT);
        return NULL;
    }
    for (int c = 0; c < C_COUNT; c++)
        if (!PyType_Check(PyTuple_GET_ITEM(classes, c))) {
            PyErr_SetString(PyExc_TypeError, "exec_update_methods: classes expected");
            return NULL;
        }
    Py_ssize_t at[AT_COUNT];
    for (int i = 0; i < AT_COUNT; i++) {
        PyTypeObject *owner = (PyTypeObject *)PyTuple_GET_ITEM(classes, OWNER[i]);
        if ((at[i] = member_offset(owner, PyTuple_GET_ITEM(slots, i))) < 0)
            return NULL;
    }
    if (!PyCallable_Check(fa) || !PyCallable_Check(fp)) {
        PyErr_SetString(PyExc_TypeError, "exec_update_methods: the methods must be callable");
        return NULL;
    }
    if (method_doc(&set_arg_def, doc_a) || method_doc(&set_params_def, doc_p) ||
        (!U.args_name && !(U.args_name = PyUnicode_InternFromString("args"))))
        return NULL;
    for (int c = 0; c < C_COUNT; c++)
        Py_XSETREF(U.cls[c], (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(classes, c)));
    memcpy(U.at, at, sizeof at);
    Py_XSETREF(U.removed, Py_NewRef(removed));
    Py_XSETREF(U.set_arg_py, Py_NewRef(fa));
    Py_XSETREF(U.set_params_py, Py_NewRef(fp));
    PyObject *cls = PyTuple_GET_ITEM(classes, C_EXEC);
    PyObject *ma = PyDescr_NewMethod((PyTypeObject *)cls, &set_arg_def);
    PyObject *mp = ma ? PyDescr_NewMethod((PyTypeObject *)cls, &set_params_def) : NULL;
    PyObject *out = mp ? PyTuple_Pack(2, ma, mp) : NULL;
    Py_XDECREF(ma);
    Py_XDECREF(mp);
    return out;
}

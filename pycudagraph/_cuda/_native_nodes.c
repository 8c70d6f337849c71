/* add_node: a kernel node added, its pack and node objects made and registered in C; and
 * dep_handles, the judging of a node add's dependency list.
 *
 * Graph.add_kernel's common case is one call, add_node(table, deps, kernel, grid, block,
 * args, shared_mem), that does what KernelNode.build does without its Python frames: the
 * launch packed through the kernel's plan into a new bytearray, the ArgPack of that buffer
 * and the KernelNode made (object.__new__ and their slots set, what their Python makers
 * set), cuGraphAddKernelNode, then the node recorded in the graph's table (nodes[h] = node,
 * ledger.held[id(node)] = (node, pack)), exactly as NodeTable.register records it.
 *
 * What it reads and writes of objects whose types it checked are the base types' members
 * (a kernel's _hot: KernelBase; the new pack's fields: ArgPackBase) and slots, by name, of
 * member descriptors fast.py hands over (set_node_maker): the table (NodeTable), its
 * ledger (Ledger) and the new node (KernelNode). Anything else (a closed or destroyed graph, a ledger whose entries an exec
 * shares (the fallback copies them first: Ledger.writable), a kernel whose plan it lacks,
 * a value it does not convert, a dependency it does not judge, a trace, a new thread,
 * several devices, a refused call) is the fallback's (KernelNode.build), called with the
 * same arguments: it converts, checks, raises the clear error, or adds the node itself.
 */
#include "_native.h"

#include <stdlib.h>
#include <string.h>

#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))

/* Dependency lists, judged for both node adds (add_node here, add_kernel in
 * _native_calls.c). */

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

/* The slots add_node reads and writes of a table, a ledger and a new node, by name: the
 * names are this file's, looked up once in the {name: member descriptor} dicts fast.py
 * hands over (no order is shared). An ArgPack's fields and a kernel's plan are the base
 * types' struct members (ArgPackBase, KernelBase). */
static const char *const TABLE_SLOTS[] = {"h", "nodes", "closed", "dead", "ledger"};
static const char *const LEDGER_SLOTS[] = {"held", "shared"};
static const char *const NODE_SLOTS[] = {"_table", "_h", "_raw", "_pack"};
enum { T_H, T_NODES, T_CLOSED, T_DEAD, T_LEDGER, T_COUNT };
enum { L_HELD, L_SHARED, L_COUNT };
enum { N_TABLE, N_H, N_RAW, N_PACK, N_COUNT };

static struct {
    PyTypeObject *table, *ledger, *node, *pack;
    Py_ssize_t t[T_COUNT], l[L_COUNT], n[N_COUNT];
    PyObject *fallback, *record;
} M;

/* The offsets of the n slots names[] of cls, each looked up in descrs ({name: member
 * descriptor}), into out; -1 with an error set. */
static int offsets(PyTypeObject *cls, PyObject *descrs, const char *const *names, int n,
                   Py_ssize_t *out)
{
    if (!PyDict_Check(descrs)) {
        PyErr_Format(PyExc_TypeError, "set_node_maker: a dict of %s's slots was expected",
                     cls->tp_name);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = PyDict_GetItemString(descrs, names[i]);
        if (!d) {
            PyErr_Format(PyExc_TypeError, "set_node_maker: slot %s of %s was not given",
                         names[i], cls->tp_name);
            return -1;
        }
        if ((out[i] = member_offset(cls, d)) < 0)
            return -1;
    }
    return 0;
}

/* set_node_maker(table_cls, table_slots, ledger_cls, ledger_slots, node_cls, node_slots,
 *                pack_cls, fallback, record): the classes add_node reads and makes, the
 *                slots (dicts: name -> member descriptor) it reads and writes, its fallback,
 *                and record(table, node, pack). pack_cls extends ArgPackBase. */
PyObject *set_node_maker(PyObject *m, PyObject *args)
{
    PyTypeObject *tc, *lc, *nc, *pc;
    PyObject *td, *ld, *nd, *fb, *rec;
    if (!PyArg_ParseTuple(args, "O!OO!OO!OO!OO", &PyType_Type, &tc, &td, &PyType_Type, &lc,
                          &ld, &PyType_Type, &nc, &nd, &PyType_Type, &pc, &fb, &rec))
        return NULL;
    Py_ssize_t t[T_COUNT], l[L_COUNT], n[N_COUNT];
    if (offsets(tc, td, TABLE_SLOTS, T_COUNT, t) || offsets(lc, ld, LEDGER_SLOTS, L_COUNT, l) ||
        offsets(nc, nd, NODE_SLOTS, N_COUNT, n))
        return NULL;
    if (!PyType_IsSubtype(pc, &ArgPackBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "set_node_maker: the pack class must extend ArgPackBase");
        return NULL;
    }
    if (!PyCallable_Check(fb) || !PyCallable_Check(rec)) {
        PyErr_SetString(PyExc_TypeError, "set_node_maker: fallback and record must be callable");
        return NULL;
    }
    Py_XSETREF(M.table, (PyTypeObject *)Py_NewRef(tc));
    Py_XSETREF(M.ledger, (PyTypeObject *)Py_NewRef(lc));
    Py_XSETREF(M.node, (PyTypeObject *)Py_NewRef(nc));
    Py_XSETREF(M.pack, (PyTypeObject *)Py_NewRef(pc));
    memcpy(M.t, t, sizeof t);
    memcpy(M.l, l, sizeof l);
    memcpy(M.n, n, sizeof n);
    Py_XSETREF(M.fallback, Py_NewRef(fb));
    Py_XSETREF(M.record, Py_NewRef(rec));
    Py_RETURN_NONE;
}

/* An object of type t (object.__new__(t): no __init__), or NULL with an error set. */
static PyObject *bare_object(PyTypeObject *t)
{
    return t->tp_alloc(t, 0);
}

typedef struct {
    PyObject *table, *kernel, *layout, *node;
} make_ctx;

/* Whether set_node_maker ran: the pack class new_pack makes, and add_node's classes, slots
 * and fallback, are known. */
int pack_class_known(void)
{
    return M.pack != NULL;
}

/* The ArgPack of a buffer the compiled route packed (object.__new__ and the slots its
 * Python maker sets; refs: a new list of the arguments), or NULL with an error set. */
PyObject *new_pack(PyObject *layout, PyObject *kernel, PyObject *refs, PyObject *buf,
                   PyObject *addr)
{
    pack_obj *pack = (pack_obj *)bare_object(M.pack);
    if (!pack)
        return NULL;
    pack->layout = Py_NewRef(layout);
    pack->buf = Py_NewRef(buf);
    pack->address = Py_NewRef(addr);
    pack->refs = Py_NewRef(refs);
    pack->kernel = Py_NewRef(kernel);
    return (PyObject *)pack;
}

/* add_core's maker: the ArgPack of the new buffer and the node holding it (its handle is
 * set once the node exists); returns the pack, ctx->node the node. */
static PyObject *make_pack_and_node(void *ctx, PyObject *refs, PyObject *buf, PyObject *addr)
{
    make_ctx *c = ctx;
    PyObject *pack = new_pack(c->layout, c->kernel, refs, buf, addr);
    if (!pack)
        return NULL;
    c->node = bare_object(M.node);
    if (!c->node) {
        Py_DECREF(pack);
        return NULL;
    }
    SLOT(c->node, M.n[N_TABLE]) = Py_NewRef(c->table);
    SLOT(c->node, M.n[N_RAW]) = Py_NewRef(Py_None);
    SLOT(c->node, M.n[N_PACK]) = Py_NewRef(pack);
    return pack;
}

static PyObject *fallback(PyObject *const *a, Py_ssize_t nargs)
{
    if (!M.fallback) {
        PyErr_SetString(PyExc_RuntimeError, "pycudagraph._cuda._native.add_node: "
                        "set_node_maker was not called");
        return NULL;
    }
    return PyObject_Vectorcall(M.fallback, a, nargs, NULL);
}

/* add_node(table, deps, kernel, grid, block, args, shared_mem) -> the new KernelNode:
 * cuGraphAddKernelNode, as KernelNode.build(table, deps, kernel, grid, block, args,
 * shared_mem) does it. */
PyObject *add_node(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    PyObject *table = nargs == 7 ? a[0] : NULL, *kernel = nargs == 7 ? a[2] : NULL;
    if (!table || !M.table || !S.add_kernel || !ready() || S.multi ||
        !Py_IS_TYPE(table, M.table) || !PyObject_TypeCheck(kernel, &KernelBase_Type))
        return fallback(a, nargs);
    PyObject *closed = SLOT(table, M.t[T_CLOSED]), *dead = SLOT(table, M.t[T_DEAD]);
    PyObject *nodes = SLOT(table, M.t[T_NODES]), *ledger = SLOT(table, M.t[T_LEDGER]);
    PyObject *hot = ((kernel_obj *)kernel)->hot, *h = SLOT(table, M.t[T_H]), *held;
    const plan_head *p;
    void *graph_h;
    if (closed != Py_False || !dead || !PyUnicode_CheckExact(dead) ||
        PyUnicode_GET_LENGTH(dead) != 0 || !nodes || !PyDict_CheckExact(nodes) || !ledger ||
        !Py_IS_TYPE(ledger, M.ledger) || SLOT(ledger, M.l[L_SHARED]) != Py_False ||
        !(held = SLOT(ledger, M.l[L_HELD])) ||
        !PyDict_CheckExact(held) || !hot || !(p = hot_plan(hot)) ||
        !plan_layout(hot) || !h || as_ptr(h, &graph_h))
        return fallback(a, nargs);
    /* What is read from slots is held for the add: a converter (Python code), or another
     * thread while the GIL is released, could replace it. */
    PyObject *held_refs[] = {hot, nodes, ledger, held};
    for (int i = 0; i < 4; i++)
        Py_INCREF(held_refs[i]);
    make_ctx c = {table, kernel, PLAN(hot)->layout, NULL};
    PyObject *pack, *node = NULL;
    void *node_h;
    int st = add_core(p, hot, a[3], a[4], a[5], a[6], graph_h, a[1], nodes, make_pack_and_node,
                      &c, &pack, &node_h);
    if (st == ADD_DONE) {   /* the node exists: record it as NodeTable.register does */
        node = c.node;
        PyObject *key = PyLong_FromVoidPtr(node), *entry = PyTuple_Pack(2, node, pack);
        PyObject *hh = PyLong_FromVoidPtr(node_h);
        int bad = !key || !entry || !hh;
        if (!bad) {
            SLOT(node, M.n[N_H]) = Py_NewRef(hh);
            if (SLOT(table, M.t[T_NODES]) == nodes && SLOT(table, M.t[T_LEDGER]) == ledger &&
                SLOT(ledger, M.l[L_HELD]) == held && SLOT(ledger, M.l[L_SHARED]) == Py_False) {
                bad = PyDict_SetItem(nodes, hh, node) || PyDict_SetItem(held, key, entry);
            } else {   /* the table changed meanwhile: record it through Python */
                PyObject *r = PyObject_CallFunctionObjArgs(M.record, table, node, pack, NULL);
                bad = !r;
                Py_XDECREF(r);
            }
        }
        Py_XDECREF(hh);
        Py_XDECREF(key);
        Py_XDECREF(entry);
        Py_DECREF(pack);
        if (bad)
            Py_CLEAR(node);
    } else {
        Py_XDECREF(c.node);
    }
    for (int i = 0; i < 4; i++)
        Py_DECREF(held_refs[i]);
    if (st == ADD_DECLINED)
        return fallback(a, nargs);
    return node;   /* NULL with an error set: ADD_ERROR, or the record failed */
}

/* The add itself, shared by add_kernel (_native_calls.c) and add_node: the launch packed
 * into a new bytearray, make(ctx, refs, buf, address) called with it (refs: a new list of
 * the arguments) to make what the caller returns, then cuGraphAddKernelNode. What make
 * returned is in *made and the node's handle in *node_h on ADD_DONE; on ADD_DECLINED
 * nothing was added and no error is set (the route runs); on ADD_ERROR an error is set.
 * p: hot's plan (hot_plan), hot: a Plan; grid, block, args, shared_mem as
 * the calls name them. */
int add_core(const plan_head *p, PyObject *hot, PyObject *grid, PyObject *block,
             PyObject *args, PyObject *shm, void *graph_h, PyObject *deps_seq, PyObject *nodes,
             maker_fn make, void *ctx, PyObject **made, void **node_h)
{
    PyObject *buf = NULL, *addr = NULL, *refs = NULL;
    void *stack[STACK_DEPS], **deps = NULL;
    Py_ssize_t nd;
    int status = ADD_DECLINED;
    *made = NULL;
    /* the driver checks no launch limits when a node is added: they are checked here */
    if (!p || !graph_h || !fits(p, grid, block, shm) ||
        dep_handles(deps_seq, nodes, stack, &deps, &nd))
        return ADD_DECLINED;
    buf = PyByteArray_FromStringAndSize(NULL, p->size);
    if (!buf) {
        status = ADD_ERROR;
        goto done;
    }
    char *mem = PyByteArray_AS_STRING(buf);
    memset(mem, 0, p->size);
    if (fill(p, PLAN(hot)->converters, mem, grid, block, shm, args))
        goto done;
    /* What the caller returns is made before the node exists: nothing but the handle can
     * fail after. The refs are a new list of the arguments. */
    addr = PyLong_FromVoidPtr(mem);
    refs = addr ? PySequence_List(args) : NULL;
    *made = refs ? make(ctx, refs, buf, addr) : NULL;
    if (!*made) {
        status = ADD_ERROR;
        goto done;
    }
    CUresult rc;
    *node_h = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = S.add_kernel(node_h, graph_h, deps, (size_t)nd, mem);
    Py_END_ALLOW_THREADS
    if (rc) {   /* the route repeats it and raises the CudaError naming it */
        Py_CLEAR(*made);
        goto done;
    }
    status = ADD_DONE;
done:
    Py_XDECREF(refs);
    Py_XDECREF(addr);
    Py_XDECREF(buf);
    if (deps != stack && deps != NULL)
        PyMem_Free(deps);
    return status;
}

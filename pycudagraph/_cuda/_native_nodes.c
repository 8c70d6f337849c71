/* add_node: a kernel node added, its pack and node objects made and registered in C; and
 * record, NodeTable.register's bookkeeping (register_node).
 *
 * Graph.add_kernel's common case is one call, add_node(table, deps, kernel, grid, block,
 * args, shared_mem), that does what KernelNode.build does without its Python frames: the
 * launch packed through the kernel's plan into a new bytearray, the ArgPack of that buffer
 * and the KernelNode made (object.__new__ and their slots set, what their Python makers
 * set), cuGraphAddKernelNode, then the node recorded in the graph's table by record, the
 * one implementation of NodeTable.register's bookkeeping (register_node is that method on
 * the compiled route).
 *
 * What it reads and writes of objects whose types it checked are the base types' members
 * (a kernel's _hot: KernelBase; the new pack's fields: ArgPackBase) and slots, by name, of
 * member descriptors fast.py hands over (set_node_maker): the table (NodeTable), its
 * ledger (Ledger) and the new node (KernelNode). Anything else (a closed or destroyed graph,
 * a kernel whose plan it lacks,
 * a value it does not convert, a dependency it does not judge, a trace, a new thread,
 * several devices, a refused call) is the fallback's (KernelNode.build), called with the
 * same arguments: it converts, checks, raises the clear error, or adds the node itself.
 */
#include "_native.h"

#include <string.h>

#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))

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
    PyObject *fallback, *hold;
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
 *                pack_cls, fallback, hold): the classes add_node reads and makes, the
 *                slots (dicts: name -> member descriptor) it reads and writes, its fallback,
 *                and hold(ledger, key, *objs) (Ledger.hold: what record hands a replaced
 *                entry or a shared ledger to). pack_cls extends ArgPackBase. */
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
        PyErr_SetString(PyExc_TypeError, "set_node_maker: fallback and hold must be callable");
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
    Py_XSETREF(M.hold, Py_NewRef(rec));
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

/* NodeTable.register's bookkeeping, defined here once: for the node add below and, as
 * register_node, for every builder and NodeTable.register on this route. nodes[h] = node
 * and the ledger's held[id(node)] = entry; a ledger an exec shares, or an entry replaced
 * (a node's parameters set again), goes through the ledger's own hold (Ledger.hold: it
 * copies a shared dict and lets waiting frees retry). 0, or -1 with an error set. */
static int record(PyObject *table, PyObject *node, PyObject *h, PyObject *entry)
{
    PyObject *nodes = SLOT(table, M.t[T_NODES]), *ledger = SLOT(table, M.t[T_LEDGER]), *held;
    if (!nodes || !PyDict_CheckExact(nodes) || !ledger || !Py_IS_TYPE(ledger, M.ledger)) {
        PyErr_SetString(PyExc_TypeError, "NodeTable.register: the table's nodes or ledger "
                        "is not the kind its graph made");
        return -1;
    }
    PyObject *key = PyLong_FromVoidPtr(node);
    if (!key)
        return -1;
    Py_INCREF(nodes);
    Py_INCREF(ledger);
    int rc = PyDict_SetItem(nodes, h, node), fresh = 0;
    if (!rc && SLOT(ledger, M.l[L_SHARED]) == Py_False && (held = SLOT(ledger, M.l[L_HELD])) &&
        PyDict_CheckExact(held)) {
        fresh = !PyDict_GetItemWithError(held, key);   /* an int key: no Python code runs */
        rc = PyErr_Occurred() ? -1 : fresh ? PyDict_SetItem(held, key, entry) : 0;
    }
    if (!rc && !fresh) {   /* shared, or replacing an entry: the ledger's hold */
        Py_ssize_t n = PyTuple_GET_SIZE(entry);   /* hold(ledger, key, *entry) */
        PyObject *small[8], **all = n + 2 <= 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (n + 2));
        PyObject *r = NULL;
        if (all) {
            all[0] = ledger;
            all[1] = key;
            memcpy(all + 2, &PyTuple_GET_ITEM(entry, 0), sizeof(PyObject *) * n);
            r = PyObject_Vectorcall(M.hold, all, (size_t)(n + 2), NULL);
            if (all != small)
                PyMem_Free(all);
        } else {
            PyErr_NoMemory();
        }
        rc = r ? 0 : -1;
        Py_XDECREF(r);
    }
    Py_DECREF(key);
    Py_DECREF(nodes);
    Py_DECREF(ledger);
    return rc;
}

/* register_node(table, node, *keep) -> node: NodeTable.register on the compiled route
 * (record, with entry (node, *keep)); node's handle is int(node). */
PyObject *register_node(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "register_node(table, node, *keep)");
        return NULL;
    }
    if (!M.table || !PyObject_TypeCheck(a[0], M.table)) {
        PyErr_SetString(PyExc_TypeError, "register_node: a NodeTable (set_node_maker ran) "
                        "was expected");
        return NULL;
    }
    PyObject *entry = PyTuple_New(nargs - 1), *h = PyNumber_Long(a[1]);
    if (!entry || !h) {
        Py_XDECREF(entry);
        Py_XDECREF(h);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++)
        PyTuple_SET_ITEM(entry, i - 1, Py_NewRef(a[i]));
    int rc = record(a[0], a[1], h, entry);
    Py_DECREF(entry);
    Py_DECREF(h);
    return rc ? NULL : Py_NewRef(a[1]);
}

/* For the bulk add (_native_bulk.c), which calls these three and nothing else here.
 * table_open: whether a table is one add_node adds to now (its graph's handle and node
 * dict into *graph_h, *nodes; borrowed), 0, or -1 (no error set): the route declines. */
int table_open(PyObject *table, void **graph_h, PyObject **nodes)
{
    if (!M.table || !S.add_kernel || !ready() || S.multi || !Py_IS_TYPE(table, M.table))
        return -1;
    PyObject *closed = SLOT(table, M.t[T_CLOSED]), *dead = SLOT(table, M.t[T_DEAD]);
    PyObject *n = SLOT(table, M.t[T_NODES]), *h = SLOT(table, M.t[T_H]);
    if (closed != Py_False || !dead || !PyUnicode_CheckExact(dead) ||
        PyUnicode_GET_LENGTH(dead) != 0 || !n || !PyDict_CheckExact(n) || !h ||
        as_ptr(h, graph_h) || !*graph_h)
        return -1;
    *nodes = n;
    return 0;
}

/* A new pack of buf (refs, addr as new_pack takes them) and the node holding it, as
 * add_node makes them: the node (new), its pack in *pack (new); NULL with an error set. */
PyObject *pack_and_node(PyObject *table, PyObject *kernel, PyObject *layout, PyObject *refs,
                        PyObject *buf, PyObject *addr, PyObject **pack)
{
    make_ctx c = {table, kernel, layout, NULL};
    *pack = make_pack_and_node(&c, refs, buf, addr);
    return *pack ? c.node : NULL;
}

/* The node added as node_h: its handle set and recorded as add_node records it. 0, or -1
 * with an error set. */
int node_added(PyObject *table, PyObject *node, PyObject *pack, void *node_h)
{
    PyObject *hh = PyLong_FromVoidPtr(node_h);
    PyObject *entry = hh ? PyTuple_Pack(2, node, pack) : NULL;
    int rc = -1;
    if (entry) {
        SLOT(node, M.n[N_H]) = Py_NewRef(hh);
        rc = record(table, node, hh, entry);
    }
    Py_XDECREF(hh);
    Py_XDECREF(entry);
    return rc;
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
    PyObject *nodes = SLOT(table, M.t[T_NODES]), *hot = ((kernel_obj *)kernel)->hot;
    PyObject *h = SLOT(table, M.t[T_H]);
    const plan_head *p;
    void *graph_h;
    if (closed != Py_False || !dead || !PyUnicode_CheckExact(dead) ||
        PyUnicode_GET_LENGTH(dead) != 0 || !nodes || !PyDict_CheckExact(nodes) || !hot ||
        !(p = hot_plan(hot)) || !plan_layout(hot) || !h || as_ptr(h, &graph_h))
        return fallback(a, nargs);
    /* What is read from slots is held for the add: a converter (Python code), or another
     * thread while the GIL is released, could replace it. The node is recorded (record)
     * in what the table holds once it exists. */
    PyObject *held_refs[] = {hot, nodes};
    for (int i = 0; i < 2; i++)
        Py_INCREF(held_refs[i]);
    make_ctx c = {table, kernel, PLAN(hot)->layout, NULL};
    PyObject *pack, *node = NULL;
    void *node_h;
    int st = add_core(p, hot, a[3], a[4], a[5], a[6], graph_h, a[1], nodes, make_pack_and_node,
                      &c, &pack, &node_h);
    if (st == ADD_DONE) {   /* the node exists: record it as NodeTable.register does */
        node = c.node;
        PyObject *hh = PyLong_FromVoidPtr(node_h);
        PyObject *entry = hh ? PyTuple_Pack(2, node, pack) : NULL;
        if (hh)
            SLOT(node, M.n[N_H]) = Py_NewRef(hh);
        if (!entry || record(table, node, hh, entry))
            Py_CLEAR(node);
        Py_XDECREF(hh);
        Py_XDECREF(entry);
        Py_DECREF(pack);
    } else {
        Py_XDECREF(c.node);
    }
    for (int i = 0; i < 2; i++)
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

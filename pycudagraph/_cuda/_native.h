/* pycudagraph._cuda._native: the compiled route of the hot calls in pycudagraph/_cuda/fast.py.
 *
 * A plain CPython extension with no CUDA header and no link to libcuda: fast.py hands over
 * the driver entry points (cuGraphLaunch, cuLaunchKernel, cuGraphAddKernelNode_v2,
 * cuGraphExecKernelNodeSetParams_v2, cuGraphInstantiateWithFlags, cuGraphExecUpdate_v2) as
 * addresses it read from libcuda, so one build serves
 * CUDA 12.x and 13.x drivers and both cuda-bindings majors.
 *
 * The code takes ints, bytes and sequences only, and Plans: a plan (bytes fast.py builds:
 * where each argument goes and what C type it has) with the converters tuple, in a Plan
 * whose members it reads by name (_native_plan.c), argument values, handles.
 * What an exec's launch and updates read is the struct of the base types it owns
 * (_native_types.c: ExecBase, ExecNodeBase, ArgPackBase, LayoutBase), which GraphExec,
 * ExecNode, ArgPack and Layout extend. Of other objects it reads slots whose member
 * descriptors fast.py hands over, of objects whose types it checked: a DeviceBuffer's
 * address (set_pointer_slot), a graph node's handle, removed mark and table and a table's
 * reason for being gone (set_node_slots), a Stream's handle (set_stream_slot), the fields
 * of a node table, ledger, kernel and kernel node (set_node_maker).
 * By name it calls only a subclass's checked method of a call a base type's method hands
 * on, and a kernel class's _prepare_launch (the checked packing its route runs). The only objects of pycudagraph's it makes are a new kernel
 * node and its argument pack (add_node).
 *
 * Each call (launch_graph, launch_kernel, add_kernel, set_arg, set_args, graph_instantiate,
 * exec_update) makes the driver call itself when it can; otherwise (a value it does not
 * convert, a thread whose context fast.py has not made current yet, a trace being recorded,
 * several devices in use, a failed driver call) it calls fast.py's ctypes route for the
 * same call with the same arguments and returns what that returns. That route checks,
 * traces and raises the clear error.
 *
 * Files: _native_convert.c (values -> bytes, grid/block, plans), _native_calls.c (the hot
 * calls), _native_nodes.c (add_node: a kernel node with its pack and node objects made in
 * C; record, NodeTable.register's bookkeeping), _native_deps.c (dependency lists),
 * _native_types.c (the base types ExecBase, ExecNodeBase, ArgPackBase and LayoutBase, and
 * ExecBase's launch, set_arg and set_params), _native_method.c (the base types KernelBase
 * and GraphBase: Kernel.launch and Graph.add_kernel), _native_plan.c (Plan: a layout's or
 * kernel's plan, converters, names, layout), _native_lookup.c (slot offsets, readiness,
 * node liveness), _native_module.c (state, set-up, the module).
 */
#ifndef PCG_NATIVE_H
#define PCG_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int CUresult;
typedef CUresult (*graph_launch_fn)(void *exec, void *stream);
typedef CUresult (*launch_kernel_fn)(void *f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                     void *stream, void **params, void **extra);
typedef CUresult (*add_kernel_fn)(void **node, void *graph, void *const *deps, size_t n,
                                  const void *params);
typedef CUresult (*exec_set_fn)(void *exec, void *node, const void *params);
typedef CUresult (*instantiate_fn)(void **exec, void *graph, unsigned long long flags);
typedef CUresult (*exec_update_fn)(void *exec, void *graph, void *info);

/* CUDA_KERNEL_NODE_PARAMS_v2, as pycudagraph/_cuda/structs.py names it. */
typedef struct {
    uint64_t func;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem;
    uint32_t pad;
    uint64_t kernel_params;
    uint64_t extra;
    uint64_t kern;
    uint64_t ctx;
} kparams;

#define HEADER 72
#define STACK_PACK 4096
#define STACK_DEPS 64

/* A plan (fast.py's PLAN_HEAD + one PLAN_SLOT per parameter). */
typedef struct {
    uint64_t func;      /* the CUfunction launches and nodes name; 0 in a layout's plan */
    uint32_t block1;    /* the function's 1-D limits (0: not known): a node add, or a   */
    uint32_t grid1;     /* launch while a capture is open, goes only within them        */
    uint32_t smem;
    uint32_t n;         /* parameters */
    uint32_t size;      /* the whole pack: header, pointer array, argument slots */
    uint32_t simple;    /* every kind is one this code converts */
} plan_head;

typedef struct {
    uint32_t offset;    /* from the start of the pack */
    uint32_t kind;      /* K_* */
} plan_slot;

/* Parameter kinds (fast.py names the same codes). */
enum { K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64, K_F32, K_F64, K_BOOL, K_PTR,
       K_OTHER };
extern const int KIND_SIZE[K_OTHER + 1];

/* Which Python route each call falls back to (fast.py's order). */
enum { R_LAUNCH_GRAPH, R_LAUNCH_KERNEL, R_ADD_KERNEL, R_SET_ARG, R_SET_ARGS, R_INSTANTIATE,
       R_EXEC_UPDATE, R_COUNT };

/* What fast.py set: entry points, routes, and the state the calls depend on. */
typedef struct {
    /* What every launch, eager launch and update reads: the first 64 bytes, one cache line
     * (S is aligned to 64), so a call made right after the driver touched a lot of memory
     * fetches one line of this, not four. */
    int tracing;                /* a trace records: every call takes the ctypes route */
    int multi;                  /* several devices in use: launches and adds take it too */
    graph_launch_fn graph_launch;
    launch_kernel_fn launch_kernel;
    exec_set_fn exec_set;
    PyTypeObject *stream_type;  /* streams of this exact type keep their handle (an int;  */
    Py_ssize_t stream_slot;     /* None once closed) in the slot at this offset            */
    PyTypeObject *buffer_type;  /* objects of this exact type (DeviceBuffer) keep their    */
    Py_ssize_t buffer_slot;     /* device address in the slot at this offset (0: freed)     */
    /* The rest: adds, instantiate, update, capture, the ctypes routes. */
    PyObject *captures;         /* a list that is not empty while a capture is open */
    PyObject *keeps;            /* the open captures' keep lists (check.capture_keeps) */
    add_kernel_fn add_kernel;
    instantiate_fn instantiate;
    exec_update_fn exec_update;
    PyTypeObject *node_type;    /* graph nodes (Node and its subclasses) keep their handle */
    Py_ssize_t node_h_slot;     /* in one slot and REMOVED, once removed, in another:       */
    Py_ssize_t node_raw_slot;   /* what a dependency list is judged by                      */
    PyObject *removed;
    Py_ssize_t node_table_slot; /* a node's table, and the table's reason for being gone     */
    PyTypeObject *table_type;   /* ("" while valid): with the removed mark, what node_live   */
    Py_ssize_t table_dead_slot; /* reads                                                     */
    PyObject *host_errors;      /* host nodes' pending errors: a launch raises one after     */
    PyObject *route[R_COUNT];   /* fast.py's ctypes route of each call */
} native_state;

/* The base types (_native_types.c): their structs are what the hot calls read. */
typedef struct {
    PyObject_HEAD
    PyObject *h;             /* _h: the exec handle (an int), None once closed */
    PyObject *last_stream;   /* _last_stream */
    PyObject *block;         /* _block: why launches are refused; NULL while they are not */
    PyObject *nodes;         /* _nodes: id(node) -> record */
} exec_obj;

typedef struct {
    PyObject_HEAD
    PyObject *node, *node_h, *exec_raw, *exec_h, *args, *retire;
} record_obj;

typedef struct {
    PyObject_HEAD
    PyObject *layout, *buf, *address, *refs, *kernel;
} pack_obj;

typedef struct {
    PyObject_HEAD
    PyObject *hot;           /* a Plan with names */
} layout_obj;

/* Plan: the compiled route's view of a layout or a kernel, made once with named members
 * (keyword-only, read-only): plan (bytes: plan_head + plan_slot per parameter), converters
 * (a tuple, one per parameter), names (a layout's name -> index dict, or None) and layout
 * (a kernel's Layout, or None). */
typedef struct {
    PyObject_HEAD
    PyObject *plan, *converters, *names, *layout;
} plan_obj;
#define PLAN(o) ((plan_obj *)(o))

extern PyTypeObject ExecBase_Type, ExecNodeBase_Type, ArgPackBase_Type, LayoutBase_Type,
    Plan_Type;
int add_types(PyObject *m);

extern native_state S;
extern _Thread_local int thread_ready;

/* _native_convert.c: 0 done, -1 not converted here (no Python error set). fail(): clear
 * the error a Python call left, and -1. */
int fail(void);
int as_u64(PyObject *v, uint64_t *out);
int as_u32(PyObject *o, uint32_t *out);
int buffer_address(PyObject *v, uint64_t *out);
int stream_of(PyObject *s, void **out);
int as_ptr(PyObject *o, void **out);
int put(int kind, char *dst, PyObject *v, PyObject *converter);
int dims(PyObject *o, uint32_t out[3]);
const plan_head *plan_of(PyObject *plan);
int fits(const plan_head *p, PyObject *grid, PyObject *block, PyObject *shm);
int fill(const plan_head *p, PyObject *converters, char *buf, PyObject *grid, PyObject *block,
         PyObject *shm, PyObject *args);


/* _native_lookup.c: the offset of an object slot of cls (descr: its member descriptor), or
 * -1 with an error set. */
Py_ssize_t slot_offset(PyObject *cls, PyObject *descr);
/* The same for a slot of cls or of one of its bases. */
Py_ssize_t member_offset(PyTypeObject *cls, PyObject *descr);
/* Ready for a compiled call: this thread's context is current, no trace records. */
int ready(void);
/* Node.check_live's rule: not marked removed, its graph not destroyed (1), or 0. */
int node_live(PyObject *node);
/* self.<name>(*a, **kw): the subclass's checked method of a call (name interned). */
PyObject *call_checked(PyObject *self, PyObject *name, PyObject *const *a, Py_ssize_t nargs,
                       PyObject *kwnames);

/* _native_deps.c: a dependency list's handles, judged (-1: not judged here). */
int dep_handles(PyObject *deps, PyObject *nodes, void **stack, void ***out, Py_ssize_t *n);

/* _native_plan.c: the Plan type. The plan of hot if it is a Plan: its head, or NULL. */
const plan_head *hot_plan(PyObject *hot);
/* The Layout a kernel's Plan (hot_plan accepted it) names, or NULL. */
PyObject *plan_layout(PyObject *hot);
int add_plan_type(PyObject *m);

/* _native_nodes.c (add_core: the add shared with _native_calls.c's add_kernel) */
typedef PyObject *(*maker_fn)(void *ctx, PyObject *refs, PyObject *buf, PyObject *addr);
enum { ADD_DONE, ADD_DECLINED, ADD_ERROR };
int add_core(const plan_head *p, PyObject *hot, PyObject *grid, PyObject *block,
             PyObject *args, PyObject *shm, void *graph_h, PyObject *deps_seq, PyObject *nodes,
             maker_fn make, void *ctx, PyObject **made, void **node_h);
int pack_class_known(void);
PyObject *new_pack(PyObject *layout, PyObject *kernel, PyObject *refs, PyObject *buf,
                   PyObject *addr);
PyObject *set_node_maker(PyObject *m, PyObject *args);
PyObject *add_node(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *register_node(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
int table_open(PyObject *table, void **graph_h, PyObject **nodes);
PyObject *pack_and_node(PyObject *table, PyObject *kernel, PyObject *layout, PyObject *refs,
                        PyObject *buf, PyObject *addr, PyObject **pack);
int node_added(PyObject *table, PyObject *node, PyObject *pack, void *node_h);

/* _native_bulk.c: kernel nodes added from fixed records (a loaded graph file) */
PyObject *add_kernel_nodes(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *add_param_nodes(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *add_record_nodes(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *records_pass(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
/* Read-only C-contiguous buffers of n objects (_native_bulk.c): 0, or -1 with an error set
 * and none held; release_views lets the n go. */
int views(Py_buffer *b, PyObject *const *objs, int n);
void release_views(Py_buffer *b, int n);

/* _native_method.c: KernelBase (Kernel.launch) and GraphBase (Graph.add_kernel) */
typedef struct {
    PyObject_HEAD
    PyObject *hot;           /* _hot: (kernel plan, converters, layout) or None */
} kernel_obj;

typedef struct {
    PyObject_HEAD
    PyObject *table;         /* table: the graph's NodeTable */
} graph_obj;

extern PyTypeObject KernelBase_Type, GraphBase_Type;
int add_method_types(PyObject *m);

/* _native_calls.c: the routes, shared with _native_method.c */
PyObject *route(int r, PyObject *const *a, Py_ssize_t nargs);
typedef PyObject *(*native_fn)(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *call_held(native_fn fn, PyObject *const *a, Py_ssize_t nargs);

/* _native_calls.c */
int launch_core(PyObject *hot, PyObject *grid, PyObject *block, PyObject *args,
                PyObject *stream, PyObject *shm);
PyObject *launch_graph(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *launch_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *add_kernel(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *set_arg(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *set_args(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *exec_node_set_slots(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *graph_instantiate(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *exec_update(PyObject *m, PyObject *const *a, Py_ssize_t nargs);

#endif

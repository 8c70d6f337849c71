/* Plan: the compiled route's view of a kernel's arguments, with named members (no order of
 * items is shared with the Python side). A Layout's `hot` is a Plan with `names` (its
 * name -> index dict); a loaded Kernel's `_hot` is a Plan naming the CUfunction in its plan
 * bytes, with `layout` (the Layout the ArgPack a node add makes names). Made once, by
 * keyword (Plan(plan=..., converters=..., names=..., layout=...)), its members read-only:
 * the hot calls hold pointers into `plan` while converters (Python code) run, so nothing
 * may replace it. plans.py builds the bytes; hot_base.py's Plan is the pure-Python twin.
 */
#include "_native.h"

#include <stddef.h>
#include <structmember.h>   /* PyMemberDef (in descrobject.h from Python 3.12) */

/* Plan(*, plan: bytes, converters: tuple, names=None, layout=None); made once. */
static int plan_init(PyObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"plan", "converters", "names", "layout", NULL};
    PyObject *plan = NULL, *conv = NULL, *names = Py_None, *layout = Py_None;
    if (PLAN(o)->plan) {
        PyErr_SetString(PyExc_TypeError, "Plan: a plan is made once (its members are read-only)");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$O!O!OO:Plan", kwlist, &PyBytes_Type, &plan,
                                     &PyTuple_Type, &conv, &names, &layout))
        return -1;
    if (!plan || !conv || !PyBytes_CheckExact(plan) || !PyTuple_CheckExact(conv)) {
        PyErr_SetString(PyExc_TypeError, "Plan: plan= (bytes) and converters= (a tuple) are "
                        "required");
        return -1;
    }
    PLAN(o)->plan = Py_NewRef(plan);
    PLAN(o)->converters = Py_NewRef(conv);
    PLAN(o)->names = Py_NewRef(names);
    PLAN(o)->layout = Py_NewRef(layout);
    return 0;
}

static int plan_traverse(PyObject *o, visitproc visit, void *arg)
{
    Py_VISIT(PLAN(o)->plan);
    Py_VISIT(PLAN(o)->converters);
    Py_VISIT(PLAN(o)->names);
    Py_VISIT(PLAN(o)->layout);
    return 0;
}

/* What may close a cycle goes (the readers check converters and layout for NULL). */
static int plan_clear(PyObject *o)
{
    Py_CLEAR(PLAN(o)->layout);
    Py_CLEAR(PLAN(o)->converters);
    return 0;
}

static void plan_dealloc(PyObject *o)
{
    PyObject_GC_UnTrack(o);
    plan_clear(o);
    Py_CLEAR(PLAN(o)->names);
    Py_CLEAR(PLAN(o)->plan);
    Py_TYPE(o)->tp_free(o);
}

static PyMemberDef plan_members[] = {
    {"plan", T_OBJECT_EX, offsetof(plan_obj, plan), READONLY,
     "bytes: the head (function, its 1-D limits, count, pack size, simple) and (offset, kind) "
     "per parameter"},
    {"converters", T_OBJECT_EX, offsetof(plan_obj, converters), READONLY,
     "one per parameter: what the compiled route calls for a value (None: C converts it)"},
    {"names", T_OBJECT_EX, offsetof(plan_obj, names), READONLY,
     "a layout's parameter name -> index dict, or None"},
    {"layout", T_OBJECT_EX, offsetof(plan_obj, layout), READONLY,
     "a kernel's Layout (what a pack made in C names), or None"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject Plan_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pycudagraph._cuda._native.Plan",
    .tp_doc = "Plan(*, plan, converters, names=None, layout=None): the compiled route's view "
              "of a layout (names) or a kernel (layout); members read-only.",
    .tp_basicsize = sizeof(plan_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = plan_init,
    .tp_dealloc = plan_dealloc,
    .tp_traverse = plan_traverse,
    .tp_clear = plan_clear,
    .tp_members = plan_members,
};

/* The plan head of hot if it is a Plan (its members were checked when it was made and are
 * read-only), or NULL. */
const plan_head *hot_plan(PyObject *hot)
{
    if (!Py_IS_TYPE(hot, &Plan_Type) || !PLAN(hot)->plan || !PLAN(hot)->converters)
        return NULL;
    return plan_of(PLAN(hot)->plan);
}

/* The Layout of hot, a Plan hot_plan accepted, if it names one (a kernel's), else NULL. */
PyObject *plan_layout(PyObject *hot)
{
    PyObject *layout = PLAN(hot)->layout;
    return layout && PyObject_TypeCheck(layout, &LayoutBase_Type) ? layout : NULL;
}

/* The type ready and added to module m; -1 with an error set. */
int add_plan_type(PyObject *m)
{
    return PyModule_AddType(m, &Plan_Type);
}

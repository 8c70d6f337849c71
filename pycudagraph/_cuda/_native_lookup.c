/* Where every compiled part looks things up, and nothing else: the offset of a Python
 * object's slot (what fast.py hands over as member descriptors), whether this thread is
 * ready for a compiled call, whether a node
 * is live, and the call of a subclass's checked method (call_checked). It calls
 * into no other file of the extension, so the files that use it never call each other
 * through it. */
#include "_native.h"

#include <string.h>
#include <structmember.h>   /* PyMemberDef (in descrobject.h from Python 3.12) */

/* Python's member-type numbers, named in 3.12's headers only */
#ifndef Py_T_OBJECT
#define Py_T_OBJECT 6
#endif
#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX 16
#endif

/* The offset of the object slot that descriptor (cls.__dict__[name], a member descriptor
 * of cls itself) describes, or -1 with an error set. */
Py_ssize_t slot_offset(PyObject *cls, PyObject *descr)
{
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) || PyDescr_TYPE(descr) != (PyTypeObject *)cls) {
        PyErr_SetString(PyExc_TypeError, "a slot of the class was expected");
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if ((member->type != Py_T_OBJECT && member->type != Py_T_OBJECT_EX) ||
        member->offset < (Py_ssize_t)sizeof(PyObject) ||
        member->offset + (Py_ssize_t)sizeof(PyObject *) > ((PyTypeObject *)cls)->tp_basicsize) {
        PyErr_SetString(PyExc_ValueError, "the slot does not hold an object");
        return -1;
    }
    return member->offset;
}

/* The offset of the object slot descr describes, descr being a slot of cls or of one of
 * its bases; -1 with an error set. */
Py_ssize_t member_offset(PyTypeObject *cls, PyObject *descr)
{
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) || !PyType_IsSubtype(cls, PyDescr_TYPE(descr))) {
        PyErr_SetString(PyExc_TypeError, "a slot of the class or of a base was expected");
        return -1;
    }
    return slot_offset((PyObject *)PyDescr_TYPE(descr), descr);
}

/* Ready for a compiled call: this thread's context is current, no trace records. */
int ready(void)
{
    return thread_ready && !S.tracing;
}

#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))

/* Node.check_live's rule, the one reading of it here: a node (of the node type) not marked
 * removed whose table's reason for being gone is "" (1); 0 for anything else, a node
 * whose slots were not handed over included. */
int node_live(PyObject *node)
{
    PyObject *table, *dead;
    return S.node_type && S.table_type && PyObject_TypeCheck(node, S.node_type) &&
           SLOT(node, S.node_raw_slot) != S.removed &&
           (table = SLOT(node, S.node_table_slot)) != NULL && Py_IS_TYPE(table, S.table_type) &&
           (dead = SLOT(table, S.table_dead_slot)) != NULL && PyUnicode_CheckExact(dead) &&
           PyUnicode_GET_LENGTH(dead) == 0;
}

/* self.<name>(*a, **kw): a base type's method hands a call to the subclass's checked method
 * of the same call (name: interned), with the arguments it was given. */
PyObject *call_checked(PyObject *self, PyObject *name, PyObject *const *a, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **all = total < 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (total + 1));
    if (!all)
        return PyErr_NoMemory();
    all[0] = self;
    if (total)
        memcpy(all + 1, a, sizeof(PyObject *) * total);
    PyObject *out = PyObject_VectorcallMethod(name, all, (size_t)(nargs + 1), kwnames);
    if (all != small)
        PyMem_Free(all);
    return out;
}

/* Values -> bytes: the C twin of the Python slot writer (ArgPack.put in compile/args.py),
 * of the grid/block normaliser (dims3 there) and of whole-pack filling.
 *
 * Every function returns 0, or -1 with no Python error set: the value is not converted
 * here, and the caller takes fast.py's ctypes route, whose Python packing converts it or
 * raises the ArgumentError naming kernel, parameter and value. A value is converted here
 * only when the result is exactly what the Python packing writes.
 */
#include "_native.h"

#include <math.h>
#include <string.h>

const int KIND_SIZE[K_OTHER + 1] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 1, 8, 0};

int fail(void)
{
    PyErr_Clear();
    return -1;
}

/* The two 30-bit digits of a non-negative int in [2**30, 2**60) (device addresses and
 * driver handles: 2**40 to 2**48), read from CPython's layout of the versions built for:
 * 1 and *x set; else 0, and the caller converts it. */
static inline int two_digits(PyObject *v, long long *x)
{
#if PyLong_SHIFT == 30 && PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030F0000 && \
    defined(_PyLong_NON_SIZE_BITS) && defined(_PyLong_SIGN_MASK)
    const struct _PyLongValue *lv = &((PyLongObject *)v)->long_value;
    if (lv->lv_tag >> _PyLong_NON_SIZE_BITS != 2 || (lv->lv_tag & _PyLong_SIGN_MASK) != 0)
        return 0;
    *x = (long long)lv->ob_digit[0] | (long long)lv->ob_digit[1] << PyLong_SHIFT;
    return 1;
#elif PyLong_SHIFT == 30 && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (Py_SIZE(v) != 2)   /* 3.11: the digit count, negative for a negative int */
        return 0;
    const digit *d = ((PyLongObject *)v)->ob_digit;
    *x = (long long)d[0] | (long long)d[1] << PyLong_SHIFT;
    return 1;
#else
    (void)v;
    (void)x;
    return 0;
#endif
}

/* An int that fits a long long into *x: 0; -1 (no error set) when it does not. One
 * digit (Python 3.12+: a compact int) and two non-negative digits are read in line. */
static inline int small_int(PyObject *v, long long *x)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *x = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 0;
    }
#endif
    if (two_digits(v, x))
        return 0;
    int overflow;
    *x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (*x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return overflow ? -1 : 0;
}

/* An int in [0, 2**64) (what PyLong_AsUnsignedLongLong accepts). Below 2**63, the common
 * case (addresses, handles), through small_int, which reads the digits directly;
 * PyLong_AsUnsignedLongLong goes through a byte array for any int of more than one digit,
 * about a hundred instructions more per value. */
int as_u64(PyObject *v, uint64_t *out)
{
    if (!PyLong_Check(v))
        return -1;
    long long s;
    if (!small_int(v, &s)) {
        if (s < 0)
            return -1;   /* negative: refused, as PyLong_AsUnsignedLongLong refuses it */
        *out = (uint64_t)s;
        return 0;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);   /* 2**63 and up, or refused */
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return fail();
    *out = x;
    return 0;
}

int as_u32(PyObject *o, uint32_t *out)
{
    uint64_t x;
    if (!PyLong_CheckExact(o) || as_u64(o, &x) || x > UINT32_MAX)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

int as_ptr(PyObject *o, void **out)
{
    uint64_t x;
    if (!PyLong_CheckExact(o) || as_u64(o, &x))
        return -1;
    *out = (void *)(uintptr_t)x;
    return 0;
}

static int in_range(int kind, long long x)
{
    switch (kind) {
    case K_I8:  return x >= INT8_MIN && x <= INT8_MAX;
    case K_U8:  return x >= 0 && x <= UINT8_MAX;
    case K_I16: return x >= INT16_MIN && x <= INT16_MAX;
    case K_U16: return x >= 0 && x <= UINT16_MAX;
    case K_I32: return x >= INT32_MIN && x <= INT32_MAX;
    case K_U32: return x >= 0 && x <= UINT32_MAX;
    case K_I64: return 1;
    default:    return 0;
    }
}

static void store_int(int kind, char *dst, long long x)
{
    switch (kind) {
    case K_I8:  { int8_t y = (int8_t)x; memcpy(dst, &y, 1); break; }
    case K_U8:  { uint8_t y = (uint8_t)x; memcpy(dst, &y, 1); break; }
    case K_I16: { int16_t y = (int16_t)x; memcpy(dst, &y, 2); break; }
    case K_U16: { uint16_t y = (uint16_t)x; memcpy(dst, &y, 2); break; }
    case K_I32: { int32_t y = (int32_t)x; memcpy(dst, &y, 4); break; }
    case K_U32: { uint32_t y = (uint32_t)x; memcpy(dst, &y, 4); break; }
    default:    memcpy(dst, &x, 8);
    }
}

/* A double into a K_F32 or K_F64 slot, as struct packs it: -1 for a finite value too large
 * for a float ("float too large to pack with f format"). */
static inline int put_double(int kind, char *dst, double d)
{
    if (kind == K_F64) {
        memcpy(dst, &d, 8);
        return 0;
    }
    float f = (float)d;
    if (isinf(f) && !isinf(d))
        return -1;
    memcpy(dst, &f, 4);
    return 0;
}

/* An integer of kind K_I8..K_U64, as struct packs it (numpy integers through __index__). */
static int put_int(int kind, char *dst, PyObject *v)
{
    PyObject *idx = NULL;
    if (!PyLong_Check(v)) {
        if (PyFloat_Check(v) || !PyIndex_Check(v))
            return -1;
        idx = PyNumber_Index(v);
        if (!idx)
            return fail();
        v = idx;
    }
    int rc = -1;
    if (kind == K_U64) {
        uint64_t x;
        if (!as_u64(v, &x)) {
            memcpy(dst, &x, 8);
            rc = 0;
        }
    } else {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            fail();
        else if (!overflow && in_range(kind, x)) {
            store_int(kind, dst, x);
            rc = 0;
        }
    }
    Py_XDECREF(idx);
    return rc;
}

static int put_value(int kind, char *dst, PyObject *v)
{
    const char *t = Py_TYPE(v)->tp_name;   /* True/False (numpy's too): bool parameters only */
    if (kind != K_BOOL && (PyBool_Check(v) || !strncmp(t, "numpy.bool", 10)))
        return -1;
    switch (kind) {
    case K_F32:
    case K_F64: {
        double d = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred())
            return fail();
        return put_double(kind, dst, d);
    }
    case K_BOOL:
        if (v != Py_True && v != Py_False)
            return -1;
        *dst = v == Py_True;
        return 0;
    case K_PTR: {
        uint64_t x;
        if (as_u64(v, &x))
            return -1;
        memcpy(dst, &x, 8);
        return 0;
    }
    case K_OTHER:
        return -1;
    default:
        return put_int(kind, dst, v);
    }
}

/* The address of a DeviceBuffer (exactly that type, as fast.set_pointer_slot named it):
 * what device_pointer returns for it, read from its slot. 0 in the slot (a freed buffer)
 * or anything but an int there is left to the converter, which raises the ClosedError. */
int buffer_address(PyObject *v, uint64_t *out)
{
    if (!S.buffer_type || Py_TYPE(v) != S.buffer_type)
        return -1;
    PyObject *ptr = *(PyObject **)((char *)v + S.buffer_slot);
    if (!ptr || !PyLong_CheckExact(ptr) || as_u64(ptr, out) || !*out)
        return -1;
    return 0;
}

/* A stream's handle: None (the legacy default stream, 0), an int, or a Stream (exactly that
 * type, set_stream_slot) whose slot holds an int. Anything else, and a closed Stream (None
 * in its slot), goes to the route: its stream_handle converts it or raises. */
int stream_of(PyObject *s, void **out)
{
    if (s == Py_None) {
        *out = NULL;
        return 0;
    }
    if (S.stream_type && Py_TYPE(s) == S.stream_type) {
        s = *(PyObject **)((char *)s + S.stream_slot);
        if (!s)
            return -1;
    }
    return as_ptr(s, out);
}

/* One argument into its slot, through the slot's converter when it has one (a pointer
 * given as a plain int skips device_pointer, which returns it unchanged; so does a live
 * DeviceBuffer, whose address device_pointer reads from the same slot). The slot is written
 * only once the value is converted: on -1 it is unchanged. */
int put(int kind, char *dst, PyObject *v, PyObject *converter)
{
    char tmp[8];
    int rc;
    uint64_t addr;
    long long x;
    if (kind == K_OTHER)
        return -1;
    if (converter == Py_None) {   /* a plain float or int: what put_value does, in line */
        PyTypeObject *t = Py_TYPE(v);
        if (t == &PyFloat_Type && (kind == K_F32 || kind == K_F64))
            return put_double(kind, dst, PyFloat_AS_DOUBLE(v));
        if (t == &PyLong_Type && kind <= K_U64 && !small_int(v, &x) &&
            (kind == K_U64 ? x >= 0 : in_range(kind, x))) {
            store_int(kind, dst, x);
            return 0;
        }   /* anything else (out of range, past 63 bits): put_value decides */
    }
    /* put_value writes dst only when it converts the value: the common cases go there */
    if (kind == K_PTR) {
        if (converter == Py_None || PyLong_CheckExact(v))
            return put_value(K_PTR, dst, v);
        if (!buffer_address(v, &addr)) {
            memcpy(dst, &addr, 8);
            return 0;
        }
    } else if (converter == Py_None) {
        return put_value(kind, dst, v);
    }
    PyObject *r = PyObject_CallOneArg(converter, v);
    if (!r)
        return fail();
    rc = put_value(kind, tmp, r);
    Py_DECREF(r);
    if (!rc)
        memcpy(dst, tmp, KIND_SIZE[kind]);
    return rc;
}

static int one_dim(PyObject *v, uint32_t *out)
{
    uint64_t x;
    if (!PyLong_CheckExact(v) || as_u64(v, &x) || x == 0 || x > UINT32_MAX)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

/* grid / block, the twin of compile/args.py's dims3: an int, or a tuple or list of 1 to 3
 * ints, each in [1, 2**32). Other int types (numpy, bool, subclasses) are left to dims3. */
int dims(PyObject *o, uint32_t out[3])
{
    out[0] = out[1] = out[2] = 1;
    if (PyLong_CheckExact(o))
        return one_dim(o, &out[0]);
    if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o))
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n < 1 || n > 3)
        return -1;
    PyObject **items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < n; i++)
        if (one_dim(items[i], &out[i]))
            return -1;
    return 0;
}

/* The plan in a bytes object, or NULL when it is not one. */
const plan_head *plan_of(PyObject *plan)
{
    if (!PyBytes_CheckExact(plan) || PyBytes_GET_SIZE(plan) < (Py_ssize_t)sizeof(plan_head))
        return NULL;
    const plan_head *p = (const plan_head *)PyBytes_AS_STRING(plan);
    Py_ssize_t need = sizeof(plan_head) + (Py_ssize_t)p->n * sizeof(plan_slot);
    if (PyBytes_GET_SIZE(plan) != need || p->size < HEADER + 8 * (uint64_t)p->n)
        return NULL;
    return p;
}

/* An int, or a tuple or list of 1 to 3 ints whose second and third are 1: its first. */
static int flat_dim(PyObject *o, uint32_t *out)
{
    if (PyLong_CheckExact(o))
        return one_dim(o, out);
    if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o))
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject **items = PySequence_Fast_ITEMS(o);
    if (n < 1 || n > 3 || one_dim(items[0], out))
        return -1;
    for (Py_ssize_t i = 1; i < n; i++) {
        uint32_t v;
        if (one_dim(items[i], &v) || v != 1)
            return -1;
    }
    return 0;
}

/* A 1-D grid and block (an int, or (n, 1, 1)) and an int shared memory within the plan's
 * limits (known). */
int fits(const plan_head *p, PyObject *grid, PyObject *block, PyObject *shm)
{
    uint32_t g, b, s;
    return p->block1 && !flat_dim(grid, &g) && !flat_dim(block, &b) && !as_u32(shm, &s) &&
           b <= p->block1 && g <= p->grid1 && s <= p->smem;
}

/* A whole pack (header, pointer array, values) into buf; the twin of ArgPack's packing. */
int fill(const plan_head *p, PyObject *converters, char *buf, PyObject *grid, PyObject *block,
         PyObject *shm, PyObject *args)
{
    kparams *h = (kparams *)buf;
    Py_ssize_t n = p->n;
    if (!p->simple || !p->func || !PyTuple_CheckExact(converters) ||
        PyTuple_GET_SIZE(converters) != n || dims(grid, h->grid) || dims(block, h->block) ||
        as_u32(shm, &h->shared_mem))
        return -1;
    if ((!PyTuple_CheckExact(args) && !PyList_CheckExact(args)) ||
        PySequence_Fast_GET_SIZE(args) != n)
        return -1;
    /* A list is copied: a converter (a __cuda_array_interface__ property) could change it. */
    PyObject *seq = PyList_CheckExact(args) ? PyList_AsTuple(args) : Py_NewRef(args);
    if (!seq)
        return fail();
    PyObject **items = PySequence_Fast_ITEMS(seq);
    const plan_slot *slots = (const plan_slot *)(p + 1);
    h->func = p->func;
    h->pad = 0;
    h->kernel_params = (uint64_t)(uintptr_t)(buf + HEADER);
    h->extra = h->kern = h->ctx = 0;
    uint64_t *ptrs = (uint64_t *)(buf + HEADER);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && !rc; i++) {
        const plan_slot *s = &slots[i];
        if (s->kind >= K_OTHER || s->offset < HEADER + 8 * n ||
            s->offset + KIND_SIZE[s->kind] > p->size) {
            rc = -1;
            break;
        }
        char *slot = buf + s->offset;
        ptrs[i] = (uint64_t)(uintptr_t)slot;
        rc = put(s->kind, slot, items[i], PyTuple_GET_ITEM(converters, i));
    }
    Py_DECREF(seq);
    return rc;
}

/* The parents of intervals as one stack pass, in C: `collectors/readers/nesting.py`'s
 * `_pass_parents` without its table of running maxima (log2(n) arrays of n ends: ~0.9 GB and ~3 s
 * for the 4.9M NVTX ranges of a 1M-kernel PyTorch capture) and without a Python step per interval.
 *
 * `pass_parents(thr, st, en)`: three buffers of n int64 (native byte order), the intervals in pass
 * order (per thread, by start, the longer first). Returns the bytes of n int64: the position of
 * each one's parent, -1 for none. On each thread the pass pops the top of its stack while that
 * ends at or before the new start, takes what is left on top as the parent, and pushes the new
 * one: the parent is the last earlier interval of the thread still open at the start, whether the
 * intervals nest properly or not (nesting.py's docstring says why). O(n) time, one stack of n. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static int get_int64(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 8 || view->format == NULL || (view->format[0] != 'l' && view->format[0] != 'q')
        || view->format[1] != '\0') {
        PyErr_Format(PyExc_TypeError, "%s: an int64 buffer is needed", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *pass_parents(PyObject *self, PyObject *args) {
    PyObject *o_thr, *o_st, *o_en;
    Py_buffer b_thr, b_st, b_en;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &o_thr, &o_st, &o_en)) return NULL;
    if (get_int64(o_thr, &b_thr, "thr") < 0) return NULL;
    if (get_int64(o_st, &b_st, "st") < 0) {
        PyBuffer_Release(&b_thr);
        return NULL;
    }
    if (get_int64(o_en, &b_en, "en") < 0) {
        PyBuffer_Release(&b_thr);
        PyBuffer_Release(&b_st);
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t n = b_st.len / 8;
    if (b_thr.len / 8 != n || b_en.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "thr, st and en differ in length");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    int64_t *stack = n ? malloc((size_t)n * sizeof(int64_t)) : NULL;
    if (out == NULL || (n && stack == NULL)) {
        Py_CLEAR(out);
        free(stack);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    const int64_t *thr = b_thr.buf, *st = b_st.buf, *en = b_en.buf;
    int64_t *parent = (int64_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t top = 0; /* the stack's size */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || thr[i] != thr[i - 1]) top = 0; /* a new thread: its own stack */
        while (top > 0 && en[stack[top - 1]] <= st[i]) top--;
        parent[i] = top > 0 ? stack[top - 1] : -1;
        stack[top++] = i;
    }
    Py_END_ALLOW_THREADS
    free(stack);
done:
    PyBuffer_Release(&b_thr);
    PyBuffer_Release(&b_st);
    PyBuffer_Release(&b_en);
    return out;
}

static PyMethodDef METHODS[] = {
    {"pass_parents", pass_parents, METH_VARARGS,
     "pass_parents(thr, st, en) -> bytes of int64: each interval's parent position (-1: none), intervals in "
     "pass order (per thread, by start, the longer first); three int64 buffers of one length."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_nesting_fast",
                                    "Interval parents as one stack pass, in C (see nesting.py).", -1, METHODS};

PyMODINIT_FUNC PyInit__nesting_fast(void) { return PyModule_Create(&MODULE); }

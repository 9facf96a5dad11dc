/* Kineto event batches -> columns, in C: the typed fast path of _kineto_events without a Python
 * object per event.
 *
 * `decode(text)` reads one batch (the JSON array text that `Collector.add_text` gets) and returns,
 * for each wanted category present, its events as packed columns (times as doubles, ids as int64,
 * names, threads and shapes as small per-category tables of first appearances), or None when the
 * batch is not in the plain subset this decoder takes: anything the typed decoder would reject,
 * anything whose meaning the Python paths decide case by case (ids given as text or null, numbers
 * beyond int64, escaped keys, lone surrogates, deep nesting, syntax errors). A None sends the batch
 * down the Python paths, which then give their own result or error; so this file only ever has to
 * be right about batches it fully understands.
 *
 * Every read is bounds-checked against the end of the text; nothing here trusts the input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NULLV (-(((int64_t)1) << 62)) /* _kineto_events.NULL: unknown */
#define OK 0
#define BAIL 1   /* not the plain subset: the Python paths read this batch */
#define ERR (-1) /* a Python error is set (memory) */
#define MAX_DEPTH 256

/* ---- categories, in the order of the `cats` table (kinds of handling below) ---- */

enum { K_OP, K_RT, K_GPU, K_ANN, K_PY, K_GANN };
static struct {
    const char *name;
    int kind;
    Py_ssize_t len; /* strlen(name), set at import (`init_tables`) */
} CATS[] = {
    {"cpu_op", K_OP},       {"cuda_runtime", K_RT},       {"cuda_driver", K_RT}, {"Runtime", K_RT},
    {"kernel", K_GPU},      {"gpu_memcpy", K_GPU},        {"gpu_memset", K_GPU}, {"Kernel", K_GPU},
    {"user_annotation", K_ANN}, {"python_function", K_PY}, {"gpu_user_annotation", K_GANN},
};
#define NCATS ((int)(sizeof(CATS) / sizeof(CATS[0])))

/* the Chrome trace format's other phases (`_kineto_events.OTHER_PHASES`): skipped whole */
static const char *OTHER_PHASES[] = {"B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f",
                                     "P", "O", "N", "D", "M", "V", "v", "R", "c", "(", ")"};

/* ---- a value's text in the batch; n < 0: absent ---- */

typedef struct {
    const char *p;
    Py_ssize_t n;
} Span;

static const Span ABSENT = {NULL, -1};

static inline int span_is(Span s, const char *lit) {
    size_t n = strlen(lit);
    return s.n == (Py_ssize_t)n && memcmp(s.p, lit, n) == 0;
}

/* `span_is` against a table's entry, whose length is known (no strlen per event) */
static inline int span_is_n(Span s, const char *lit, Py_ssize_t n) {
    return s.n == n && memcmp(s.p, lit, (size_t)n) == 0;
}

/* ---- tables of distinct keys (up to 3 spans each), numbered in order of first appearance ---- */

typedef struct {
    uint64_t hash;
    Span key[3];
} Slot;

typedef struct {
    int nspans;
    Py_ssize_t n, cap; /* distinct keys; hash slots (a power of two) */
    int32_t *index;    /* slot -> key number, -1 empty */
    Slot *keys;        /* key number -> its spans */
    Py_ssize_t keys_cap;
} Table;

/* Only spreads keys over the slots (equal keys are found by `same_key`): eight bytes a step, a
 * kernel's name of a few hundred bytes being hashed for every launch. */
static uint64_t hash_spans(const Span *k, int nspans) {
    const uint64_t M = 0x9e3779b97f4a7c15ULL;
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < nspans; i++) {
        const char *p = k[i].p;
        Py_ssize_t n = k[i].n, j = 0;
        for (; j + 8 <= n; j += 8) {
            uint64_t w;
            memcpy(&w, p + j, 8);
            h = (h ^ w) * M;
            h ^= h >> 29;
        }
        if (j < n) { /* the last bytes: the final eight again where the key has eight (one load) */
            uint64_t w = 0;
            if (n >= 8) {
                memcpy(&w, p + n - 8, 8);
            } else {
                for (Py_ssize_t b = 0; b < n; b++) w |= (uint64_t)(unsigned char)p[b] << (8 * b);
            }
            h = (h ^ w) * M;
            h ^= h >> 29;
        }
        h = (h ^ (uint64_t)(n + 2)) * M; /* absent (-1) differs from empty (0) */
        h ^= h >> 32;
    }
    return h;
}

static int same_key(const Span *a, const Span *b, int nspans) {
    for (int i = 0; i < nspans; i++) {
        if (a[i].n != b[i].n) return 0;
        if (a[i].n > 0 && memcmp(a[i].p, b[i].p, (size_t)a[i].n) != 0) return 0;
    }
    return 1;
}

static int table_grow(Table *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
    int32_t *index = malloc((size_t)cap * sizeof(int32_t));
    if (!index) return ERR;
    memset(index, 0xff, (size_t)cap * sizeof(int32_t));
    for (Py_ssize_t k = 0; k < t->n; k++) {
        Py_ssize_t s = (Py_ssize_t)(t->keys[k].hash & (uint64_t)(cap - 1));
        while (index[s] >= 0) s = (s + 1) & (cap - 1);
        index[s] = (int32_t)k;
    }
    free(t->index);
    t->index = index;
    t->cap = cap;
    return OK;
}

/* The number of key `k` (added if new: *added = 1); -1 and a Python error on failure. */
static Py_ssize_t table_id(Table *t, const Span *k, int *added) {
    *added = 0;
    if (2 * (t->n + 1) > t->cap && table_grow(t) != OK) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t h = hash_spans(k, t->nspans);
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(t->cap - 1));
    while (t->index[s] >= 0) {
        Slot *e = &t->keys[t->index[s]];
        if (e->hash == h && same_key(e->key, k, t->nspans)) return t->index[s];
        s = (s + 1) & (t->cap - 1);
    }
    if (t->n == t->keys_cap) {
        Py_ssize_t cap = t->keys_cap ? t->keys_cap * 2 : 64;
        Slot *keys = realloc(t->keys, (size_t)cap * sizeof(Slot));
        if (!keys) {
            PyErr_NoMemory();
            return -1;
        }
        t->keys = keys;
        t->keys_cap = cap;
    }
    Slot *e = &t->keys[t->n];
    e->hash = h;
    for (int i = 0; i < t->nspans; i++) e->key[i] = k[i];
    t->index[s] = (int32_t)t->n;
    *added = 1;
    return t->n++;
}

static void table_free(Table *t) {
    free(t->index);
    free(t->keys);
    memset(t, 0, sizeof(*t));
}

/* ---- one category's columns ---- */

enum { C_EXT, C_CORR, C_DEV, C_STREAM, C_GX, C_GY, C_GZ, C_BX, C_BY, C_BZ, C_REGS, C_SMEM, C_BYTES, NINTS };
static const char *INT_FIELDS[NINTS] = {"ext", "corr", "device", "stream", "gx", "gy", "gz",
                                        "bx",  "by",   "bz",     "regs",   "smem", "nbytes"};

typedef struct {
    Py_ssize_t n, cap;
    double *ts, *dur;
    int32_t *name, *thread, *shape;
    int64_t *ints[NINTS];
    Table names, threads, shapes;
} Group;

static int group_reserve(Group *g) {
    if (g->n < g->cap) return OK;
    Py_ssize_t cap = g->cap ? g->cap * 2 : 1024;
#define GROW(field, type)                                                   \
    do {                                                                    \
        type *q = realloc(g->field, (size_t)cap * sizeof(type));            \
        if (!q) return ERR;                                                 \
        g->field = q;                                                       \
    } while (0)
    GROW(ts, double);
    GROW(dur, double);
    GROW(name, int32_t);
    GROW(thread, int32_t);
    GROW(shape, int32_t);
    for (int i = 0; i < NINTS; i++) GROW(ints[i], int64_t);
#undef GROW
    g->cap = cap;
    return OK;
}

static void group_free(Group *g) {
    free(g->ts);
    free(g->dur);
    free(g->name);
    free(g->thread);
    free(g->shape);
    for (int i = 0; i < NINTS; i++) free(g->ints[i]);
    table_free(&g->names);
    table_free(&g->threads);
    table_free(&g->shapes);
    memset(g, 0, sizeof(*g));
}

/* ---- the scanner: strict JSON (what msgspec accepts), checked against `end` ---- */

typedef struct {
    const char *p, *end;
} Scan;

/* Bytes that end a string's plain run (a quote, a backslash, a control character), and JSON's
 * whitespace: looked up, one load per byte instead of three or four comparisons. */
static unsigned char STOP[256], SPACE[256];

static void init_tables(void) {
    for (int c = 0; c < NCATS; c++) CATS[c].len = (Py_ssize_t)strlen(CATS[c].name);
    for (int c = 0; c < 0x20; c++) STOP[c] = 1;
    STOP['"'] = STOP['\\'] = 1;
    SPACE[' '] = SPACE['\n'] = SPACE['\r'] = SPACE['\t'] = 1;
}

static inline void ws(Scan *s) {
    while (s->p < s->end && SPACE[(unsigned char)*s->p]) s->p++;
}

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static uint32_t hex4(const char *p) {
    return (uint32_t)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

/* `\uXXXX` at p, within end */
static int is_hex4(const char *p, const char *end) {
    if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return 0;
    for (int i = 2; i < 6; i++)
        if (hexval(p[i]) < 0) return 0;
    return 1;
}

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define WORDWISE 1
/* The bytes of eight text bytes loaded as one word (the first byte lowest) that end a string's plain
 * run, each marked by its high bit: a byte equal to '"' or '\\', or below 0x20. Each test (is a
 * byte zero, is it below n) can wrongly mark a byte only above one it rightly marks, so the lowest
 * mark is always the first stop. */
static inline uint64_t stops_in(uint64_t w) {
    const uint64_t ONES = 0x0101010101010101ULL, HIGH = 0x8080808080808080ULL;
    uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
    return (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w)) & HIGH;
}
#endif

/* Past the plain run at p: at its stop byte, or at `end`. */
static inline const char *plain_run(const char *p, const char *end) {
#ifdef WORDWISE
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t m = stops_in(w);
        if (m) return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    while (p < end && !STOP[(unsigned char)*p]) p++;
    return p;
}

/* At a '"': past the closing quote. *escaped: whether a backslash occurs. */
static int skip_string(Scan *s, int *escaped) {
    const char *p = s->p + 1, *end = s->end;
    *escaped = 0;
    while (p < end) {
        p = plain_run(p, end);
        if (p >= end) break;
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            s->p = p + 1;
            return OK;
        }
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= end) return BAIL;
            char e = p[1];
            if (e == 'u') {
                /* a surrogate only as a pair, anywhere in the batch: msgspec rejects the batch otherwise */
                if (!is_hex4(p, end)) return BAIL;
                uint32_t cp = hex4(p + 2);
                p += 6;
                if (cp >= 0xdc00 && cp <= 0xdfff) return BAIL;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    if (!is_hex4(p, end) || p[1] != 'u') return BAIL;
                    uint32_t lo = hex4(p + 2);
                    if (lo < 0xdc00 || lo > 0xdfff) return BAIL;
                    p += 6;
                }
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                p += 2;
            } else {
                return BAIL;
            }
            continue;
        }
        return BAIL; /* a control character */
    }
    return BAIL;
}

/* A number by JSON's grammar. */
static int skip_number(Scan *s) {
    const char *p = s->p, *end = s->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return BAIL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return BAIL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return BAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return BAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    s->p = p;
    return OK;
}

static int literal(Scan *s, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0) return BAIL;
    s->p += n;
    return OK;
}

/* A member's key in an object and its ':'. `plain`: no escapes (the members read, where an
 * escaped key could spell a known one; skipped members may have any key). */
static int read_key(Scan *s, Span *k, int plain) {
    int esc;
    ws(s);
    if (s->p >= s->end || *s->p != '"') return BAIL;
    const char *k0 = s->p;
    if (skip_string(s, &esc) != OK || (plain && esc)) return BAIL;
    k->p = k0 + 1;
    k->n = s->p - k0 - 2;
    ws(s);
    if (s->p >= s->end || *s->p != ':') return BAIL;
    s->p++;
    return OK;
}

/* After a member or element: past a ',' (CONTINUE) or the closing `close` (OK); else BAIL.
   `close` AT_END: the end of the text closes (an array's body read alone, `read_body`). */
#define CONTINUE 2
#define AT_END '\0'
static int after_item(Scan *s, char close) {
    ws(s);
    if (s->p >= s->end) return close == AT_END ? OK : BAIL;
    if (close == AT_END && *s->p != ',') return BAIL; /* (a NUL byte is no closing bracket) */
    if (*s->p == ',') {
        s->p++;
        return CONTINUE;
    }
    if (*s->p == close) {
        s->p++;
        return OK;
    }
    return BAIL;
}

/* At an opening bracket: past it, and past `close` too when the container is empty (OK); else
 * CONTINUE, at the first item. */
static int opened(Scan *s, char close) {
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return OK;
    }
    return CONTINUE;
}

static int skip_value(Scan *s, int depth);

static int skip_container(Scan *s, int depth, char close, int keyed) {
    if (depth > MAX_DEPTH) return BAIL;
    if (opened(s, close) == OK) return OK;
    for (;;) {
        Span k;
        int r;
        if (keyed && read_key(s, &k, 0) != OK) return BAIL;
        ws(s);
        if (skip_value(s, depth + 1) != OK || (r = after_item(s, close)) == BAIL) return BAIL;
        if (r == OK) return OK;
    }
}

/* At a value's first character (whitespace skipped): past its end. */
static int skip_value(Scan *s, int depth) {
    int flag;
    if (s->p >= s->end) return BAIL;
    switch (*s->p) {
    case '"': return skip_string(s, &flag);
    case '{': return skip_container(s, depth, '}', 1);
    case '[': return skip_container(s, depth, ']', 0);
    case 't': return literal(s, "true");
    case 'f': return literal(s, "false");
    case 'n': return literal(s, "null");
    default: return skip_number(s);
    }
}

/* A value's span (whitespace before it skipped). */
static int value_span(Scan *s, Span *out, int depth) {
    ws(s);
    const char *start = s->p;
    if (skip_value(s, depth) != OK) return BAIL;
    out->p = start;
    out->n = s->p - start;
    return OK;
}

/* ---- typed reads of a span ---- */

static int is_string(Span v) { return v.n >= 2 && v.p[0] == '"'; }
static int is_null(Span v) { return span_is(v, "null"); }
static int is_number(Span v) { return v.n > 0 && (v.p[0] == '-' || (v.p[0] >= '0' && v.p[0] <= '9')); }

/* A JSON integer's text -> int64; BAIL when it does not fit. */
static int int64_of(Span v, int64_t *out) {
    /* an absent field is {NULL, -1}: checked before any pointer arithmetic (NULL - 1 is undefined) */
    if (v.n <= 0 || v.p == NULL) return BAIL;
    const char *p = v.p, *end = v.p + v.n;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end) return BAIL;
    uint64_t acc = 0;
    if (end - p <= 18) { /* (18 digits never overflow: no check per digit) */
        for (; p < end; p++) {
            uint64_t d = (uint64_t)(unsigned char)*p - '0';
            if (d > 9) return BAIL; /* a fraction, an exponent, text, a literal */
            acc = acc * 10 + d;
        }
    } else {
        uint64_t limit = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
        for (; p < end; p++) {
            uint64_t d = (uint64_t)(unsigned char)*p - '0';
            if (d > 9 || acc > (limit - d) / 10) return BAIL;
            acc = acc * 10 + d;
        }
    }
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return OK;
}

/* A decimal without exponent whose digits fit in 2**53 and whose fraction has at most 22 digits:
 * both the digits and the power of ten are exact doubles, so one division rounds correctly, as
 * strtod would (Clinger's fast path). 0: not such a number. */
static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int exact_decimal(Span v, double *out) {
    if (v.n <= 0 || v.p == NULL) return 0;
    const char *p = v.p, *end = v.p + v.n;
    int neg = 0, frac = -1;
    uint64_t m = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    for (; p < end; p++) {
        if (*p == '.') {
            if (frac >= 0) return 0;
            frac = 0;
            continue;
        }
        if (*p < '0' || *p > '9') return 0; /* an exponent */
        m = m * 10 + (uint64_t)(*p - '0');
        if (m > ((uint64_t)1 << 53)) return 0;
        if (frac >= 0 && ++frac > 22) return 0;
    }
    double d = frac > 0 ? (double)m / POW10[frac] : (double)m;
    *out = neg ? -d : d;
    return 1;
}

/* msgspec's `float | None` field: a number (an integer too) or null -> NaN; absent -> `dflt`. */
static int double_of(Span v, double dflt, double *out) {
    char buf[64];
    if (v.n < 0) {
        *out = dflt;
        return OK;
    }
    if (is_null(v)) {
        *out = NAN;
        return OK;
    }
    if (!is_number(v)) return BAIL;
    if (exact_decimal(v, out)) return OK;
    if (v.n >= (Py_ssize_t)sizeof(buf)) return BAIL;
    memcpy(buf, v.p, (size_t)v.n);
    buf[v.n] = 0;
    char *stop;
    double d = strtod(buf, &stop);
    if (stop != buf + v.n || !isfinite(d)) return BAIL;
    *out = d;
    return OK;
}

/* An id field (`IntLike` in _kineto_events): absent -> NULLV, an int64 as it is; anything else
 * (text, null, a fraction) is left to the Python paths. */
static int id_of(Span v, int64_t *out) {
    if (v.n < 0) {
        *out = NULLV;
        return OK;
    }
    return int64_of(v, out);
}

/* `int | str | None`: a process or thread id. */
static int is_int_str_none(Span v) {
    int64_t x;
    return v.n < 0 || is_null(v) || is_string(v) || int64_of(v, &x) == OK;
}

/* ---- Python values of spans (only for a table's new keys) ---- */

static void put_utf8(char **q, uint32_t cp) {
    char *o = *q;
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xc0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    *q = o;
}


/* A JSON string's span (quotes included, validated by skip_string) -> str. NULL with *bail set
 * (no error) for a lone surrogate; NULL with an error set on failure. */
static PyObject *str_of(Span v, int *bail) {
    const char *p = v.p + 1, *end = v.p + v.n - 1;
    if (!memchr(p, '\\', (size_t)(end - p))) return PyUnicode_DecodeUTF8(p, end - p, "strict");
    char *buf = malloc((size_t)(end - p) + 4), *q = buf; /* escapes never lengthen the UTF-8 */
    if (!buf) return PyErr_NoMemory();
    while (p < end) {
        if (*p != '\\') {
            *q++ = *p++;
            continue;
        }
        char e = p[1];
        if (e != 'u') {
            *q++ = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            p += 2;
            continue;
        }
        uint32_t cp = hex4(p + 2);
        p += 6;
        if (cp >= 0xd800 && cp <= 0xdbff && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            uint32_t lo = hex4(p + 2);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            }
        }
        if (cp >= 0xd800 && cp <= 0xdfff) { /* lone: the Python paths decide what it becomes */
            free(buf);
            *bail = 1;
            return NULL;
        }
        put_utf8(&q, cp);
    }
    PyObject *out = PyUnicode_DecodeUTF8(buf, q - buf, "strict");
    free(buf);
    return out;
}

/* `int | str | None` as Python: absent and null -> None. */
static PyObject *id_value(Span v, int *bail) {
    int64_t x;
    if (v.n < 0 || is_null(v)) Py_RETURN_NONE;
    if (is_string(v)) return str_of(v, bail);
    if (int64_of(v, &x) != OK) {
        *bail = 1;
        return NULL;
    }
    return PyLong_FromLongLong(x);
}

/* ---- one event ---- */

typedef struct {
    Span ph, cat, name, pid, tid, ts, dur;
    int has_args;
    Span ext, corr, device, stream, regs, smem, nbytes, dims, types, concrete;
    int64_t grid[3], block[3];
} Event;

/* A key's text (no escapes: an escaped key could spell a known one) compared with `lit`. */
#define KEY_IS(k, lit) ((k).n == (Py_ssize_t)(sizeof(lit) - 1) && memcmp((k).p, lit, sizeof(lit) - 1) == 0)

static int take(Span *slot, Scan *s, int depth) {
    if (slot->n >= 0) return BAIL; /* a repeated field: which one wins is the typed decoder's business */
    return value_span(s, slot, depth);
}

/* A launch size: [x, y, z] of int64 -> the three; another value -> unknown (NULLV). */
static int launch_dims(Scan *s, int64_t out[3], int depth, int *seen) {
    if (*seen) return BAIL;
    *seen = 1;
    out[0] = out[1] = out[2] = NULLV;
    ws(s);
    if (s->p >= s->end || *s->p != '[') return skip_value(s, depth);
    /* count the elements: three numbers, each an int64, else not a launch size (or not plain) */
    Span items[4];
    int n = 0;
    if (opened(s, ']') == OK) return OK;
    for (;;) {
        Span v;
        if (value_span(s, &v, depth + 1) != OK) return BAIL;
        if (n < 4) items[n] = v;
        n++;
        int r = after_item(s, ']');
        if (r == BAIL) return BAIL;
        if (r == OK) break;
    }
    if (n != 3) return OK;
    for (int i = 0; i < 3; i++)
        if (int64_of(items[i], &out[i]) != OK) return BAIL;
    return OK;
}

static int parse_args(Scan *s, Event *e, int depth) {
    int grid_seen = 0, block_seen = 0;
    if (opened(s, '}') == OK) return OK;
    for (;;) {
        Span k;
        int r;
        if (read_key(s, &k, 1) != OK) return BAIL;
        if (KEY_IS(k, "External id")) r = take(&e->ext, s, depth);
        else if (KEY_IS(k, "correlation")) r = take(&e->corr, s, depth);
        else if (KEY_IS(k, "device")) r = take(&e->device, s, depth);
        else if (KEY_IS(k, "stream")) r = take(&e->stream, s, depth);
        else if (KEY_IS(k, "registers per thread")) r = take(&e->regs, s, depth);
        else if (KEY_IS(k, "shared memory")) r = take(&e->smem, s, depth);
        else if (KEY_IS(k, "bytes")) r = take(&e->nbytes, s, depth);
        else if (KEY_IS(k, "Input Dims")) r = take(&e->dims, s, depth);
        else if (KEY_IS(k, "Input type")) r = take(&e->types, s, depth);
        else if (KEY_IS(k, "Concrete Inputs")) r = take(&e->concrete, s, depth);
        else if (KEY_IS(k, "grid")) r = launch_dims(s, e->grid, depth, &grid_seen);
        else if (KEY_IS(k, "block")) r = launch_dims(s, e->block, depth, &block_seen);
        else {
            ws(s);
            r = skip_value(s, depth);
        }
        if (r != OK || (r = after_item(s, '}')) == BAIL) return BAIL;
        if (r == OK) return OK;
    }
}

static int parse_event(Scan *s, Event *e) {
    Span none = ABSENT;
    e->ph = e->cat = e->name = e->pid = e->tid = e->ts = e->dur = none;
    e->ext = e->corr = e->device = e->stream = e->regs = e->smem = e->nbytes = none;
    e->dims = e->types = e->concrete = none;
    e->has_args = 0;
    for (int i = 0; i < 3; i++) e->grid[i] = e->block[i] = NULLV;
    if (s->p >= s->end || *s->p != '{') return BAIL;
    if (opened(s, '}') == OK) return OK;
    for (;;) {
        Span k;
        int r;
        if (read_key(s, &k, 1) != OK) return BAIL;
        if (KEY_IS(k, "ph")) r = take(&e->ph, s, 1);
        else if (KEY_IS(k, "cat")) r = take(&e->cat, s, 1);
        else if (KEY_IS(k, "name")) r = take(&e->name, s, 1);
        else if (KEY_IS(k, "pid")) r = take(&e->pid, s, 1);
        else if (KEY_IS(k, "tid")) r = take(&e->tid, s, 1);
        else if (KEY_IS(k, "ts")) r = take(&e->ts, s, 1);
        else if (KEY_IS(k, "dur")) r = take(&e->dur, s, 1);
        else if (KEY_IS(k, "args")) {
            if (e->has_args) return BAIL;
            e->has_args = 1;
            ws(s);
            if (s->p < s->end && *s->p == '{') r = parse_args(s, e, 2);
            else if (s->p < s->end && *s->p == 'n') r = literal(s, "null");
            else r = BAIL; /* args of another type: the typed decoder rejects the batch */
        } else {
            ws(s);
            r = skip_value(s, 1);
        }
        if (r != OK || (r = after_item(s, '}')) == BAIL) return BAIL;
        if (r == OK) return OK;
    }
}

/* ---- the batch ---- */

typedef struct {
    Group g[NCATS];
    PyObject *names[NCATS], *threads[NCATS], *shapes[NCATS]; /* lists of the tables' Python values */
} Batch;

/* A table id for key `k`, appending the key's Python value (`make`) to `list` when it is new. */
static int intern(Table *t, PyObject *list, const Span *k, PyObject *(*make)(const Span *, int *),
                  int32_t *out) {
    int added, bail = 0;
    Py_ssize_t id = table_id(t, k, &added);
    if (id < 0) return ERR;
    if (added) {
        PyObject *v = make(k, &bail);
        if (!v) return bail ? BAIL : ERR;
        int r = PyList_Append(list, v);
        Py_DECREF(v);
        if (r < 0) return ERR;
    }
    *out = (int32_t)id;
    return OK;
}

static PyObject *make_name(const Span *k, int *bail) {
    if (k[0].n < 0 || is_null(k[0])) Py_RETURN_NONE;
    return str_of(k[0], bail);
}

static PyObject *make_thread(const Span *k, int *bail) {
    PyObject *pid = id_value(k[0], bail);
    if (!pid) return NULL;
    PyObject *tid = id_value(k[1], bail);
    if (!tid) {
        Py_DECREF(pid);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, pid, tid);
    Py_DECREF(pid);
    Py_DECREF(tid);
    return out;
}

/* `dims \0 types \0 concrete` as they are in the text, the typed path's shape key */
static PyObject *make_shape(const Span *k, int *bail) {
    (void)bail;
    Py_ssize_t n = 2;
    for (int i = 0; i < 3; i++) n += k[i].n > 0 ? k[i].n : 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (!out) return NULL;
    char *q = PyBytes_AS_STRING(out);
    for (int i = 0; i < 3; i++) {
        if (i) *q++ = 0;
        if (k[i].n > 0) {
            memcpy(q, k[i].p, (size_t)k[i].n);
            q += k[i].n;
        }
    }
    return out;
}

static int add_event(Batch *b, const Event *e) {
    int c, r;
    /* the phase: "X" is read, the others skipped; none or another is not the plain subset */
    if (!is_string(e->ph) || memchr(e->ph.p, '\\', (size_t)e->ph.n)) return BAIL;
    Span ph = {e->ph.p + 1, e->ph.n - 2};
    if (!span_is(ph, "X")) {
        for (size_t i = 0; i < sizeof(OTHER_PHASES) / sizeof(OTHER_PHASES[0]); i++)
            if (span_is(ph, OTHER_PHASES[i])) return OK;
        return BAIL;
    }
    /* the typed decoder's checks, whatever the category */
    if (e->cat.n >= 0 && !is_null(e->cat) && !is_string(e->cat)) return BAIL;
    if (e->name.n >= 0 && !is_null(e->name) && !is_string(e->name)) return BAIL;
    if (!is_int_str_none(e->pid) || !is_int_str_none(e->tid)) return BAIL;
    double ts, dur;
    if (double_of(e->ts, NAN, &ts) != OK || double_of(e->dur, 0.0, &dur) != OK) return BAIL;
    int64_t ints[NINTS];
    const struct {
        const Span *v;
        int field;
    } ids[] = {{&e->ext, C_EXT},   {&e->corr, C_CORR}, {&e->device, C_DEV}, {&e->stream, C_STREAM},
               {&e->regs, C_REGS}, {&e->smem, C_SMEM}, {&e->nbytes, C_BYTES}};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        if (id_of(*ids[i].v, &ints[ids[i].field]) != OK) return BAIL;
    for (int i = 0; i < 3; i++) {
        ints[C_GX + i] = e->grid[i];
        ints[C_BX + i] = e->block[i];
    }
    if (!is_string(e->cat) || memchr(e->cat.p, '\\', (size_t)e->cat.n)) return OK; /* not wanted */
    Span cat = {e->cat.p + 1, e->cat.n - 2};
    for (c = 0; c < NCATS; c++)
        if (span_is_n(cat, CATS[c].name, CATS[c].len)) break;
    if (c == NCATS) return OK;
    int kind = CATS[c].kind;
    if (kind == K_GPU || kind == K_GANN) { /* device and stream as numbers, from pid and tid where needed */
        int gpu = kind == K_GPU;
        if ((!gpu || ints[C_DEV] == NULLV) && int64_of(e->pid, &ints[C_DEV]) != OK) return BAIL;
        if ((!gpu || ints[C_STREAM] == NULLV) && int64_of(e->tid, &ints[C_STREAM]) != OK) return BAIL;
    }
    Group *g = &b->g[c];
    if (group_reserve(g) != OK) {
        PyErr_NoMemory();
        return ERR;
    }
    Py_ssize_t i = g->n;
    g->ts[i] = ts;
    g->dur[i] = dur;
    for (int f = 0; f < NINTS; f++) g->ints[f][i] = ints[f];
    Span nk[1] = {e->name};
    if ((r = intern(&g->names, b->names[c], nk, make_name, &g->name[i])) != OK) return r;
    g->thread[i] = -1;
    if (kind != K_GPU && kind != K_GANN) {
        Span tk[2] = {e->pid, e->tid};
        if ((r = intern(&g->threads, b->threads[c], tk, make_thread, &g->thread[i])) != OK) return r;
    }
    g->shape[i] = -1;
    if (kind == K_OP && e->dims.n > 0 && !is_null(e->dims)) {
        Span sk[3] = {e->dims, e->types, e->concrete};
        if ((r = intern(&g->shapes, b->shapes[c], sk, make_shape, &g->shape[i])) != OK) return r;
    }
    g->n++;
    return OK;
}

static PyObject *packed(const void *data, Py_ssize_t n, size_t item) {
    return PyBytes_FromStringAndSize(n ? (const char *)data : "", n * (Py_ssize_t)item);
}

static int set_new(PyObject *d, const char *key, PyObject *v) {
    if (!v) return ERR;
    int r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r < 0 ? ERR : OK;
}

static PyObject *group_dict(Batch *b, int c) {
    Group *g = &b->g[c];
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (set_new(d, "ts", packed(g->ts, g->n, sizeof(double))) != OK ||
        set_new(d, "dur", packed(g->dur, g->n, sizeof(double))) != OK ||
        set_new(d, "name", packed(g->name, g->n, sizeof(int32_t))) != OK ||
        set_new(d, "thread", packed(g->thread, g->n, sizeof(int32_t))) != OK ||
        set_new(d, "shape", packed(g->shape, g->n, sizeof(int32_t))) != OK ||
        PyDict_SetItemString(d, "names", b->names[c]) < 0 || PyDict_SetItemString(d, "threads", b->threads[c]) < 0 ||
        PyDict_SetItemString(d, "shapes", b->shapes[c]) < 0)
        goto fail;
    for (int f = 0; f < NINTS; f++)
        if (set_new(d, INT_FIELDS[f], packed(g->ints[f], g->n, sizeof(int64_t))) != OK) goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* Events up to and past `close` (OK), at the first one. */
static int read_events(Scan *s, Batch *b, char close) {
    for (;;) {
        Event e;
        int r;
        ws(s);
        if (parse_event(s, &e) != OK) return BAIL;
        if ((r = add_event(b, &e)) != OK) return r;
        if ((r = after_item(s, close)) != CONTINUE) return r;
    }
}

static int read_batch(Scan *s, Batch *b) {
    ws(s);
    if (s->p >= s->end || *s->p != '[') return BAIL;
    if (opened(s, ']') != OK) {
        int r = read_events(s, b, ']');
        if (r != OK) return r;
    }
    ws(s);
    return s->p == s->end ? OK : BAIL;
}

/* The elements of an array's body, [s->p, s->end): exactly what read_batch reads of
   "[" + body + "]" (the body's end stands for the closing bracket). */
static int read_body(Scan *s, Batch *b) {
    ws(s);
    return s->p >= s->end ? OK : read_events(s, b, AT_END);
}

static PyObject *decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arg;
    const char *text;
    Py_ssize_t n, start = -1, stop = -1;
    if (!PyArg_ParseTuple(args, "O|nn:decode", &arg, &start, &stop)) return NULL;
    int body = PyTuple_GET_SIZE(args) > 1, raw = PyBytes_Check(arg);
    if (!PyUnicode_Check(arg) && !(raw && body)) {
        PyErr_SetString(PyExc_TypeError, "decode() takes the batch's text (str), or a body's bytes with start and stop");
        return NULL;
    }
    if (body) { /* text[start:stop], an array's body: ASCII only, where characters are bytes */
        if (PyTuple_GET_SIZE(args) != 3) {
            PyErr_SetString(PyExc_TypeError, "decode(text, start, stop) takes both start and stop");
            return NULL;
        }
        if (start < 0 || start > stop || stop > (raw ? PyBytes_GET_SIZE(arg) : PyUnicode_GET_LENGTH(arg))) {
            PyErr_SetString(PyExc_ValueError, "decode(text, start, stop) takes 0 <= start <= stop <= len(text)");
            return NULL;
        }
        if (raw) { /* bytes as read from the file: read as they are only where all are ASCII */
            text = PyBytes_AS_STRING(arg);
            for (Py_ssize_t i = start; i < stop; i++)
                if ((unsigned char)text[i] >= 0x80) Py_RETURN_NONE;
        } else if (!PyUnicode_IS_ASCII(arg)) {
            Py_RETURN_NONE;
        }
    }
    if (raw) {
        n = PyBytes_GET_SIZE(arg);
    } else if (!(text = PyUnicode_AsUTF8AndSize(arg, &n))) { /* (no copy for ASCII text; UTF-8, so names decode) */
        PyErr_Clear(); /* lone surrogates in the text: not the plain subset */
        Py_RETURN_NONE;
    }
    Batch b;
    memset(&b, 0, sizeof(b));
    PyObject *out = NULL;
    int r = ERR;
    for (int c = 0; c < NCATS; c++) {
        b.g[c].names.nspans = 1;
        b.g[c].threads.nspans = 2;
        b.g[c].shapes.nspans = 3;
        if (!(b.names[c] = PyList_New(0)) || !(b.threads[c] = PyList_New(0)) || !(b.shapes[c] = PyList_New(0)))
            goto done;
    }
    Scan s = {body ? text + start : text, body ? text + stop : text + n};
    r = body ? read_body(&s, &b) : read_batch(&s, &b);
    if (r != OK) goto done;
    if (!(out = PyDict_New())) {
        r = ERR;
        goto done;
    }
    for (int c = 0; c < NCATS; c++) {
        if (!b.g[c].n) continue;
        PyObject *d = group_dict(&b, c);
        if (!d || PyDict_SetItemString(out, CATS[c].name, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(out);
            r = ERR;
            goto done;
        }
        Py_DECREF(d);
    }
done:
    for (int c = 0; c < NCATS; c++) {
        group_free(&b.g[c]);
        Py_XDECREF(b.names[c]);
        Py_XDECREF(b.threads[c]);
        Py_XDECREF(b.shapes[c]);
    }
    if (r == BAIL) {
        Py_XDECREF(out);
        Py_RETURN_NONE;
    }
    if (r == ERR) {
        Py_XDECREF(out);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    return out;
}

static PyMethodDef METHODS[] = {
    {"decode", decode, METH_VARARGS,
     "decode(text[, start, stop]) -> {category: columns} for a batch of Kineto events in the plain subset, "
     "else None; with start and stop, the batch is \"[\" + text[start:stop] + \"]\" (ASCII text only: None "
     "for any other), and text may be the bytes of that ASCII text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_kineto_fast",
                                    "Kineto event batches -> columns, in C (see _kineto_events).", -1, METHODS};

PyMODINIT_FUNC PyInit__kineto_fast(void) {
    init_tables();
    PyObject *m = PyModule_Create(&MODULE);
    if (m && PyModule_AddIntConstant(m, "NULL", (long)NULLV) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

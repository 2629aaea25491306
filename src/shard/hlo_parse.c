/* hlo_parse.c: a recursive-descent parser for the XLA HLO text subset of docs/shard.md. One
 * concept in ~1,150 lines: one grammar (module, computations, instructions, shapes, attributes)
 * over one scanner state; the text queries on a parsed module are in hlo_query.c. */
#include "shard/hlo.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * How it works. The text is scanned character by character (no token list), so a 3 MB
 * module costs one pass. Names are copied; attribute values are recorded as spans of the
 * module's own copy of the text and interpreted on demand (erg__hlo_attr_ints, erg__hlo_attr_str),
 * which keeps unknown attributes intact for re-emission. An attribute value is read up to
 * the first top-level ',' or whitespace or unmatched closer, honouring {} () [] nesting and
 * "strings": top-level bare values (GT, b01f_01io->b01f, [1,4]<=[4]) never contain blanks,
 * braced ones may. Operand names are resolved once the whole computation is read, so
 * instructions may appear in any order. Every failure names line:column.
 */

static const char *const dtype_names[] = {
    "pred",   "s2",       "s4",       "s8",         "s16",        "s32",
    "s64",    "u2",       "u4",       "u8",         "u16",        "u32",
    "u64",    "f16",      "bf16",     "f32",        "f64",        "c64",
    "c128",   "f8e4m3fn", "f8e5m2",   "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz",
    "f8e4m3", "f8e3m4",   "f4e2m1fn", "f8e8m0fnu",  "token",
};
static const double dtype_bytes[] = {
    1, 1, 1, 1, 2, 4, 8, 1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
};
#define DTYPE_TOKEN 28

const char *erg__hlo_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < (int)ERG__ARRAY_LEN(dtype_names) ? dtype_names[dtype] : "?";
}

double erg__hlo_dtype_bytes(int dtype)
{
    return dtype >= 0 && dtype < (int)ERG__ARRAY_LEN(dtype_bytes) ? dtype_bytes[dtype] : 0;
}

int64_t erg__hlo_shape_elems(const hlo_shape *s)
{
    if (s->kind != HLO_ARRAY)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dims[i];
    return n;
}

double erg__hlo_shape_bytes(const hlo_shape *s)
{
    if (s->kind == HLO_TUPLE) {
        double b = 0;
        for (int i = 0; i < s->nelems; i++)
            b += erg__hlo_shape_bytes(&s->elems[i]);
        return b;
    }
    return (double)erg__hlo_shape_elems(s) * erg__hlo_dtype_bytes(s->dtype);
}

static void shape_free(hlo_shape *s)
{
    for (int i = 0; i < s->nelems; i++)
        shape_free(&s->elems[i]);
    erg__free(s->elems);
    s->elems = NULL;
    s->nelems = 0;
}

/* ---- parser state ---- */

typedef struct parser {
    erg_hlo_module *m;
    const char *t; /* text */
    size_t n, pos;
    erg_error *err;
    int depth; /* shape nesting, bounded */
} parser;

void erg__hlo_line_col(const erg_hlo_module *m, size_t off, long *line, long *col)
{
    long l = 1, c = 1;
    if (off > m->len)
        off = m->len;
    for (size_t i = 0; i < off; i++) {
        if (m->text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static erg_status fail_at(parser *p, size_t off, const char *fmt, ...) ERG_PRINTF(3, 4);
static erg_status fail_at(parser *p, size_t off, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    long line, col;
    erg__hlo_line_col(p->m, off, &line, &col);
    char near[24];
    size_t k = 0;
    for (size_t i = off; i < p->n && k < 16 && p->t[i] != '\n'; i++)
        near[k++] = isprint((unsigned char)p->t[i]) ? p->t[i] : '?';
    near[k] = '\0';
    return erg_error_set(p->err, ERG_EPARSE, "%s:%ld:%ld: %s (near '%s')", p->m->filename, line,
                         col, msg, off >= p->n ? "<end of file>" : near);
}
#define FAIL(...) fail_at(p, p->pos, __VA_ARGS__)

static void skip_ws(parser *p)
{
    while (p->pos < p->n) {
        char c = p->t[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            p->pos++;
        } else if (c == '/' && p->pos + 1 < p->n && p->t[p->pos + 1] == '*') {
            const char *e = NULL;
            for (size_t i = p->pos + 2; i + 1 < p->n; i++)
                if (p->t[i] == '*' && p->t[i + 1] == '/') {
                    e = p->t + i;
                    break;
                }
            p->pos = e ? (size_t)(e - p->t) + 2 : p->n;
        } else if (c == '/' && p->pos + 1 < p->n && p->t[p->pos + 1] == '/') {
            while (p->pos < p->n && p->t[p->pos] != '\n')
                p->pos++;
        } else {
            break;
        }
    }
}

static int peek(parser *p)
{
    skip_ws(p);
    return p->pos < p->n ? (unsigned char)p->t[p->pos] : -1;
}

static bool accept(parser *p, char c)
{
    if (peek(p) == (unsigned char)c) {
        p->pos++;
        return true;
    }
    return false;
}

static erg_status expect(parser *p, char c)
{
    if (accept(p, c))
        return ERG_OK;
    return FAIL("expected '%c'", c);
}

static bool is_id_start(int c)
{
    return isalpha(c) || c == '_';
}
static bool is_id_char(int c)
{
    return isalnum(c) || c == '_' || c == '.' || c == '-';
}

/* An identifier, optionally '%'-prefixed; returns a copy without the '%'. */
static erg_status parse_ident(parser *p, char **out, size_t *start)
{
    *out = NULL;
    int c = peek(p);
    size_t s = p->pos;
    if (start)
        *start = s;
    if (c == '%')
        p->pos++;
    if (p->pos >= p->n || !is_id_start((unsigned char)p->t[p->pos]))
        return fail_at(p, s, "expected a name");
    size_t b = p->pos;
    while (p->pos < p->n && is_id_char((unsigned char)p->t[p->pos]))
        p->pos++;
    *out = erg__strndup(p->t + b, p->pos - b);
    return *out ? ERG_OK : erg_error_set(p->err, ERG_ENOMEM, "out of memory");
}

/* Peek an identifier without consuming: returns its length at the current position. */
static size_t ident_len_at(parser *p, size_t at)
{
    size_t i = at;
    if (i < p->n && p->t[i] == '%')
        i++;
    if (i >= p->n || !is_id_start((unsigned char)p->t[i]))
        return 0;
    while (i < p->n && is_id_char((unsigned char)p->t[i]))
        i++;
    return i - at;
}

static bool word_at(parser *p, const char *w)
{
    size_t k = strlen(w);
    return p->pos + k <= p->n && !memcmp(p->t + p->pos, w, k) &&
           (p->pos + k == p->n || !is_id_char((unsigned char)p->t[p->pos + k]));
}

/* Skip a balanced group starting at an opener ({ ( [), honouring strings. */
static erg_status skip_balanced(parser *p)
{
    char stack[256];
    int sp = 0;
    size_t start = p->pos;
    while (p->pos < p->n) {
        char c = p->t[p->pos];
        if (c == '"') {
            p->pos++;
            while (p->pos < p->n && p->t[p->pos] != '"') {
                if (p->t[p->pos] == '\\')
                    p->pos++;
                p->pos++;
            }
            if (p->pos >= p->n)
                return fail_at(p, start, "unterminated string");
            p->pos++;
            continue;
        }
        if (c == '{' || c == '(' || c == '[') {
            if (sp == (int)sizeof stack)
                return fail_at(p, p->pos, "nesting deeper than %d", (int)sizeof stack);
            stack[sp++] = c == '{' ? '}' : c == '(' ? ')' : ']';
        } else if (c == '}' || c == ')' || c == ']') {
            if (sp == 0 || stack[sp - 1] != c)
                return fail_at(p, p->pos, "unbalanced '%c'", c);
            sp--;
            if (sp == 0) {
                p->pos++;
                return ERG_OK;
            }
        }
        p->pos++;
    }
    return fail_at(p, start, "unterminated group");
}

/* A generic attribute value: see the comment at the top. */
static erg_status scan_value(parser *p, size_t *off, size_t *len)
{
    skip_ws(p);
    size_t s = p->pos;
    while (p->pos < p->n) {
        char c = p->t[p->pos];
        if (c == '{' || c == '(' || c == '[' || c == '"') {
            if (c == '"') {
                size_t q = p->pos;
                p->pos++;
                while (p->pos < p->n && p->t[p->pos] != '"') {
                    if (p->t[p->pos] == '\\')
                        p->pos++;
                    p->pos++;
                }
                if (p->pos >= p->n)
                    return fail_at(p, q, "unterminated string");
                p->pos++;
            } else {
                erg_status st = skip_balanced(p);
                if (st)
                    return st;
            }
            continue;
        }
        if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '}' || c == ')' ||
            c == ']')
            break;
        /* A comment ends a bare value, as it ends an identifier. */
        if (c == '/' && p->pos + 1 < p->n && (p->t[p->pos + 1] == '/' || p->t[p->pos + 1] == '*'))
            break;
        p->pos++;
    }
    if (p->pos == s)
        return fail_at(p, s, "expected an attribute value");
    *off = s;
    *len = p->pos - s;
    return ERG_OK;
}

static erg_status parse_int64(parser *p, int64_t *out)
{
    skip_ws(p);
    size_t s = p->pos;
    int64_t v = 0;
    if (p->pos >= p->n || !isdigit((unsigned char)p->t[p->pos]))
        return FAIL("expected a dimension size");
    while (p->pos < p->n && isdigit((unsigned char)p->t[p->pos])) {
        if (v > (INT64_C(1) << 50))
            return fail_at(p, s, "dimension size too large");
        v = v * 10 + (p->t[p->pos] - '0');
        p->pos++;
    }
    *out = v;
    return ERG_OK;
}

/* EPARSE naming the shape text at `at` when its elements, or their bytes, do not fit in
 * int64_t. Zero-size dims count as 1, so that every product of some of the dims (a GEMM's
 * M, N, K; a contraction) fits too; past this check those products and erg__hlo_shape_bytes
 * cannot wrap. */
static erg_status check_shape_size(parser *p, const hlo_shape *s, size_t at)
{
    int64_t n = 1;
    bool over = false;
    for (int i = 0; i < s->rank && !over; i++)
        over = __builtin_mul_overflow(n, s->dims[i] ? s->dims[i] : 1, &n);
    int64_t b = (int64_t)erg__hlo_dtype_bytes(s->dtype);
    if (!over && !__builtin_mul_overflow(n, b ? b : 1, &n))
        return ERG_OK;
    return fail_at(p, at,
                   "shape '%.*s' is too large: its element count times %lld bytes does "
                   "not fit in 64 bits",
                   (int)ERG__MIN(p->pos - at, 200), p->t + at, (long long)b);
}

static erg_status parse_shape(parser *p, hlo_shape *s)
{
    memset(s, 0, sizeof *s);
    erg_status st;
    int c = peek(p);
    if (c == '(') {
        if (++p->depth > 64)
            return FAIL("tuple shapes nested deeper than 64");
        p->pos++;
        s->kind = HLO_TUPLE;
        size_t cap = 0;
        if (!accept(p, ')')) {
            for (;;) {
                if (!ERG__GROW(s->elems, cap, s->nelems + 1, 4))
                    return erg_error_set(p->err, ERG_ENOMEM, "out of memory");
                st = parse_shape(p, &s->elems[s->nelems]);
                s->nelems++;
                if (st)
                    return st;
                if (accept(p, ','))
                    continue;
                if ((st = expect(p, ')')))
                    return st;
                break;
            }
        }
        p->depth--;
        return ERG_OK;
    }
    size_t at = p->pos;
    size_t k = ident_len_at(p, p->pos);
    if (!k || p->t[p->pos] == '%')
        return FAIL("expected a shape");
    int dt = -1;
    for (int i = 0; i < (int)ERG__ARRAY_LEN(dtype_names); i++)
        if (strlen(dtype_names[i]) == k && !memcmp(p->t + p->pos, dtype_names[i], k))
            dt = i;
    if (dt < 0)
        return fail_at(p, at, "unknown element type '%.*s'", (int)ERG__MIN(k, 32), p->t + p->pos);
    p->pos += k;
    s->kind = dt == DTYPE_TOKEN ? HLO_TOKEN : HLO_ARRAY;
    s->dtype = dt;
    if ((st = expect(p, '[')))
        return st;
    if (!accept(p, ']')) {
        for (;;) {
            if (s->rank == HLO_MAX_RANK)
                return FAIL("rank above %d", HLO_MAX_RANK);
            int c2 = peek(p);
            if (c2 == '?') {
                p->pos++;
                s->dims[s->rank++] = 1;
            } else {
                if (c2 == '<' && p->pos + 1 < p->n && p->t[p->pos + 1] == '=')
                    p->pos += 2;
                if ((st = parse_int64(p, &s->dims[s->rank])))
                    return st;
                s->rank++;
            }
            if (accept(p, ','))
                continue;
            if ((st = expect(p, ']')))
                return st;
            break;
        }
    }
    if ((st = check_shape_size(p, s, at)))
        return st;
    /* Optional layout, directly attached: {1,0} or {1,0:T(8,128)}. */
    if (p->pos < p->n && p->t[p->pos] == '{')
        return skip_balanced(p);
    return ERG_OK;
}

/* ---- name tables ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static erg_status comp_index(hlo_comp *c, erg_error *err)
{
    size_t ns = 16;
    while (ns < (size_t)c->n * 2 + 2)
        ns *= 2;
    c->slots = erg__malloc(ns * sizeof(int));
    if (!c->slots)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    c->nslots = ns;
    for (size_t i = 0; i < ns; i++)
        c->slots[i] = -1;
    for (int i = 0; i < c->n; i++) {
        size_t h = (size_t)hash_str(c->ins[i].name) & (ns - 1);
        while (c->slots[h] >= 0) {
            if (!strcmp(c->ins[c->slots[h]].name, c->ins[i].name))
                return ERG_EEXIST;
            h = (h + 1) & (ns - 1);
        }
        c->slots[h] = i;
    }
    return ERG_OK;
}

static int comp_lookup(const hlo_comp *c, const char *name)
{
    if (!c->slots)
        return -1;
    size_t h = (size_t)hash_str(name) & (c->nslots - 1);
    while (c->slots[h] >= 0) {
        if (!strcmp(c->ins[c->slots[h]].name, name))
            return c->slots[h];
        h = (h + 1) & (c->nslots - 1);
    }
    return -1;
}

int erg__hlo_find_comp(const erg_hlo_module *m, const char *name)
{
    if (name[0] == '%')
        name++;
    for (int i = 0; i < m->ncomps; i++)
        if (!strcmp(m->comps[i].name, name))
            return i;
    return -1;
}

/* ---- instructions and computations ---- */

static hlo_op classify(const char *op)
{
    static const struct {
        const char *name;
        hlo_op op;
    } tab[] = {
        {"parameter", HLO_OP_PARAMETER},
        {"constant", HLO_OP_CONSTANT},
        {"iota", HLO_OP_IOTA},
        {"broadcast", HLO_OP_BROADCAST},
        {"transpose", HLO_OP_TRANSPOSE},
        {"reshape", HLO_OP_RESHAPE},
        {"bitcast", HLO_OP_BITCAST},
        {"copy", HLO_OP_COPY},
        {"convert", HLO_OP_CONVERT},
        {"reduce", HLO_OP_REDUCE},
        {"dot", HLO_OP_DOT},
        {"convolution", HLO_OP_CONVOLUTION},
        {"get-tuple-element", HLO_OP_GTE},
        {"tuple", HLO_OP_TUPLE},
        {"custom-call", HLO_OP_CUSTOM_CALL},
        {"slice", HLO_OP_SLICE},
        {"pad", HLO_OP_PAD},
        {"concatenate", HLO_OP_CONCATENATE},
        {"gather", HLO_OP_GATHER},
        {"scatter", HLO_OP_SCATTER},
        {"call", HLO_OP_CALL},
        {"while", HLO_OP_WHILE},
        {"fusion", HLO_OP_FUSION},
        {"all-reduce", HLO_OP_COLLECTIVE},
        {"all-gather", HLO_OP_COLLECTIVE},
        {"reduce-scatter", HLO_OP_COLLECTIVE},
        {"all-to-all", HLO_OP_COLLECTIVE},
        {"collective-permute", HLO_OP_COLLECTIVE},
        {"all-reduce-start", HLO_OP_COLLECTIVE},
        {"all-gather-start", HLO_OP_COLLECTIVE},
        {"rng", HLO_OP_RNG},
        {"rng-bit-generator", HLO_OP_RNG},
    };
    for (size_t i = 0; i < ERG__ARRAY_LEN(tab); i++)
        if (!strcmp(op, tab[i].name))
            return tab[i].op;
    static const char *const ew[] = {
        "add",
        "subtract",
        "multiply",
        "divide",
        "maximum",
        "minimum",
        "power",
        "atan2",
        "remainder",
        "and",
        "or",
        "xor",
        "not",
        "negate",
        "abs",
        "sign",
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "sqrt",
        "rsqrt",
        "cbrt",
        "tanh",
        "logistic",
        "sine",
        "cosine",
        "tan",
        "erf",
        "floor",
        "ceil",
        "round-nearest-afz",
        "round-nearest-even",
        "is-finite",
        "compare",
        "select",
        "clamp",
        "reduce-precision",
        "shift-left",
        "shift-right-logical",
        "shift-right-arithmetic",
        "bitcast-convert",
        "real",
        "imag",
        "popcnt",
        "count-leading-zeros",
    };
    for (size_t i = 0; i < ERG__ARRAY_LEN(ew); i++)
        if (!strcmp(op, ew[i]))
            return HLO_OP_ELEMENTWISE;
    return HLO_OP_OTHER;
}

/* Opcodes XLA's HLO text parser knows (xla/hlo/ir/hlo_opcode.h) that classify() files under
 * HLO_OP_OTHER: accepted and treated as replicated boundaries. Anything else is a typo or an
 * unsupported dialect and is rejected with its line (a misspelt `dott` must not make a dot
 * silently disappear). */
static bool known_other_opcode(const char *op)
{
    static const char *const tab[] = {
        "add-dependency",
        "after-all",
        "all-gather-done",
        "all-reduce-done",
        "async-done",
        "async-start",
        "async-update",
        "batch-norm-grad",
        "batch-norm-inference",
        "batch-norm-training",
        "cholesky",
        "collective-broadcast",
        "collective-permute-done",
        "collective-permute-start",
        "complex",
        "conditional",
        "copy-done",
        "copy-start",
        "cross-replica-sum",
        "domain",
        "dynamic-reshape",
        "dynamic-slice",
        "dynamic-update-slice",
        "fft",
        "get-dimension-size",
        "infeed",
        "map",
        "opt-barrier",
        "optimization-barrier",
        "outfeed",
        "partition-id",
        "ragged-all-to-all",
        "ragged-dot",
        "recv",
        "recv-done",
        "reduce-window",
        "replica-id",
        "reverse",
        "rng-get-and-update-state",
        "select-and-scatter",
        "send",
        "send-done",
        "set-dimension-size",
        "sort",
        "stochastic-convert",
        "topk",
        "trace",
        "triangular-solve",
        "tuple-select",
        "inverse",
    };
    for (size_t i = 0; i < ERG__ARRAY_LEN(tab); i++)
        if (!strcmp(op, tab[i]))
            return true;
    return false;
}

static void instr_free(hlo_instr *in)
{
    erg__free(in->name);
    erg__free(in->opcode);
    shape_free(&in->shape);
    erg__free(in->ops);
    if (in->op_names)
        for (int i = 0; i < in->nops; i++)
            erg__free(in->op_names[i]);
    erg__free(in->op_names);
    for (int i = 0; i < in->nattrs; i++)
        erg__free(in->attrs[i].key);
    erg__free(in->attrs);
}

static erg_status push_operand(parser *p, hlo_instr *in, char *name, size_t *cap)
{
    if (!ERG__GROW(in->op_names, *cap, in->nops + 1, 4)) {
        erg__free(name);
        return erg_error_set(p->err, ERG_ENOMEM, "out of memory");
    }
    in->op_names[in->nops++] = name;
    return ERG_OK;
}

static erg_status parse_instr(parser *p, hlo_instr *in)
{
    erg_status st;
    memset(in, 0, sizeof *in);
    in->param_num = -1;
    skip_ws(p);
    in->start = p->pos;
    if (word_at(p, "ROOT")) {
        in->root = true;
        p->pos += 4;
    }
    if ((st = parse_ident(p, &in->name, NULL)))
        return st;
    if ((st = expect(p, '=')))
        return st;
    if ((st = parse_shape(p, &in->shape)))
        return st;
    size_t opat;
    if ((st = parse_ident(p, &in->opcode, &opat)))
        return st == ERG_ENOMEM
                   ? st
                   : fail_at(p, opat, "expected an opcode after the shape of '%s'", in->name);
    in->op = classify(in->opcode);
    if (in->op == HLO_OP_OTHER && !known_other_opcode(in->opcode))
        return fail_at(p, opat, "unknown opcode '%s' of '%s'", in->opcode, in->name);
    if ((st = expect(p, '(')))
        return st;
    if (in->op == HLO_OP_CONSTANT || in->op == HLO_OP_PARAMETER) {
        p->pos--; /* back onto '(' */
        size_t s = p->pos;
        if ((st = skip_balanced(p)))
            return st;
        in->lit_off = s + 1;
        in->lit_len = p->pos - s - 2;
        if (in->op == HLO_OP_PARAMETER) {
            char buf[24];
            size_t k = ERG__MIN(in->lit_len, sizeof buf - 1);
            memcpy(buf, p->t + in->lit_off, k);
            buf[k] = '\0';
            char *e;
            long v = strtol(buf, &e, 10);
            while (*e == ' ')
                e++;
            if (e == buf || *e || v < 0)
                return fail_at(p, in->lit_off, "parameter number expected");
            in->param_num = v;
        }
    } else if (!accept(p, ')')) {
        size_t cap = 0;
        for (;;) {
            int c = peek(p);
            size_t at = p->pos;
            if (c == '(') {
                hlo_shape tmp;
                st = parse_shape(p, &tmp);
                shape_free(&tmp);
                if (st)
                    return st;
            } else if (c != '%') {
                size_t k = ident_len_at(p, p->pos);
                if (k && p->pos + k < p->n && p->t[p->pos + k] == '[') {
                    hlo_shape tmp;
                    st = parse_shape(p, &tmp);
                    shape_free(&tmp);
                    if (st)
                        return st;
                } else if (!k) {
                    return fail_at(p, at, "expected an operand of '%s'", in->name);
                }
            }
            char *nm;
            if ((st = parse_ident(p, &nm, NULL)))
                return st;
            if ((st = push_operand(p, in, nm, &cap)))
                return st;
            if (accept(p, ','))
                continue;
            if ((st = expect(p, ')')))
                return st;
            break;
        }
    }
    in->end = p->pos;
    size_t cap = 0;
    while (peek(p) == ',') {
        p->pos++;
        char *key;
        if ((st = parse_ident(p, &key, NULL)))
            return st;
        if (!ERG__GROW(in->attrs, cap, in->nattrs + 1, 4)) {
            erg__free(key);
            return erg_error_set(p->err, ERG_ENOMEM, "out of memory");
        }
        hlo_attr *a = &in->attrs[in->nattrs++];
        a->key = key;
        a->off = a->len = 0;
        if ((st = expect(p, '=')))
            return st;
        if ((st = scan_value(p, &a->off, &a->len)))
            return st;
        in->end = p->pos;
    }
    return ERG_OK;
}

static int dims_attr(parser *p, const hlo_instr *in, const char *key, int64_t *out)
{
    return erg__hlo_attr_ints(p->m, in, key, out, HLO_MAX_RANK);
}

/* A dot's dimension numbers must name existing, distinct dims of matching sizes, and its
 * declared result shape must be batch dims, then lhs free dims, then rhs free dims. */
static erg_status check_dot(parser *p, const hlo_comp *c, const hlo_instr *in)
{
    if (in->nops != 2)
        return fail_at(p, in->start, "dot '%s' has %d operands, expected 2", in->name, in->nops);
    const hlo_shape *L = &c->ins[in->ops[0]].shape, *R = &c->ins[in->ops[1]].shape;
    if (L->kind != HLO_ARRAY || R->kind != HLO_ARRAY || in->shape.kind != HLO_ARRAY)
        return fail_at(p, in->start, "dot '%s' needs array operands and result", in->name);
    int64_t lb[HLO_MAX_RANK], rb[HLO_MAX_RANK], lc[HLO_MAX_RANK], rc[HLO_MAX_RANK];
    const char *keys[4] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims",
                           "rhs_contracting_dims"};
    int64_t *arr[4] = {lb, rb, lc, rc};
    int n[4];
    for (int k = 0; k < 4; k++) {
        n[k] = erg__hlo_find_attr(in, keys[k]) ? dims_attr(p, in, keys[k], arr[k]) : 0;
        if (n[k] < 0)
            return fail_at(p, in->start, "dot '%s': %s is not a list of dims", in->name, keys[k]);
    }
    if (n[0] != n[1] || n[2] != n[3])
        return fail_at(p, in->start, "dot '%s': %d lhs and %d rhs %s dims", in->name,
                       n[0] != n[1] ? n[0] : n[2], n[0] != n[1] ? n[1] : n[3],
                       n[0] != n[1] ? "batch" : "contracting");
    bool lused[HLO_MAX_RANK] = {0}, rused[HLO_MAX_RANK] = {0};
    for (int q = 0; q < 2; q++) {
        int64_t *la = q ? lc : lb, *ra = q ? rc : rb;
        for (int k = 0; k < n[2 * q]; k++) {
            int64_t a = la[k], b = ra[k];
            if (a < 0 || a >= L->rank || lused[a])
                return fail_at(p, in->start, "dot '%s': %s names dim %lld; lhs has rank %d%s",
                               in->name, keys[2 * q], (long long)a, L->rank,
                               a >= 0 && a < L->rank ? " (used twice)" : "");
            if (b < 0 || b >= R->rank || rused[b])
                return fail_at(p, in->start, "dot '%s': %s names dim %lld; rhs has rank %d%s",
                               in->name, keys[2 * q + 1], (long long)b, R->rank,
                               b >= 0 && b < R->rank ? " (used twice)" : "");
            if (L->dims[a] != R->dims[b])
                return fail_at(p, in->start,
                               "dot '%s': lhs dim %lld (size %lld) and rhs dim %lld (size %lld) "
                               "are paired but differ",
                               in->name, (long long)a, (long long)L->dims[a], (long long)b,
                               (long long)R->dims[b]);
            lused[a] = rused[b] = true;
        }
    }
    int64_t want[2 * HLO_MAX_RANK];
    int nw = 0;
    for (int k = 0; k < n[0]; k++)
        want[nw++] = L->dims[lb[k]];
    for (int k = 0; k < L->rank; k++)
        if (!lused[k])
            want[nw++] = L->dims[k];
    for (int k = 0; k < R->rank; k++)
        if (!rused[k])
            want[nw++] = R->dims[k];
    bool ok = nw == in->shape.rank;
    for (int k = 0; ok && k < nw; k++)
        ok = want[k] == in->shape.dims[k];
    if (!ok) {
        char buf[160];
        size_t at = 0;
        for (int k = 0; k < nw && at + 24 < sizeof buf; k++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%lld", k ? "," : "",
                                   (long long)want[k]);
        buf[at] = '\0';
        return fail_at(p, in->start,
                       "dot '%s': declared result shape does not match its operands (expected "
                       "dims [%s])",
                       in->name, buf);
    }
    return ERG_OK;
}

/* Operand references must form a DAG: report one instruction on a cycle with its line. */
static erg_status check_acyclic(parser *p, const hlo_comp *c)
{
    int n = c->n;
    uint8_t *state = erg__calloc((size_t)n, 1);
    int *next = erg__calloc((size_t)n, sizeof(int));
    int *stack = erg__malloc((size_t)n * sizeof(int));
    if (!state || !next || !stack) {
        erg__free(state);
        erg__free(next);
        erg__free(stack);
        return erg_error_set(p->err, ERG_ENOMEM, "out of memory");
    }
    int bad = -1, via = -1;
    for (int r = 0; r < n && bad < 0; r++) {
        if (state[r])
            continue;
        int sp = 0;
        stack[sp++] = r;
        state[r] = 1;
        while (sp > 0 && bad < 0) {
            int v = stack[sp - 1];
            if (next[v] < c->ins[v].nops) {
                int o = c->ins[v].ops[next[v]++];
                if (state[o] == 1) {
                    bad = o;
                    via = v;
                } else if (!state[o]) {
                    state[o] = 1;
                    stack[sp++] = o;
                }
            } else {
                state[v] = 2;
                sp--;
            }
        }
    }
    erg__free(state);
    erg__free(next);
    erg__free(stack);
    if (bad >= 0)
        return fail_at(p, c->ins[bad].start,
                       "'%s' depends on itself: a cycle through its user '%s' in '%s'",
                       c->ins[bad].name, c->ins[via].name, c->name);
    return ERG_OK;
}

static erg_status parse_computation(parser *p, hlo_comp *c)
{
    erg_status st;
    memset(c, 0, sizeof *c);
    c->root = -1;
    skip_ws(p);
    c->start = p->pos;
    if (word_at(p, "ENTRY")) {
        c->entry = true;
        p->pos += 5;
    }
    if ((st = parse_ident(p, &c->name, NULL)))
        return st;
    if (peek(p) == '(') {
        if ((st = skip_balanced(p)))
            return st;
        if (peek(p) == '-' && p->pos + 1 < p->n && p->t[p->pos + 1] == '>') {
            p->pos += 2;
            hlo_shape tmp;
            st = parse_shape(p, &tmp);
            shape_free(&tmp);
            if (st)
                return st;
        } else {
            return FAIL("expected '->' after the parameters of computation '%s'", c->name);
        }
    }
    while (accept(p, ',')) {
        char *key;
        if ((st = parse_ident(p, &key, NULL)))
            return st;
        erg__free(key);
        size_t o, l;
        if ((st = expect(p, '=')) || (st = scan_value(p, &o, &l)))
            return st;
    }
    if ((st = expect(p, '{')))
        return st;
    while (peek(p) != '}') {
        if (peek(p) < 0)
            return fail_at(p, c->start, "computation '%s' is not closed with '}'", c->name);
        if (!ERG__GROW(c->ins, c->cap, c->n + 1, 16))
            return erg_error_set(p->err, ERG_ENOMEM, "out of memory");
        hlo_instr *in = &c->ins[c->n++];
        st = parse_instr(p, in);
        if (st)
            return st;
        if (in->root) {
            if (c->root >= 0)
                return fail_at(p, in->start, "second ROOT in computation '%s'", c->name);
            c->root = c->n - 1;
        }
    }
    p->pos++;
    if (c->n == 0)
        return fail_at(p, c->start, "computation '%s' has no instructions", c->name);
    if (c->root < 0)
        c->root = c->n - 1;
    st = comp_index(c, p->err);
    if (st == ERG_EEXIST) {
        for (int i = 0; i < c->n; i++)
            for (int j = i + 1; j < c->n; j++)
                if (!strcmp(c->ins[i].name, c->ins[j].name))
                    return fail_at(p, c->ins[j].start, "instruction name '%s' is defined twice",
                                   c->ins[j].name);
        return fail_at(p, c->start, "duplicate instruction name");
    }
    if (st)
        return st;
    for (int i = 0; i < c->n; i++) {
        hlo_instr *in = &c->ins[i];
        if (in->nops) {
            in->ops = erg__malloc((size_t)in->nops * sizeof(int));
            if (!in->ops)
                return erg_error_set(p->err, ERG_ENOMEM, "out of memory");
        }
        for (int j = 0; j < in->nops; j++) {
            int k = comp_lookup(c, in->op_names[j]);
            if (k < 0)
                return fail_at(p, in->start, "operand '%s' of '%s' is not defined in '%s'",
                               in->op_names[j], in->name, c->name);
            in->ops[j] = k;
            erg__free(in->op_names[j]);
            in->op_names[j] = NULL;
        }
        erg__free(in->op_names);
        in->op_names = NULL;
    }
    for (int i = 0; i < c->n; i++) {
        const hlo_instr *in = &c->ins[i];
        if (in->op == HLO_OP_DOT && (st = check_dot(p, c, in)))
            return st;
        if (in->op == HLO_OP_GTE) {
            /* get-tuple-element(t), index=i: t a tuple with an element i */
            int64_t ix[1];
            const hlo_shape *t = in->nops == 1 ? &c->ins[in->ops[0]].shape : NULL;
            if (!t || t->kind != HLO_TUPLE)
                return fail_at(p, in->start, "get-tuple-element '%s' needs one tuple operand",
                               in->name);
            if (erg__hlo_attr_ints(p->m, in, "index", ix, 1) != 1 || ix[0] < 0 ||
                ix[0] >= t->nelems)
                return fail_at(p, in->start,
                               "get-tuple-element '%s' needs index=N with 0 <= N < %d", in->name,
                               t->nelems);
        }
    }
    return check_acyclic(p, c);
}

static void comp_free(hlo_comp *c)
{
    for (int i = 0; i < c->n; i++)
        instr_free(&c->ins[i]);
    erg__free(c->ins);
    erg__free(c->name);
    erg__free(c->slots);
}

void erg_hlo_free(erg_hlo_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->ncomps; i++)
        comp_free(&m->comps[i]);
    erg__free(m->comps);
    erg__free(m->text);
    erg__free(m->filename);
    erg__free(m->name);
    erg__free(m);
}

erg_status erg_hlo_parse(const char *text, size_t len, const char *filename, erg_hlo_module **out,
                         erg_error *err)
{
    erg_status st;
    if (!out || (!text && len))
        return erg_error_set(err, ERG_EINVAL, "erg_hlo_parse: NULL argument");
    *out = NULL;
    erg_hlo_module *m = erg__calloc(1, sizeof *m);
    if (!m)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    m->entry = -1;
    m->num_partitions = m->num_replicas = 1;
    m->text = erg__malloc(len + 1);
    m->filename = erg__strdup(filename ? filename : "<hlo>");
    if (!m->text || !m->filename) {
        erg_hlo_free(m);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (len)
        memcpy(m->text, text, len);
    m->text[len] = '\0';
    m->len = len;
    parser P = {.m = m, .t = m->text, .n = len, .pos = 0, .err = err}, *p = &P;
    if (memchr(m->text, '\0', len)) {
        st = fail_at(p, (size_t)(strchr(m->text, '\0') - m->text), "NUL byte in HLO text");
        goto fail;
    }
    skip_ws(p);
    if (!word_at(p, "HloModule")) {
        st = FAIL("expected 'HloModule' at the start of the module");
        goto fail;
    }
    p->pos += 9;
    if ((st = parse_ident(p, &m->name, NULL)))
        goto fail;
    m->header_end = p->pos;
    while (accept(p, ',')) {
        char *key;
        if ((st = parse_ident(p, &key, NULL)))
            goto fail;
        bool np = !strcmp(key, "num_partitions"),
             nr = !strcmp(key, "replica_count") || !strcmp(key, "num_replicas");
        if (np)
            m->has_num_partitions = true;
        erg__free(key);
        size_t o, l;
        if ((st = expect(p, '=')) || (st = scan_value(p, &o, &l)))
            goto fail;
        if (np || nr) {
            char buf[24];
            long v = 0;
            size_t k = ERG__MIN(l, sizeof buf - 1);
            memcpy(buf, p->t + o, k);
            buf[k] = '\0';
            if (!erg__parse_long(buf, &v) || v < 1) {
                st = fail_at(p, o, "%s must be a positive integer",
                             np ? "num_partitions" : "replica count");
                goto fail;
            }
            *(np ? &m->num_partitions : &m->num_replicas) = v;
        }
        m->header_end = p->pos;
    }
    while (peek(p) >= 0) {
        if (!ERG__GROW(m->comps, m->capcomps, m->ncomps + 1, 8)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto fail;
        }
        st = parse_computation(p, &m->comps[m->ncomps++]);
        if (st)
            goto fail;
        hlo_comp *c = &m->comps[m->ncomps - 1];
        if (c->entry) {
            if (m->entry >= 0) {
                st = fail_at(p, c->start, "second ENTRY computation '%s'", c->name);
                goto fail;
            }
            m->entry = m->ncomps - 1;
        }
    }
    if (m->ncomps == 0) {
        st = FAIL("module has no computations");
        goto fail;
    }
    if (m->entry < 0)
        m->entry = m->ncomps - 1; /* XLA's rule when ENTRY is not marked: the last one */
    /* Called computations must exist. */
    static const char *const callkeys[] = {"to_apply", "calls", "condition", "body"};
    for (int ci = 0; ci < m->ncomps; ci++) {
        hlo_comp *c = &m->comps[ci];
        for (int i = 0; i < c->n; i++)
            for (size_t k = 0; k < ERG__ARRAY_LEN(callkeys); k++) {
                char *v = erg__hlo_attr_str(m, &c->ins[i], callkeys[k]);
                if (v && erg__hlo_find_comp(m, v) < 0) {
                    st = fail_at(p, c->ins[i].start, "%s=%s of '%s' names no computation",
                                 callkeys[k], v, c->ins[i].name);
                    erg__free(v);
                    goto fail;
                }
                erg__free(v);
            }
    }
    *out = m;
    return ERG_OK;
fail:
    erg_hlo_free(m);
    return st;
}

erg_status erg_hlo_load(const char *path, erg_hlo_module **out, erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_file(path, (size_t)256 << 20, &text, &len, err);
    if (st)
        return st;
    st = erg_hlo_parse(text, len, path, out, err);
    erg__free(text);
    return st;
}

const char *erg_hlo_name(const erg_hlo_module *m)
{
    return m ? m->name : NULL;
}
size_t erg_hlo_num_computations(const erg_hlo_module *m)
{
    return m ? (size_t)m->ncomps : 0;
}

size_t erg_hlo_num_instructions(const erg_hlo_module *m)
{
    size_t n = 0;
    for (int i = 0; m && i < m->ncomps; i++)
        n += (size_t)m->comps[i].n;
    return n;
}

size_t erg_hlo_count_opcode(const erg_hlo_module *m, const char *opcode)
{
    size_t n = 0;
    for (int i = 0; m && opcode && i < m->ncomps; i++)
        for (int j = 0; j < m->comps[i].n; j++)
            n += !strcmp(m->comps[i].ins[j].opcode, opcode);
    return n;
}

const hlo_attr *erg__hlo_find_attr(const hlo_instr *in, const char *key)
{
    for (int i = 0; i < in->nattrs; i++)
        if (!strcmp(in->attrs[i].key, key))
            return &in->attrs[i];
    return NULL;
}

char *erg__hlo_attr_str(const erg_hlo_module *m, const hlo_instr *in, const char *key)
{
    const hlo_attr *a = erg__hlo_find_attr(in, key);
    if (!a)
        return NULL;
    const char *s = m->text + a->off;
    size_t l = a->len;
    if (l && s[0] == '%') {
        s++;
        l--;
    }
    return erg__strndup(s, l);
}

int erg__hlo_attr_ints(const erg_hlo_module *m, const hlo_instr *in, const char *key, int64_t *out,
                       int max)
{
    const hlo_attr *a = erg__hlo_find_attr(in, key);
    if (!a)
        return -1;
    const char *s = m->text + a->off, *e = s + a->len;
    if (s < e && *s == '{')
        s++;
    int n = 0;
    while (s < e) {
        while (s < e && (*s == ' ' || *s == ','))
            s++;
        if (s >= e || *s == '}')
            break;
        if (!isdigit((unsigned char)*s) && *s != '-')
            return -1;
        int64_t sign = 1, v = 0;
        if (*s == '-') {
            sign = -1;
            s++;
        }
        if (s >= e || !isdigit((unsigned char)*s))
            return -1;
        while (s < e && isdigit((unsigned char)*s)) {
            if (v > (INT64_C(1) << 40))
                return -1;
            v = v * 10 + (*s++ - '0');
        }
        if (n == max)
            return -1;
        out[n++] = sign * v;
    }
    return n;
}

/* ---- structural comparison (what the annotated module must keep) ---- */

static bool shape_same(const hlo_shape *a, const hlo_shape *b)
{
    if (a->kind != b->kind || a->nelems != b->nelems)
        return false;
    if (a->kind == HLO_TUPLE) {
        for (int i = 0; i < a->nelems; i++)
            if (!shape_same(&a->elems[i], &b->elems[i]))
                return false;
        return true;
    }
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* The next attribute of `in` from index *k on whose key is not skip_key, or NULL. */
static const hlo_attr *next_attr(const hlo_instr *in, int *k, const char *skip_key)
{
    while (*k < in->nattrs && skip_key && !strcmp(in->attrs[*k].key, skip_key))
        (*k)++;
    return *k < in->nattrs ? &in->attrs[(*k)++] : NULL;
}

bool erg__hlo_module_same(const erg_hlo_module *a, const erg_hlo_module *b, const char *skip_key,
                          char *why, size_t whylen)
{
#define DIFF(...)                                                                                  \
    do {                                                                                           \
        snprintf(why, whylen, __VA_ARGS__);                                                        \
        return false;                                                                              \
    } while (0)
    if (strcmp(a->name, b->name))
        DIFF("module name '%s' became '%s'", a->name, b->name);
    if (a->ncomps != b->ncomps || a->entry != b->entry)
        DIFF("%d computations (ENTRY %d) became %d (ENTRY %d)", a->ncomps, a->entry, b->ncomps,
             b->entry);
    if (a->num_replicas != b->num_replicas)
        DIFF("replica count %ld became %ld", a->num_replicas, b->num_replicas);
    for (int ci = 0; ci < a->ncomps; ci++) {
        const hlo_comp *A = &a->comps[ci], *B = &b->comps[ci];
        if (strcmp(A->name, B->name) || A->n != B->n || A->root != B->root)
            DIFF("computation '%s' (%d instructions) became '%s' (%d)", A->name, A->n, B->name,
                 B->n);
        for (int i = 0; i < A->n; i++) {
            const hlo_instr *x = &A->ins[i], *y = &B->ins[i];
            if (strcmp(x->name, y->name) || strcmp(x->opcode, y->opcode) || x->root != y->root ||
                x->param_num != y->param_num || x->nops != y->nops)
                DIFF("instruction '%s' %s became '%s' %s", x->name, x->opcode, y->name, y->opcode);
            if (!shape_same(&x->shape, &y->shape))
                DIFF("the shape of '%s' changed", x->name);
            for (int o = 0; o < x->nops; o++)
                if (x->ops[o] != y->ops[o])
                    DIFF("operand %d of '%s' changed", o, x->name);
            if (x->lit_len != y->lit_len ||
                memcmp(a->text + x->lit_off, b->text + y->lit_off, x->lit_len))
                DIFF("the literal of '%s' changed", x->name);
            int kx = 0, ky = 0;
            for (;;) {
                const hlo_attr *p = next_attr(x, &kx, skip_key), *q = next_attr(y, &ky, skip_key);
                if (!p && !q)
                    break;
                if (!p || !q || strcmp(p->key, q->key) || p->len != q->len ||
                    memcmp(a->text + p->off, b->text + q->off, p->len))
                    DIFF("attribute '%s' of '%s' changed", p ? p->key : q->key, x->name);
            }
        }
    }
    return true;
#undef DIFF
}

/* plan.c: the plan container and its JSON and freqs_pipeline .py formats. */
#include "core/internal.h"
#include "ergon/plan.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ERG_MAX_PLAN_BYTES (64u << 20)

struct erg_plan {
    erg_schedule sched;
    int S, M;
    int *freqs; /* [S][2M], execution order */
    erg_instr *order; /* [S][2M], the schedule's order */
    double time_s, energy_j;
    char *method;
};

erg_status erg_plan_new(const erg_schedule *sched, int S, int M, erg_plan **out, erg_error *err)
{
    *out = NULL;
    erg_schedule def = {.kind = ERG_SCHED_1F1B};
    if (!sched)
        sched = &def;
    if (S < 1 || M < 1 || (long long)S * M > (1 << 22))
        return erg_error_set(err, ERG_EINVAL, "plan size out of range: S=%d, M=%d", S, M);
    erg_plan *p = erg__calloc(1, sizeof(*p));
    if (!p)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    p->sched = *sched;
    p->S = S;
    p->M = M;
    p->time_s = p->energy_j = NAN;
    p->freqs = erg__calloc((size_t)S * 2 * M, sizeof(int));
    p->order = erg__calloc((size_t)S * 2 * M, sizeof(erg_instr));
    if (!p->freqs || !p->order) {
        erg_plan_free(p);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int s = 0; s < S; s++) {
        erg_status st = erg_schedule_stage_order(sched, S, M, s, p->order + (size_t)s * 2 * M, err);
        if (st) {
            erg_plan_free(p);
            return st;
        }
    }
    *out = p;
    return ERG_OK;
}

erg_status erg_plan_copy(const erg_plan *src, erg_plan **out, erg_error *err)
{
    erg_status st = erg_plan_new(&src->sched, src->S, src->M, out, err);
    if (st)
        return st;
    memcpy((*out)->freqs, src->freqs, (size_t)src->S * 2 * src->M * sizeof(int));
    (*out)->time_s = src->time_s;
    (*out)->energy_j = src->energy_j;
    if (src->method)
        return erg_plan_set_method(*out, src->method, err);
    return ERG_OK;
}

void erg_plan_free(erg_plan *p)
{
    if (!p)
        return;
    erg__free(p->freqs);
    erg__free(p->order);
    erg__free(p->method);
    erg__free(p);
}

int erg_plan_num_stages(const erg_plan *p)
{
    return p->S;
}
int erg_plan_num_microbatches(const erg_plan *p)
{
    return p->M;
}
erg_schedule erg_plan_schedule(const erg_plan *p)
{
    return p->sched;
}
int *erg_plan_stage_freqs(erg_plan *p, int s)
{
    return s >= 0 && s < p->S ? p->freqs + (size_t)s * 2 * p->M : NULL;
}
const int *erg_plan_stage_freqs_const(const erg_plan *p, int s)
{
    return s >= 0 && s < p->S ? p->freqs + (size_t)s * 2 * p->M : NULL;
}

int erg_plan_freq(const erg_plan *p, int s, erg_instr_kind kind, int mb)
{
    if (s < 0 || s >= p->S || mb < 0 || mb >= p->M)
        return 0;
    const erg_instr *o = p->order + (size_t)s * 2 * p->M;
    for (int k = 0; k < 2 * p->M; k++)
        if (o[k].kind == kind && o[k].microbatch == mb)
            return p->freqs[(size_t)s * 2 * p->M + k];
    return 0;
}

void erg_plan_fill(erg_plan *p, int f)
{
    for (size_t i = 0; i < (size_t)p->S * 2 * p->M; i++)
        p->freqs[i] = f;
}

void erg_plan_set_estimate(erg_plan *p, double t, double e)
{
    p->time_s = t;
    p->energy_j = e;
}

void erg_plan_estimate(const erg_plan *p, double *t, double *e)
{
    if (t)
        *t = p->time_s;
    if (e)
        *e = p->energy_j;
}

erg_status erg_plan_set_method(erg_plan *p, const char *m, erg_error *err)
{
    char *d = m ? erg__strdup(m) : NULL;
    if (m && !d)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg__free(p->method);
    p->method = d;
    return ERG_OK;
}

const char *erg_plan_method(const erg_plan *p)
{
    return p->method;
}

/* ---- .py literal ---- */

erg_status erg_plan_format_py(const erg_plan *p, const char *trailer, char **out, erg_error *err)
{
    erg__buf b = {0};
    erg_status st = erg__buf_append(&b, "[\n", 2);
    char num[16];
    for (int s = 0; s < p->S && !st; s++) {
        st = erg__buf_append(&b, "[", 1);
        const int *f = p->freqs + (size_t)s * 2 * p->M;
        for (int k = 0; k < 2 * p->M && !st; k++) {
            int n = snprintf(num, sizeof num, k ? ", %d" : "%d", f[k]);
            st = erg__buf_append(&b, num, (size_t)n);
        }
        if (!st)
            st = erg__buf_append(&b, "],\n", 3);
    }
    if (!st)
        st = erg__buf_append(&b, "]\n", 2);
    if (!st && trailer)
        st = erg__buf_append(&b, trailer, strlen(trailer));
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, st, "out of memory");
    }
    *out = b.data;
    return ERG_OK;
}

erg_status erg_plan_write_py(const erg_plan *p, const char *trailer, const char *path,
                             erg_error *err)
{
    char *s;
    erg_status st = erg_plan_format_py(p, trailer, &s, err);
    if (st)
        return st;
    st = erg__write_file(path, s, strlen(s), err);
    erg__free(s);
    return st;
}

/* Parse the Python literal: a list of lists of integers, with # comments,
 * whitespace and trailing commas. Nothing is evaluated. */
typedef struct pyparse {
    const char *p, *end, *name;
    long line, col;
    erg_error *err;
} pyparse;

static void py_skip(pyparse *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->col = 1;
            ps->p++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            ps->p++;
            ps->col++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else {
            break;
        }
    }
}

static erg_status py_error(pyparse *ps, const char *what)
{
    char got[16] = "end of file";
    if (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c >= 32 && c < 127)
            snprintf(got, sizeof got, "'%c'", c);
        else
            snprintf(got, sizeof got, "byte 0x%02x", c);
    }
    return erg_error_set(ps->err, ERG_EPARSE, "%s:%ld:%ld: expected %s, found %s", ps->name,
                         ps->line, ps->col, what, got);
}

static bool py_expect(pyparse *ps, char c)
{
    py_skip(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        ps->col++;
        return true;
    }
    return false;
}

static erg_status parse_py(const char *text, size_t len, const char *name,
                           const erg_schedule *hint, erg_plan **out, erg_error *err)
{
    pyparse ps = {text, text + len, name, 1, 1, err};
    int *vals = NULL;
    size_t nv = 0, cap = 0;
    int rows = 0, rowlen = -1;
    erg_status st = ERG_OK;
    if (!py_expect(&ps, '['))
        return py_error(&ps, "'[' opening the list of stages");
    for (;;) {
        py_skip(&ps);
        if (py_expect(&ps, ']'))
            break;
        if (!py_expect(&ps, '[')) {
            st = py_error(&ps, "'[' opening a stage's clocks or ']'");
            goto done;
        }
        int count = 0;
        for (;;) {
            py_skip(&ps);
            if (py_expect(&ps, ']'))
                break;
            long v = 0;
            int digits = 0;
            while (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9' && digits < 9) {
                v = v * 10 + (*ps.p - '0');
                ps.p++;
                ps.col++;
                digits++;
            }
            if (!digits || (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9')) {
                st = py_error(&ps, "a clock in MHz (a positive integer below 10^9)");
                goto done;
            }
            if (nv == cap) {
                size_t nc = cap ? cap * 2 : 256;
                int *d = erg__reallocarray(vals, nc, sizeof(int));
                if (!d) {
                    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                    goto done;
                }
                vals = d;
                cap = nc;
            }
            vals[nv++] = (int)v;
            count++;
            py_skip(&ps);
            if (py_expect(&ps, ','))
                continue;
            if (py_expect(&ps, ']'))
                break;
            st = py_error(&ps, "',' or ']'");
            goto done;
        }
        if (rowlen >= 0 && count != rowlen) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: stage %d has %d clocks but stage 0 has %d", name, ps.line,
                               rows, count, rowlen);
            goto done;
        }
        if (count == 0 || count % 2) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: stage %d has %d clocks; expected 2 per microbatch", name,
                               ps.line, rows, count);
            goto done;
        }
        rowlen = count;
        rows++;
        py_skip(&ps);
        if (py_expect(&ps, ','))
            continue;
        if (py_expect(&ps, ']'))
            break;
        st = py_error(&ps, "',' or ']' after a stage");
        goto done;
    }
    py_skip(&ps);
    if (ps.p != ps.end) {
        st = py_error(&ps, "only comments after the list");
        goto done;
    }
    if (rows == 0) {
        st = erg_error_set(err, ERG_EPARSE, "%s: the plan has no stages", name);
        goto done;
    }
    erg_plan *p;
    st = erg_plan_new(hint, rows, rowlen / 2, &p, err);
    if (st)
        goto done;
    memcpy(p->freqs, vals, nv * sizeof(int));
    *out = p;
done:
    erg__free(vals);
    return st;
}

/* ---- JSON ---- */

static void instr_name(erg_instr in, char *buf, size_t n)
{
    snprintf(buf, n, "%c%d", in.kind == ERG_FORWARD ? 'F' : 'B', in.microbatch);
}

erg_status erg_plan_format_json(const erg_plan *p, char **out, erg_error *err)
{
    json_t *root = json_object();
    json_t *stages = json_array();
    if (!root || !stages) {
        json_decref(root);
        json_decref(stages);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    json_object_set_new(root, "format", json_string("ergon-plan"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "schedule", json_string(erg_schedule_name(p->sched.kind)));
    if (p->sched.max_inflight)
        json_object_set_new(root, "max_inflight", json_integer(p->sched.max_inflight));
    if (p->sched.kind == ERG_SCHED_ENVPIPE) {
        json_t *r = json_array();
        for (int s = 0; s < p->S && s < ERG_SCHED_MAX_STAGES; s++)
            json_array_append_new(r, json_integer(p->sched.extra_warmup[s]));
        json_object_set_new(root, "extra_warmup", r);
    }
    json_object_set_new(root, "num_stages", json_integer(p->S));
    json_object_set_new(root, "num_microbatches", json_integer(p->M));
    if (p->method)
        json_object_set_new(root, "method", json_string(p->method));
    if (isfinite(p->time_s))
        json_object_set_new(root, "time_s", json_real(p->time_s));
    if (isfinite(p->energy_j))
        json_object_set_new(root, "energy_j", json_real(p->energy_j));
    for (int s = 0; s < p->S; s++) {
        json_t *st = json_object(), *ord = json_array(), *fr = json_array();
        for (int k = 0; k < 2 * p->M; k++) {
            char nm[24];
            instr_name(p->order[(size_t)s * 2 * p->M + k], nm, sizeof nm);
            json_array_append_new(ord, json_string(nm));
            json_array_append_new(fr, json_integer(p->freqs[(size_t)s * 2 * p->M + k]));
        }
        json_object_set_new(st, "stage", json_integer(s));
        json_object_set_new(st, "order", ord);
        json_object_set_new(st, "freq_mhz", fr);
        json_array_append_new(stages, st);
    }
    json_object_set_new(root, "stages", stages);
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    size_t n = strlen(s);
    *out = erg__malloc(n + 2);
    if (!*out) {
        free(s);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    memcpy(*out, s, n);
    (*out)[n] = '\n';
    (*out)[n + 1] = '\0';
    free(s);
    return ERG_OK;
}

erg_status erg_plan_write_json(const erg_plan *p, const char *path, erg_error *err)
{
    char *s;
    erg_status st = erg_plan_format_json(p, &s, err);
    if (st)
        return st;
    st = erg__write_file(path, s, strlen(s), err);
    erg__free(s);
    return st;
}

/* "version" must be 1, the only version this reader knows (a newer writer's
 * plan must not be read as if it were version 1). */
static erg_status check_json_version(const json_t *root, const char *name, erg_error *err)
{
    const json_t *v = json_object_get(root, "version");
    if (!v)
        return erg_error_set(err, ERG_EPARSE,
                             "%s: \"version\" is missing (this reader knows ergon-plan version 1)",
                             name);
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        erg_status st = erg_error_set(err, ERG_EPARSE,
                                      "%s: unknown \"version\": %.40s (this reader knows "
                                      "ergon-plan version 1)",
                                      name, txt ? txt : "?");
        free(txt);
        return st;
    }
    return ERG_OK;
}

/* The stage that entry `pos` of "stages" describes: its "stage" field when
 * present (an integer in 0..S-1 that no other entry names), else its
 * position. Entries must all name their stage or none. */
static erg_status json_stage_of(const json_t *stages, json_int_t pos, json_int_t S,
                                json_int_t *seen_at, const char *name, json_int_t *stage,
                                erg_error *err)
{
    const json_t *e = json_array_get(stages, (size_t)pos);
    if (!json_is_object(e))
        return erg_error_set(err, ERG_EPARSE, "%s: stages[%lld] is not an object", name,
                             (long long)pos);
    const json_t *js = json_object_get(e, "stage");
    bool named0 = json_object_get(json_array_get(stages, 0), "stage") != NULL;
    if (!js != !named0)
        return erg_error_set(err, ERG_EPARSE,
                             "%s: stages[%lld] %s \"stage\" but stages[0] %s (give it in every "
                             "entry or in none)",
                             name, (long long)pos, js ? "has" : "has no", named0 ? "has" : "has not");
    if (!js) {
        *stage = pos;
        return ERG_OK;
    }
    if (!json_is_integer(js) || json_integer_value(js) < 0 || json_integer_value(js) >= S) {
        char *txt = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT);
        erg_status st = erg_error_set(err, ERG_EPARSE,
                                      "%s: stages[%lld]: \"stage\": %.40s is not a stage in "
                                      "0..%lld",
                                      name, (long long)pos, txt ? txt : "?", (long long)(S - 1));
        free(txt);
        return st;
    }
    *stage = json_integer_value(js);
    if (seen_at[*stage])
        return erg_error_set(err, ERG_EPARSE,
                             "%s: stages[%lld] and stages[%lld] are both \"stage\": %lld", name,
                             (long long)(seen_at[*stage] - 1), (long long)pos, (long long)*stage);
    seen_at[*stage] = pos + 1;
    return ERG_OK;
}

static erg_status parse_json(const char *text, size_t len, const char *name, erg_plan **out,
                             erg_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return erg_error_set(err, ERG_EPARSE, "%s:%d:%d: invalid JSON: %s", name, je.line,
                             je.column, je.text);
    erg_status st = ERG_OK;
    erg_plan *p = NULL;
    json_int_t *seen_at = NULL; /* per stage: 1 + the entry that named it, 0: none yet */
    json_t *fmt = json_object_get(root, "format");
    json_t *jS = json_object_get(root, "num_stages"), *jM = json_object_get(root, "num_microbatches");
    json_t *jsched = json_object_get(root, "schedule"), *stages = json_object_get(root, "stages");
    if (!json_is_object(root) || !json_is_string(fmt) ||
        strcmp(json_string_value(fmt), "ergon-plan") != 0) {
        st = erg_error_set(err, ERG_EPARSE, "%s: not an ergon plan (\"format\": \"ergon-plan\" "
                                            "missing)",
                           name);
        goto done;
    }
    if ((st = check_json_version(root, name, err)))
        goto done;
    if (!json_is_integer(jS) || !json_is_integer(jM) || !json_is_array(stages)) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: num_stages and num_microbatches must be integers and stages a "
                           "list",
                           name);
        goto done;
    }
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    if (jsched) {
        if (!json_is_string(jsched) ||
            erg_schedule_parse(json_string_value(jsched), &sched.kind, err) != ERG_OK) {
            st = erg_error_set(err, ERG_EPARSE, "%s: unknown schedule", name);
            goto done;
        }
    }
    json_t *mi = json_object_get(root, "max_inflight");
    if (mi && (!json_is_integer(mi) || json_integer_value(mi) < 0 ||
               json_integer_value(mi) > 65536)) {
        st = erg_error_set(err, ERG_EPARSE, "%s: max_inflight must be an integer in [0, 65536]",
                           name);
        goto done;
    }
    if (json_is_integer(mi))
        sched.max_inflight = (int)json_integer_value(mi);
    json_t *ew = json_object_get(root, "extra_warmup");
    if (ew) {
        if (!json_is_array(ew) || json_array_size(ew) > ERG_SCHED_MAX_STAGES) {
            st = erg_error_set(err, ERG_EPARSE, "%s: extra_warmup must be a list of at most %d "
                                                "integers", name, ERG_SCHED_MAX_STAGES);
            goto done;
        }
        for (size_t i = 0; i < json_array_size(ew); i++) {
            json_t *v = json_array_get(ew, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > 65536) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s: extra_warmup[%zu] must be an integer in [0, 65536]", name,
                                   i);
                goto done;
            }
            sched.extra_warmup[i] = (int)json_integer_value(v);
        }
    }
    json_int_t S = json_integer_value(jS), M = json_integer_value(jM);
    if (S < 1 || M < 1 || S > 65536 || M > 65536 || (json_int_t)json_array_size(stages) != S) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: num_stages=%lld, num_microbatches=%lld and %zu stage entries do "
                           "not agree",
                           name, (long long)S, (long long)M, json_array_size(stages));
        goto done;
    }
    st = erg_plan_new(&sched, (int)S, (int)M, &p, err);
    if (st)
        goto done;
    seen_at = erg__calloc((size_t)S, sizeof *seen_at);
    if (!seen_at) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    for (json_int_t pos = 0; pos < S; pos++) {
        json_int_t s = pos;
        if ((st = json_stage_of(stages, pos, S, seen_at, name, &s, err)))
            goto done;
        json_t *e = json_array_get(stages, (size_t)pos);
        json_t *fr = json_object_get(e, "freq_mhz");
        if (!json_is_array(fr) || (json_int_t)json_array_size(fr) != 2 * M) {
            st = erg_error_set(err, ERG_EPARSE, "%s: stage %lld needs freq_mhz with %lld clocks",
                               name, (long long)s, (long long)(2 * M));
            goto done;
        }
        for (json_int_t k = 0; k < 2 * M; k++) {
            json_t *v = json_array_get(fr, (size_t)k);
            if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
                json_integer_value(v) > 1000000) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s: stage %lld clock %lld is not a positive integer MHz", name,
                                   (long long)s, (long long)k);
                goto done;
            }
            p->freqs[s * 2 * M + k] = (int)json_integer_value(v);
        }
    }
    json_t *t = json_object_get(root, "time_s"), *en = json_object_get(root, "energy_j");
    if (json_is_number(t) && json_is_number(en))
        erg_plan_set_estimate(p, json_number_value(t), json_number_value(en));
    json_t *m = json_object_get(root, "method");
    if (json_is_string(m))
        st = erg_plan_set_method(p, json_string_value(m), err);
done:
    erg__free(seen_at);
    json_decref(root);
    if (st) {
        erg_plan_free(p);
        return st;
    }
    *out = p;
    return ERG_OK;
}

/* Zeus PFO's plan literal -- per stage a list of ("forward"|"backward",
 * clock) tuples (or lists), single or double quotes, # comments, trailing
 * commas -- rewritten as the kronos literal of its forward/backward clocks,
 * which parse_py then reads (pairs with other names are not planned and are
 * dropped). 1 = rewritten into *out, 0 = not this format, <0 = error set. */
static int zeus_to_kronos(const char *text, size_t len, const char *name, char **out,
                          erg_error *err)
{
    pyparse ps = {text, text + len, name, 1, 1, err};
    if (!py_expect(&ps, '[') || !py_expect(&ps, '['))
        return 0;
    py_skip(&ps);
    if (ps.p >= ps.end || (*ps.p != '(' && *ps.p != '['))
        return 0;
    ps = (pyparse){text, text + len, name, 1, 1, err};
    erg__buf b = {0};
    erg_status st = ERG_OK;
    py_expect(&ps, '[');
    st = erg__buf_append(&b, "[", 1);
    for (int stage = 0; !st; stage++) {
        if (py_expect(&ps, ']'))
            break;
        if (!py_expect(&ps, '[')) {
            st = py_error(&ps, "'[' opening a stage's (instruction, clock) pairs or ']'");
            break;
        }
        st = erg__buf_append(&b, stage ? ",[" : "[", stage ? 2 : 1);
        for (int k = 0; !st;) {
            if (py_expect(&ps, ']'))
                break;
            char close = py_expect(&ps, '(') ? ')' : py_expect(&ps, '[') ? ']' : 0;
            if (!close) {
                st = py_error(&ps, "'(' opening an (instruction, clock) pair");
                break;
            }
            py_skip(&ps);
            if (ps.p >= ps.end || (*ps.p != '\'' && *ps.p != '"')) {
                st = py_error(&ps, "a quoted instruction name");
                break;
            }
            char q = *ps.p++;
            const char *s0 = ps.p;
            while (ps.p < ps.end && *ps.p != q && *ps.p != '\n')
                ps.p++;
            if (ps.p >= ps.end || *ps.p != q) {
                st = py_error(&ps, "the closing quote of the instruction name");
                break;
            }
            size_t sl = (size_t)(ps.p - s0);
            ps.p++;
            bool compute = (sl == 7 && !memcmp(s0, "forward", 7)) ||
                           (sl == 8 && !memcmp(s0, "backward", 8));
            if (!py_expect(&ps, ',')) {
                st = py_error(&ps, "',' after the instruction name");
                break;
            }
            py_skip(&ps);
            const char *v0 = ps.p;
            while (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9' && ps.p - v0 < 9)
                ps.p++;
            if (ps.p == v0 || (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9')) {
                st = py_error(&ps, "a clock (a non-negative integer below 10^9)");
                break;
            }
            size_t vl = (size_t)(ps.p - v0);
            py_expect(&ps, ',');
            if (!py_expect(&ps, close)) {
                st = py_error(&ps, close == ')' ? "')' closing the pair" : "']' closing the pair");
                break;
            }
            if (compute) {
                st = k ? erg__buf_append(&b, ",", 1) : ERG_OK;
                if (!st)
                    st = erg__buf_append(&b, v0, vl);
                k++;
            }
            if (!st && !py_expect(&ps, ',') && !(py_skip(&ps), ps.p < ps.end && *ps.p == ']')) {
                st = py_error(&ps, "',' or ']' after a pair");
                break;
            }
        }
        if (!st)
            st = erg__buf_append(&b, "]", 1);
        if (!st && !py_expect(&ps, ',') && !(py_skip(&ps), ps.p < ps.end && *ps.p == ']'))
            st = py_error(&ps, "',' or ']' after a stage");
    }
    py_skip(&ps);
    if (!st && ps.p != ps.end)
        st = py_error(&ps, "only comments after the list of stages");
    if (!st)
        st = erg__buf_append(&b, "]\n", 2);
    if (st) {
        if (st == ERG_ENOMEM)
            erg_error_set(err, ERG_ENOMEM, "out of memory");
        erg__buf_free(&b);
        return -1;
    }
    *out = b.data;
    return 1;
}

erg_status erg_plan_parse(const char *text, size_t len, const char *name,
                          const erg_schedule *hint, erg_plan **out, erg_error *err)
{
    *out = NULL;
    if (!name)
        name = "<plan>";
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
        i++;
    if (i < len && text[i] == '{')
        return parse_json(text, len, name, out, err);
    char *kronos = NULL;
    int z = zeus_to_kronos(text, len, name, &kronos, err);
    if (z < 0)
        return err->status ? err->status : ERG_EPARSE;
    if (z > 0) {
        erg_status st = parse_py(kronos, strlen(kronos), name, hint, out, err);
        erg__free(kronos);
        return st;
    }
    return parse_py(text, len, name, hint, out, err);
}

erg_status erg_plan_read(const char *path, const erg_schedule *hint, erg_plan **out,
                         erg_error *err)
{
    char *text;
    size_t len;
    *out = NULL;
    erg_status st = erg__read_file(path, ERG_MAX_PLAN_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg_plan_parse(text, len, path, hint, out, err);
    erg__free(text);
    return st;
}

/* plan.c: the plan container and its JSON and freqs_pipeline .py formats. */
#include "core/internal.h"
#include "ergon/plan.h"
#include "plan/plan_literal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ERG_MAX_PLAN_BYTES (64u << 20)

struct erg_plan {
    erg_schedule sched; /* for ERG_SCHED_FILE, .order points to `order` */
    int S, M;           /* ranks (plan "stages"), microbatches */
    erg_order *order;   /* each rank's instructions */
    int *off;           /* [S+1] first clock of each rank */
    int *freqs;         /* clocks, rank by rank, in execution order */
    double time_s, energy_j;
    char *method;
    /* provenance (erg_plan_set_provenance): NULL / NAN when unknown */
    char *profile_fp, *clock_table;
    double power_w;
    int stated_kind;                /* the schedule the file named, -1 when none */
    double avg_w, peak_w, trough_w; /* the plan's power (erg_plan_set_power), NAN: unknown */
};

erg_status erg_plan_new(const erg_schedule *sched, int S, int M, erg_plan **out, erg_error *err)
{
    *out = NULL;
    erg_schedule def = {.kind = ERG_SCHED_1F1B};
    if (!sched)
        sched = &def;
    if (sched->kind == ERG_SCHED_FILE && sched->order) {
        if (!S)
            S = erg_order_num_ranks(sched->order);
        if (!M)
            M = erg_order_num_microbatches(sched->order);
    }
    if (S < 1 || M < 1 || (long long)S * M > (1 << 22))
        return erg_error_set(err, ERG_EINVAL, "plan size out of range: S=%d, M=%d", S, M);
    erg_plan *p = erg__calloc(1, sizeof(*p));
    if (!p)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    p->sched = *sched;
    p->S = S;
    p->M = M;
    p->time_s = p->energy_j = NAN;
    p->power_w = NAN;
    p->avg_w = p->peak_w = p->trough_w = NAN;
    p->stated_kind = -1;
    erg_status st = erg_order_new(sched, S, M, &p->order, err);
    if (st) {
        erg_plan_free(p);
        return st;
    }
    if (sched->kind == ERG_SCHED_FILE)
        p->sched.order = p->order;
    p->sched.chunks = erg_schedule_chunks(sched);
    p->off = erg__calloc((size_t)S + 1, sizeof(int));
    if (!p->off) {
        erg_plan_free(p);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int s = 0; s < S; s++) {
        const erg_instr *v;
        p->off[s + 1] = p->off[s] + erg_order_rank(p->order, s, &v);
    }
    p->freqs = erg__calloc((size_t)p->off[S] + 1, sizeof(int));
    if (!p->freqs) {
        erg_plan_free(p);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = p;
    return ERG_OK;
}

erg_status erg_plan_copy(const erg_plan *src, erg_plan **out, erg_error *err)
{
    erg_status st = erg_plan_new(&src->sched, src->S, src->M, out, err);
    if (st)
        return st;
    memcpy((*out)->freqs, src->freqs, (size_t)src->off[src->S] * sizeof(int));
    (*out)->time_s = src->time_s;
    (*out)->energy_j = src->energy_j;
    (*out)->stated_kind = src->stated_kind;
    erg_plan_set_power(*out, src->avg_w, src->peak_w, src->trough_w);
    if (src->profile_fp || src->clock_table || !isnan(src->power_w)) {
        st = erg_plan_set_provenance(*out, src->profile_fp, src->power_w, src->clock_table, err);
        if (st)
            return st;
    }
    if (src->method)
        return erg_plan_set_method(*out, src->method, err);
    return ERG_OK;
}

void erg_plan_free(erg_plan *p)
{
    if (!p)
        return;
    erg__free(p->freqs);
    erg__free(p->off);
    erg_order_free(p->order);
    erg__free(p->method);
    erg__free(p->profile_fp);
    erg__free(p->clock_table);
    erg__free(p);
}

static char *dup_or_null(const char *v)
{
    if (!v)
        return NULL;
    size_t n = strlen(v);
    char *d = erg__malloc(n + 1);
    if (d)
        memcpy(d, v, n + 1);
    return d;
}

erg_status erg_plan_set_provenance(erg_plan *p, const char *fp, double power_w,
                                   const char *clock_table, erg_error *err)
{
    char *a = dup_or_null(fp), *b = dup_or_null(clock_table);
    if ((fp && !a) || (clock_table && !b)) {
        erg__free(a);
        erg__free(b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    erg__free(p->profile_fp);
    erg__free(p->clock_table);
    p->profile_fp = a;
    p->clock_table = b;
    p->power_w = power_w;
    return ERG_OK;
}

const char *erg_plan_profile_fingerprint(const erg_plan *p)
{
    return p ? p->profile_fp : NULL;
}

double erg_plan_blocking_power(const erg_plan *p)
{
    return p ? p->power_w : NAN;
}

const char *erg_plan_clock_table(const erg_plan *p)
{
    return p ? p->clock_table : NULL;
}

bool erg_plan_schedule_stated(const erg_plan *p, erg_schedule_kind *kind)
{
    if (!p || p->stated_kind < 0)
        return false;
    if (kind)
        *kind = (erg_schedule_kind)p->stated_kind;
    return true;
}

/* The provenance as a JSON object (NULL when the plan has none). */
static json_t *provenance_json(const erg_plan *p, bool with_schedule)
{
    if (!p->profile_fp && !p->clock_table && isnan(p->power_w))
        return NULL;
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (p->profile_fp)
        json_object_set_new(o, "profile_fingerprint", json_string(p->profile_fp));
    if (!isnan(p->power_w))
        json_object_set_new(o, "blocking_power_w", json_real(p->power_w));
    if (p->clock_table)
        json_object_set_new(o, "clock_table", json_string(p->clock_table));
    if (with_schedule) {
        json_object_set_new(o, "schedule", json_string(erg_schedule_name(p->sched.kind)));
        json_object_set_new(o, "num_stages", json_integer(p->S));
        json_object_set_new(o, "num_microbatches", json_integer(p->M));
    }
    return o;
}

/* Read a "provenance" object (JSON plans, or the .py comment line). */
static erg_status provenance_read(erg_plan *p, const json_t *o, const char *name, erg_error *err)
{
    if (!json_is_object(o))
        return erg_error_set(err, ERG_EPARSE, "%s: \"provenance\" is not an object", name);
    const json_t *fp = json_object_get(o, "profile_fingerprint");
    const json_t *pw = json_object_get(o, "blocking_power_w");
    const json_t *ct = json_object_get(o, "clock_table");
    if ((fp && !json_is_string(fp)) || (pw && !json_is_number(pw)) || (ct && !json_is_string(ct)))
        return erg_error_set(err, ERG_EPARSE,
                             "%s: provenance: profile_fingerprint and clock_table are strings, "
                             "blocking_power_w a number",
                             name);
    const json_t *sk = json_object_get(o, "schedule");
    if (json_is_string(sk)) {
        erg_schedule_kind k;
        if (erg_schedule_parse(json_string_value(sk), &k, NULL) == ERG_OK)
            p->stated_kind = (int)k;
    }
    return erg_plan_set_provenance(p, fp ? json_string_value(fp) : NULL,
                                   pw ? json_number_value(pw) : NAN,
                                   ct ? json_string_value(ct) : NULL, err);
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
const erg_schedule *erg_plan_schedule_ref(const erg_plan *p)
{
    return &p->sched;
}
const erg_order *erg_plan_order(const erg_plan *p)
{
    return p->order;
}
int erg_plan_stage_len(const erg_plan *p, int s)
{
    return s >= 0 && s < p->S ? p->off[s + 1] - p->off[s] : 0;
}
int *erg_plan_stage_freqs(erg_plan *p, int s)
{
    return s >= 0 && s < p->S ? p->freqs + p->off[s] : NULL;
}
const int *erg_plan_stage_freqs_const(const erg_plan *p, int s)
{
    return s >= 0 && s < p->S ? p->freqs + p->off[s] : NULL;
}

int erg_plan_freq(const erg_plan *p, int s, erg_instr_kind kind, int mb)
{
    if (s < 0 || s >= p->S || mb < 0 || mb >= p->M)
        return 0;
    const erg_instr *o;
    int n = erg_order_rank(p->order, s, &o);
    for (int k = 0; k < n; k++)
        if (o[k].kind == kind && o[k].microbatch == mb)
            return p->freqs[p->off[s] + k];
    return 0;
}

void erg_plan_fill(erg_plan *p, int f)
{
    for (size_t i = 0; i < (size_t)p->off[p->S]; i++)
        p->freqs[i] = f;
}

void erg_plan_set_estimate(erg_plan *p, double t, double e)
{
    p->time_s = t;
    p->energy_j = e;
}

void erg_plan_set_power(erg_plan *p, double avg_w, double peak_w, double trough_w)
{
    p->avg_w = avg_w;
    p->peak_w = peak_w;
    p->trough_w = trough_w;
}

void erg_plan_power(const erg_plan *p, double *avg_w, double *peak_w, double *trough_w)
{
    if (avg_w)
        *avg_w = p->avg_w;
    if (peak_w)
        *peak_w = p->peak_w;
    if (trough_w)
        *trough_w = p->trough_w;
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

/* The comment line of .py plans that carries the provenance (a JSON object after it). */
#define ERG__PY_PROVENANCE "# ergon provenance: "

erg_status erg_plan_format_py(const erg_plan *p, const char *trailer, char **out, erg_error *err)
{
    erg__buf b = {0};
    erg_status st = erg__buf_append(&b, "[\n", 2);
    char num[16];
    for (int s = 0; s < p->S && !st; s++) {
        st = erg__buf_append(&b, "[", 1);
        const int *f = p->freqs + p->off[s];
        for (int k = 0; k < p->off[s + 1] - p->off[s] && !st; k++) {
            int n = snprintf(num, sizeof num, k ? ", %d" : "%d", f[k]);
            st = erg__buf_append(&b, num, (size_t)n);
        }
        if (!st)
            st = erg__buf_append(&b, "],\n", 3);
    }
    if (!st)
        st = erg__buf_append(&b, "]\n", 2);
    json_t *prov = st ? NULL : provenance_json(p, true);
    if (prov) {
        char *js = json_dumps(prov, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(prov);
        if (!js)
            st = ERG_ENOMEM;
        if (!st)
            st = erg__buf_append(&b, ERG__PY_PROVENANCE, strlen(ERG__PY_PROVENANCE));
        if (!st)
            st = erg__buf_append(&b, js, strlen(js));
        if (!st)
            st = erg__buf_append(&b, "\n", 1);
        free(js);
    }
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

/* The plan of `hint`'s schedule whose rank lengths are `lens`: the
 * microbatch count is the one whose orders have these lengths. */
static erg_status plan_from_rows(const erg_schedule *hint, int rows, const int *lens,
                                 const int *vals, const char *name, erg_plan **out, erg_error *err)
{
    erg_schedule def = {.kind = ERG_SCHED_1F1B};
    if (!hint)
        hint = &def;
    long total = 0;
    for (int r = 0; r < rows; r++)
        total += lens[r];
    erg_plan *p = NULL;
    erg_status st = ERG_OK;
    erg_error e2;
    if (hint->kind == ERG_SCHED_FILE) {
        st = erg_plan_new(hint, rows, 0, &p, err);
        if (st)
            return st;
    } else {
        /* Rank lengths grow with M: try M = 1, 2, ... until the total fits. */
        for (int M = 1; M <= total; M++) {
            st = erg_plan_new(hint, rows, M, &p, &e2);
            if (st == ERG_ENOMEM) {
                *err = e2;
                return st;
            }
            if (st)
                continue;
            if (p->off[rows] >= total)
                break;
            erg_plan_free(p);
            p = NULL;
        }
        if (!p)
            return erg_error_set(err, ERG_EPARSE,
                                 "%s: %d stages with %ld clocks fit no microbatch count of "
                                 "schedule %s",
                                 name, rows, total, erg_schedule_name(hint->kind));
    }
    for (int r = 0; r < rows; r++)
        if (p->off[r + 1] - p->off[r] != lens[r]) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s: stage %d has %d clocks but schedule %s with M=%d runs %d "
                               "instructions there",
                               name, r, lens[r], erg_schedule_name(hint->kind), p->M,
                               p->off[r + 1] - p->off[r]);
            erg_plan_free(p);
            return st;
        }
    memcpy(p->freqs, vals, (size_t)total * sizeof(int));
    *out = p;
    return ERG_OK;
}

static erg_status parse_py(const char *text, size_t len, const char *name, const erg_schedule *hint,
                           erg_plan **out, erg_error *err)
{
    pyparse ps = {text, text + len, name, 1, 1, err};
    int *vals = NULL;
    size_t nv = 0, cap = 0;
    int rows = 0, rcap = 0;
    int *rowlens = NULL;
    erg_status st = ERG_OK;
    if (!py_expect(&ps, '[')) {
        st = py_error(&ps, "'[' opening the list of stages");
        goto done;
    }
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
            if (!ERG__GROW(vals, cap, nv + 1, 256)) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto done;
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
        if (rows >= 65536) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: more than 65536 stages", name, ps.line);
            goto done;
        }
        if (rows == rcap) {
            size_t nc = erg__grow_cap((size_t)rcap, (size_t)rows + 1, 16);
            int *d = erg__reallocarray(rowlens, nc, sizeof(int));
            if (!d) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto done;
            }
            rowlens = d;
            rcap = (int)nc;
        }
        rowlens[rows] = count;
        /* One-stage-per-rank F/B schedules: every stage has 2M clocks. */
        int fb = !hint || (hint->kind != ERG_SCHED_FILE && erg_schedule_chunks(hint) == 1);
        if (fb && rows > 0 && count != rowlens[0]) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: stage %d has %d clocks but stage 0 has %d",
                               name, ps.line, rows, count, rowlens[0]);
            goto done;
        }
        if (fb && count % 2) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: stage %d has %d clocks; expected 2 per microbatch", name,
                               ps.line, rows, count);
            goto done;
        }
        if (count == 0) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: stage %d has no clocks", name, ps.line,
                               rows);
            goto done;
        }
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
    st = plan_from_rows(hint, rows, rowlens, vals, name, out, err);
done:
    erg__free(vals);
    erg__free(rowlens);
    return st;
}

/* ---- JSON ---- */

/* Action names: "F0"/"B0" for the one-stage-per-rank F/B schedules (as
 * before), PyTorch's "2I1", "(0F7;7B3)OVERLAP_F_B" otherwise. */
static int plan_short_names(const erg_plan *p)
{
    return erg_schedule_chunks(&p->sched) == 1 && p->sched.kind != ERG_SCHED_FILE;
}

static void instr_name(const erg_plan *p, erg_instr in, char *buf, size_t n)
{
    if (plan_short_names(p))
        snprintf(buf, n, "%c%d", in.kind == ERG_FORWARD ? 'F' : 'B', in.microbatch);
    else
        erg_instr_format(in, buf, n);
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
    if (!plan_short_names(p)) {
        json_object_set_new(root, "backward_split",
                            json_real(erg_schedule_backward_split(&p->sched)));
        json_object_set_new(root, "num_chunks", json_integer(erg_schedule_chunks(&p->sched)));
        json_object_set_new(root, "num_pipeline_stages",
                            json_integer(erg_order_num_stages(p->order)));
    }
    if (p->method)
        json_object_set_new(root, "method", json_string(p->method));
    json_t *prov = provenance_json(p, false);
    if (prov)
        json_object_set_new(root, "provenance", prov);
    if (isfinite(p->time_s))
        json_object_set_new(root, "time_s", json_real(p->time_s));
    if (isfinite(p->energy_j))
        json_object_set_new(root, "energy_j", json_real(p->energy_j));
    if (isfinite(p->avg_w) && isfinite(p->peak_w) && isfinite(p->trough_w))
        json_object_set_new(root, "power",
                            json_pack("{s:f,s:f,s:f}", "avg_w", p->avg_w, "peak_w", p->peak_w,
                                      "trough_w", p->trough_w));
    for (int s = 0; s < p->S; s++) {
        json_t *st = json_object(), *ord = json_array(), *fr = json_array();
        const erg_instr *o;
        int n = erg_order_rank(p->order, s, &o);
        for (int k = 0; k < n; k++) {
            char nm[64];
            instr_name(p, o[k], nm, sizeof nm);
            json_array_append_new(ord, json_string(nm));
            json_array_append_new(fr, json_integer(p->freqs[p->off[s] + k]));
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
                             name, (long long)pos, js ? "has" : "has no",
                             named0 ? "has" : "has not");
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
    json_t *jS = json_object_get(root, "num_stages"),
           *jM = json_object_get(root, "num_microbatches");
    json_t *jsched = json_object_get(root, "schedule"), *stages = json_object_get(root, "stages");
    if (!json_is_object(root) || !json_is_string(fmt) ||
        strcmp(json_string_value(fmt), "ergon-plan") != 0) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: not an ergon plan (\"format\": \"ergon-plan\" "
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
        if (json_is_string(jsched) && !strcmp(json_string_value(jsched), "file"))
            sched.kind = ERG_SCHED_FILE;
        else if (!json_is_string(jsched) ||
                 erg_schedule_parse(json_string_value(jsched), &sched.kind, err) != ERG_OK) {
            st = erg_error_set(err, ERG_EPARSE, "%s: unknown schedule", name);
            goto done;
        }
    }
    json_t *jV = json_object_get(root, "num_chunks");
    if (jV) {
        if (!json_is_integer(jV) || json_integer_value(jV) < 1 || json_integer_value(jV) > 64) {
            st = erg_error_set(err, ERG_EPARSE, "%s: num_chunks must be an integer in [1, 64]",
                               name);
            goto done;
        }
        sched.chunks = (int)json_integer_value(jV);
    }
    json_t *jx = json_object_get(root, "backward_split");
    if (jx) {
        if (!json_is_number(jx) || !(json_number_value(jx) > 0 && json_number_value(jx) < 1)) {
            st = erg_error_set(err, ERG_EPARSE, "%s: backward_split must be a number in (0, 1)",
                               name);
            goto done;
        }
        sched.backward_split = json_number_value(jx);
    }
    json_t *mi = json_object_get(root, "max_inflight");
    if (mi &&
        (!json_is_integer(mi) || json_integer_value(mi) < 0 || json_integer_value(mi) > 65536)) {
        st = erg_error_set(err, ERG_EPARSE, "%s: max_inflight must be an integer in [0, 65536]",
                           name);
        goto done;
    }
    if (json_is_integer(mi))
        sched.max_inflight = (int)json_integer_value(mi);
    json_t *ew = json_object_get(root, "extra_warmup");
    if (ew) {
        if (!json_is_array(ew) || json_array_size(ew) > ERG_SCHED_MAX_STAGES) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s: extra_warmup must be a list of at most %d "
                               "integers",
                               name, ERG_SCHED_MAX_STAGES);
            goto done;
        }
        for (size_t i = 0; i < json_array_size(ew); i++) {
            json_t *v = json_array_get(ew, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65536) {
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
    if (sched.kind == ERG_SCHED_FILE) {
        /* The order is the plan's own: each stage's "order" is a torch CSV row. */
        erg__buf b = {0};
        for (json_int_t s = 0; s < S && !st; s++) {
            json_t *ord = json_object_get(json_array_get(stages, (size_t)s), "order");
            if (!json_is_array(ord)) {
                st = erg_error_set(err, ERG_EPARSE, "%s: stage %lld has no order list", name,
                                   (long long)s);
                break;
            }
            for (size_t k = 0; k < json_array_size(ord) && !st; k++) {
                json_t *a = json_array_get(ord, k);
                if (!json_is_string(a) || strchr(json_string_value(a), ',') ||
                    strchr(json_string_value(a), '\n'))
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s: stage %lld order[%zu] is not an action string", name,
                                       (long long)s, k);
                else if (erg__buf_printf(&b, k ? ",%s" : "%s", json_string_value(a)))
                    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            }
            if (!st && erg__buf_append(&b, "\n", 1))
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        erg_order *o = NULL;
        if (!st)
            st = erg_order_parse_csv(b.data ? b.data : "", b.len, name, &o, err);
        erg__buf_free(&b);
        if (st)
            goto done;
        sched.order = o;
        st = erg_plan_new(&sched, (int)S, (int)M, &p, err);
        erg_order_free(o);
    } else {
        st = erg_plan_new(&sched, (int)S, (int)M, &p, err);
    }
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
        json_int_t nclk = p->off[s + 1] - p->off[s];
        if (!json_is_array(fr) || (json_int_t)json_array_size(fr) != nclk) {
            st = erg_error_set(err, ERG_EPARSE, "%s: stage %lld needs freq_mhz with %lld clocks",
                               name, (long long)s, (long long)nclk);
            goto done;
        }
        for (json_int_t k = 0; k < nclk; k++) {
            json_t *v = json_array_get(fr, (size_t)k);
            if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
                json_integer_value(v) > 1000000) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s: stage %lld clock %lld is not a positive integer MHz", name,
                                   (long long)s, (long long)k);
                goto done;
            }
            p->freqs[p->off[s] + k] = (int)json_integer_value(v);
        }
    }
    json_t *t = json_object_get(root, "time_s"), *en = json_object_get(root, "energy_j");
    if (json_is_number(t) && json_is_number(en))
        erg_plan_set_estimate(p, json_number_value(t), json_number_value(en));
    json_t *pw = json_object_get(root, "power");
    if (pw) {
        json_t *a = json_object_get(pw, "avg_w"), *pk = json_object_get(pw, "peak_w"),
               *tr = json_object_get(pw, "trough_w");
        if (!json_is_number(a) || !json_is_number(pk) || !json_is_number(tr)) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s: \"power\" must be an object of numbers avg_w, peak_w, "
                               "trough_w",
                               name);
            goto done;
        }
        erg_plan_set_power(p, json_number_value(a), json_number_value(pk), json_number_value(tr));
    }
    json_t *m = json_object_get(root, "method");
    if (json_is_string(m))
        st = erg_plan_set_method(p, json_string_value(m), err);
    p->stated_kind = (int)p->sched.kind;
    json_t *pv = json_object_get(root, "provenance");
    if (!st && pv)
        st = provenance_read(p, pv, name, err);
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

/* A .py plan's "# ergon provenance: {...}" comment line, if any (at the start of a line). */
static erg_status py_provenance(const char *text, size_t len, const char *name, erg_plan *p,
                                erg_error *err)
{
    const size_t kl = strlen(ERG__PY_PROVENANCE);
    for (size_t i = 0; i + kl <= len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && !memcmp(text + i, ERG__PY_PROVENANCE, kl)) {
            size_t a = i + kl, b = a;
            while (b < len && text[b] != '\n')
                b++;
            json_error_t je;
            json_t *o = json_loadb(text + a, b - a, 0, &je);
            if (!o)
                return erg_error_set(err, ERG_EPARSE, "%s: provenance comment: %s", name, je.text);
            erg_status st = provenance_read(p, o, name, err);
            json_decref(o);
            return st;
        }
    }
    return ERG_OK;
}

erg_status erg_plan_parse(const char *text, size_t len, const char *name, const erg_schedule *hint,
                          erg_plan **out, erg_error *err)
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
    int z = erg__plan_zeus_to_kronos(text, len, name, &kronos, err);
    if (z < 0)
        return err->status ? err->status : ERG_EPARSE;
    if (z > 0) {
        erg_status st = parse_py(kronos, strlen(kronos), name, hint, out, err);
        erg__free(kronos);
        return st;
    }
    /* a provenance line that names another schedule than the one asked for: say so, rather
     * than fail to fit the rows to the wrong schedule */
    if (hint) {
        erg_plan *probe = NULL;
        if (!erg_plan_new(NULL, 1, 1, &probe, NULL)) {
            erg_schedule_kind k;
            erg_error e2;
            if (!py_provenance(text, len, name, probe, &e2) &&
                erg_plan_schedule_stated(probe, &k) && k != hint->kind) {
                erg_plan_free(probe);
                return erg_error_set(err, ERG_EINVAL,
                                     "%s is a plan for the %s schedule (its provenance line), "
                                     "but it was to be read as %s",
                                     name, erg_schedule_name(k), erg_schedule_name(hint->kind));
            }
            erg_plan_free(probe);
        }
    }
    erg_status st = parse_py(text, len, name, hint, out, err);
    if (!st)
        st = py_provenance(text, len, name, *out, err);
    if (st && *out) {
        erg_plan_free(*out);
        *out = NULL;
    }
    return st;
}

erg_status erg_plan_read(const char *path, const erg_schedule *hint, erg_plan **out, erg_error *err)
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

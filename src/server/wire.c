/* wire.c: the server's wire types: instruction names, Python-compatible JSON output, measurement
 * results, plan files (parsed by plan.c: erg_plan_parse, erg_plan_pairs_parse). */
#include "server/server_internal.h"

#include "ergon/plan.h"

#include <math.h>
#include <string.h>

const char *const erg__srv_instr_names[SRV_NUM_INSTR] = {
    "load",
    "forward",
    "backward",
    "p2p",
    "cc",
    "step",
    "low",
    "high",
    "other",
    "pure_backward",
    "backward_input",
    "backward_weight",
    "overlap_f_b",
};

int erg__srv_instr_is_compute(int code)
{
    return code == SRV_I_FORWARD || code == SRV_I_BACKWARD || code == SRV_I_BACKWARD_INPUT ||
           code == SRV_I_BACKWARD_WEIGHT || code == SRV_I_OVERLAP_F_B;
}

int erg__srv_instr_code(const char *name)
{
    for (int i = 0; i < SRV_NUM_INSTR; i++)
        if (!strcmp(name, erg__srv_instr_names[i]))
            return i;
    return -1;
}

const char *erg__srv_mode_name(int mode)
{
    return mode == SRV_MODE_POWER ? "power limit" : "frequency";
}

bool erg__srv_json_get_int(const json_t *o, const char *k, long lo, long hi, long *out, char *why,
                           size_t wn)
{
    const json_t *v = json_object_get(o, k);
    if (!v) {
        snprintf(why, wn, "field %s is missing", k);
        return false;
    }
    if (!json_is_integer(v)) {
        snprintf(why, wn, "field %s must be an integer", k);
        return false;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(why, wn, "field %s = %lld is out of range [%ld, %ld]", k, x, lo, hi);
        return false;
    }
    *out = (long)x;
    return true;
}

/* ---- Python json.dumps compatible output ---- */

static bool named(const char *const *names, const char *k)
{
    for (; names && *names; names++)
        if (!strcmp(*names, k))
            return true;
    return false;
}

int erg__srv_jobinfo_add_unknown(json_t *rec, const json_t *in, const char *const *skip,
                                 char *dropped, size_t dn)
{
    size_t used = 0, dl = 0;
    int n_dropped = 0;
    if (dn)
        dropped[0] = 0;
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)in, k, x)
    {
        if (json_object_get(rec, k) || named(skip, k))
            continue;
        /* "key":value, as the record's text holds it (json_dumpb counts without a buffer) */
        size_t text = json_dumpb(x, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
        size_t size = text + strlen(k) + 4;
        if (text && used + size <= SRV_JOBINFO_UNKNOWN_MAX_BYTES && !json_object_set(rec, k, x)) {
            used += size;
            continue;
        }
        n_dropped++;
        if (dl < dn) {
            int w =
                snprintf(dropped + dl, dn - dl, "%s\"%.64s\" (%zu bytes)", dl ? ", " : "", k, size);
            dl = w < 0 ? dn : ERG__MIN(dn, dl + (size_t)w);
        }
    }
    return n_dropped;
}

static erg_status put(erg__buf *b, const char *s)
{
    return erg__buf_append(b, s, strlen(s));
}

/* Decode one UTF-8 code point; returns bytes used (0 on bad input). */
static int utf8_decode(const unsigned char *s, size_t n, unsigned *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    int len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    unsigned v = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

static erg_status put_string(erg__buf *b, const char *s, size_t n)
{
    erg_status st = put(b, "\"");
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (!st && i < n) {
        unsigned c = p[i];
        char tmp[16];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            st = erg__buf_append(b, tmp, 2);
            i++;
        } else if (c == '\n') {
            st = put(b, "\\n"), i++;
        } else if (c == '\r') {
            st = put(b, "\\r"), i++;
        } else if (c == '\t') {
            st = put(b, "\\t"), i++;
        } else if (c == '\b') {
            st = put(b, "\\b"), i++;
        } else if (c == '\f') {
            st = put(b, "\\f"), i++;
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            st = put(b, tmp), i++;
        } else if (c < 0x80) {
            st = erg__buf_append(b, (const char *)p + i, 1), i++;
        } else {
            unsigned cp;
            int used = utf8_decode(p + i, n - i, &cp);
            if (!used) {
                cp = 0xFFFD;
                used = 1;
            }
            if (cp >= 0x10000) {
                unsigned v = cp - 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                         0xDC00 + (v & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            st = put(b, tmp);
            i += (size_t)used;
        }
    }
    return st ? st : put(b, "\"");
}

erg_status erg__srv_json_py(const json_t *v, erg__buf *out)
{
    char num[64];
    erg_status st = ERG_OK;
    switch (json_typeof(v)) {
    case JSON_NULL:
        return put(out, "null");
    case JSON_TRUE:
        return put(out, "true");
    case JSON_FALSE:
        return put(out, "false");
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return put(out, num);
    case JSON_REAL:
        return put(out, erg__fmt_double_py(json_real_value(v), num, sizeof num));
    case JSON_STRING:
        return put_string(out, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        st = put(out, "[");
        for (size_t i = 0; !st && i < json_array_size(v); i++) {
            if (i)
                st = put(out, ", ");
            if (!st)
                st = erg__srv_json_py(json_array_get(v, i), out);
        }
        return st ? st : put(out, "]");
    }
    case JSON_OBJECT: {
        st = put(out, "{");
        const char *key;
        json_t *val;
        bool first = true;
        json_object_foreach((json_t *)v, key, val)
        {
            if (st)
                break;
            if (!first)
                st = put(out, ", ");
            first = false;
            if (!st)
                st = put_string(out, key, strlen(key));
            if (!st)
                st = put(out, ": ");
            if (!st)
                st = erg__srv_json_py(val, out);
        }
        return st ? st : put(out, "}");
    }
    }
    return ERG_EINTERNAL;
}

int erg__srv_json_depth(const char *s, size_t len)
{
    int depth = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

/* ---- results ---- */

static void series_free(srv_series *s)
{
    for (int i = 0; i < s->n_iters; i++)
        erg__free(s->vals[i]);
    erg__free(s->vals);
    erg__free(s->n_occ);
    memset(s, 0, sizeof *s);
}

void erg__srv_result_free(srv_result *r)
{
    if (!r)
        return;
    erg__free(r->iter_time_s);
    erg__free(r->iter_energy_j);
    for (int i = 0; i < SRV_NUM_INSTR; i++) {
        series_free(&r->time_bd[i]);
        series_free(&r->energy_bd[i]);
        series_free(&r->wait_bd[i]);
    }
    memset(r, 0, sizeof *r);
}

static erg_status series_copy(const srv_series *in, srv_series *out)
{
    memset(out, 0, sizeof *out);
    if (!in->n_iters)
        return ERG_OK;
    out->vals = erg__calloc((size_t)in->n_iters, sizeof *out->vals);
    out->n_occ = erg__calloc((size_t)in->n_iters, sizeof *out->n_occ);
    if (!out->vals || !out->n_occ)
        return ERG_ENOMEM;
    for (int i = 0; i < in->n_iters; i++) {
        out->vals[i] = erg__malloc(((size_t)in->n_occ[i] + 1) * sizeof(double));
        if (!out->vals[i])
            return ERG_ENOMEM;
        memcpy(out->vals[i], in->vals[i], (size_t)in->n_occ[i] * sizeof(double));
        out->n_occ[i] = in->n_occ[i];
        out->n_iters = i + 1;
    }
    return ERG_OK;
}

erg_status erg__srv_result_copy(const srv_result *in, srv_result *out)
{
    memset(out, 0, sizeof *out);
    size_t n = (size_t)in->n_iters + 1;
    out->iter_time_s = erg__malloc(n * sizeof(double));
    out->iter_energy_j = erg__malloc(n * sizeof(double));
    if (!out->iter_time_s || !out->iter_energy_j)
        goto oom;
    memcpy(out->iter_time_s, in->iter_time_s, (size_t)in->n_iters * sizeof(double));
    memcpy(out->iter_energy_j, in->iter_energy_j, (size_t)in->n_iters * sizeof(double));
    out->n_iters = in->n_iters;
    for (int c = 0; c < SRV_NUM_INSTR; c++)
        if (series_copy(&in->time_bd[c], &out->time_bd[c]) ||
            series_copy(&in->energy_bd[c], &out->energy_bd[c]) ||
            series_copy(&in->wait_bd[c], &out->wait_bd[c]))
            goto oom;
    return ERG_OK;
oom:
    erg__srv_result_free(out);
    return ERG_ENOMEM;
}

static erg_status number_array(const json_t *a, const char *what, double **out, int *n,
                               erg_error *err)
{
    if (!json_is_array(a))
        return erg_error_set(err, ERG_EPARSE, "%s must be a list of numbers", what);
    size_t len = json_array_size(a);
    if (len > 10000000)
        return erg_error_set(err, ERG_EPARSE, "%s is too long (%zu)", what, len);
    double *v = erg__calloc(len ? len : 1, sizeof *v);
    if (!v)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) {
        const json_t *x = json_array_get(a, i);
        if (!json_is_number(x)) {
            erg__free(v);
            return erg_error_set(err, ERG_EPARSE, "%s[%zu] is not a number", what, i);
        }
        v[i] = json_number_value(x);
    }
    *out = v;
    *n = (int)len;
    return ERG_OK;
}

static erg_status breakdown(const json_t *obj, const char *what, srv_series *bd, erg_error *err)
{
    if (!json_is_object(obj))
        return erg_error_set(err, ERG_EPARSE, "%s must be an object of instruction -> lists", what);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        int code = erg__srv_instr_code(key);
        if (code < 0)
            return erg_error_set(err, ERG_EPARSE, "%s: '%.64s' is not a pipe instruction", what,
                                 key);
        if (!json_is_array(val))
            return erg_error_set(err, ERG_EPARSE, "%s.%s must be a list of lists", what, key);
        srv_series *s = &bd[code];
        size_t n = json_array_size(val);
        if (n > 1000000)
            return erg_error_set(err, ERG_EPARSE, "%s.%s is too long", what, key);
        s->vals = erg__calloc(n ? n : 1, sizeof *s->vals);
        s->n_occ = erg__calloc(n ? n : 1, sizeof *s->n_occ);
        if (!s->vals || !s->n_occ)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            char name[96];
            snprintf(name, sizeof name, "%s.%s[%zu]", what, key, i);
            erg_status st =
                number_array(json_array_get(val, i), name, &s->vals[i], &s->n_occ[i], err);
            if (st)
                return st;
            s->n_iters++;
        }
    }
    return ERG_OK;
}

erg_status erg__srv_result_from_json(const json_t *obj, srv_result *r, erg_error *err)
{
    memset(r, 0, sizeof *r);
    int nt = 0, ne = 0;
    erg_status st =
        number_array(json_object_get(obj, "iter_time"), "iter_time", &r->iter_time_s, &nt, err);
    if (!st)
        st = number_array(json_object_get(obj, "iter_energy"), "iter_energy", &r->iter_energy_j,
                          &ne, err);
    if (!st && nt != ne)
        st = erg_error_set(err, ERG_EPARSE,
                           "iter_time has %d entries but iter_energy has %d; both must have one "
                           "per iteration",
                           nt, ne);
    if (!st && nt == 0)
        st = erg_error_set(err, ERG_EPARSE, "iter_time is empty");
    r->n_iters = nt;
    if (!st && json_object_get(obj, "time_breakdown"))
        st = breakdown(json_object_get(obj, "time_breakdown"), "time_breakdown", r->time_bd, err);
    if (!st && json_object_get(obj, "energy_breakdown"))
        st = breakdown(json_object_get(obj, "energy_breakdown"), "energy_breakdown", r->energy_bd,
                       err);
    if (!st && json_object_get(obj, "wait_breakdown"))
        st = breakdown(json_object_get(obj, "wait_breakdown"), "wait_breakdown", r->wait_bd, err);
    if (st)
        erg__srv_result_free(r);
    return st;
}

static erg_status series_aggregate(const srv_series *const *in, int n, bool sum, srv_series *out)
{
    int iters = in[0]->n_iters;
    for (int g = 1; g < n; g++)
        iters = ERG__MIN(iters, in[g]->n_iters);
    if (iters == 0)
        return ERG_OK;
    out->vals = erg__calloc((size_t)iters, sizeof *out->vals);
    out->n_occ = erg__calloc((size_t)iters, sizeof *out->n_occ);
    if (!out->vals || !out->n_occ)
        return ERG_ENOMEM;
    out->n_iters = iters;
    for (int i = 0; i < iters; i++) {
        int occ = in[0]->n_occ[i];
        for (int g = 1; g < n; g++)
            occ = ERG__MIN(occ, in[g]->n_occ[i]);
        out->vals[i] = erg__calloc(occ ? (size_t)occ : 1, sizeof(double));
        if (!out->vals[i])
            return ERG_ENOMEM;
        out->n_occ[i] = occ;
        for (int k = 0; k < occ; k++) {
            double v = in[0]->vals[i][k];
            for (int g = 1; g < n; g++)
                v = sum ? v + in[g]->vals[i][k] : ERG__MAX(v, in[g]->vals[i][k]);
            out->vals[i][k] = v;
        }
    }
    return ERG_OK;
}

erg_status erg__srv_result_aggregate(const srv_result *const *in, int n, srv_result *out,
                                     erg_error *err)
{
    memset(out, 0, sizeof *out);
    int iters = in[0]->n_iters;
    for (int g = 1; g < n; g++)
        iters = ERG__MIN(iters, in[g]->n_iters);
    out->n_iters = iters;
    out->iter_time_s = erg__calloc((size_t)iters + 1, sizeof(double));
    out->iter_energy_j = erg__calloc((size_t)iters + 1, sizeof(double));
    if (!out->iter_time_s || !out->iter_energy_j)
        goto oom;
    for (int i = 0; i < iters; i++) {
        double t = in[0]->iter_time_s[i], e = 0;
        for (int g = 0; g < n; g++) {
            t = ERG__MAX(t, in[g]->iter_time_s[i]);
            e += in[g]->iter_energy_j[i];
        }
        out->iter_time_s[i] = t;
        out->iter_energy_j[i] = e;
    }
    const srv_series **ts = erg__calloc((size_t)n, sizeof *ts);
    const srv_series **es = erg__calloc((size_t)n, sizeof *es);
    const srv_series **ws = erg__calloc((size_t)n, sizeof *ws);
    bool bad = !ts || !es || !ws;
    for (int c = 0; !bad && c < SRV_NUM_INSTR; c++) {
        for (int g = 0; g < n; g++) {
            ts[g] = &in[g]->time_bd[c];
            es[g] = &in[g]->energy_bd[c];
            ws[g] = &in[g]->wait_bd[c];
        }
        if (series_aggregate(ts, n, false, &out->time_bd[c]) ||
            series_aggregate(es, n, true, &out->energy_bd[c]) ||
            series_aggregate(ws, n, false, &out->wait_bd[c]))
            bad = true;
    }
    erg__free(ts);
    erg__free(es);
    erg__free(ws);
    if (bad)
        goto oom;
    return ERG_OK;
oom:
    erg__srv_result_free(out);
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

double erg__srv_series_mean(const srv_series *s, int drop)
{
    double sum = 0;
    long cnt = 0;
    for (int i = drop; i < s->n_iters; i++)
        for (int k = 0; k < s->n_occ[i]; k++) {
            sum += s->vals[i][k];
            cnt++;
        }
    return cnt ? sum / (double)cnt : NAN;
}

double erg__srv_mean(const double *v, int from, int to)
{
    double sum = 0;
    int cnt = 0;
    for (int i = from; i < to; i++, cnt++)
        sum += v[i];
    return cnt ? sum / cnt : NAN;
}

/* ---- plan expansion and plan files ---- */

erg_status erg__srv_expand(const int *plan, int n_plan, const int *instrs, int n_instrs, int *out,
                           erg_error *err)
{
    int compute = 0;
    for (int i = 0; i < n_instrs; i++)
        if (erg__srv_instr_is_compute(instrs[i]))
            compute++;
    if (compute != n_plan || n_plan == 0)
        return erg_error_set(err, ERG_EINVAL,
                             "the plan has %d clocks for this stage but its pipe_schedule has %d "
                             "forward/backward instructions (backward_input, backward_weight and "
                             "overlap_f_b count too)",
                             n_plan, compute);
    int cur = plan[0], j = 0;
    for (int i = 0; i < n_instrs; i++) {
        if (erg__srv_instr_is_compute(instrs[i]))
            cur = plan[j++];
        out[i] = cur;
    }
    return ERG_OK;
}

void erg__srv_plan_stages_free(int **stages, int *lens, int n)
{
    if (stages)
        for (int i = 0; i < n; i++)
            erg__free(stages[i]);
    erg__free(stages);
    erg__free(lens);
}

static void names_free(char ***names, const int *lens, int n)
{
    if (!names)
        return;
    for (int i = 0; i < n; i++) {
        for (int k = 0; names[i] && k < lens[i]; k++)
            erg__free(names[i][k]);
        erg__free(names[i]);
    }
    erg__free(names);
}

/* Per stage the clocks of a pair literal: every pair with its name (all), or only the pairs
 * that get clocks (no names). */
static erg_status pairs_rows(const erg_plan_pairs *pp, const char *path, bool all,
                             int ***stages_out, int **lens_out, char ****names_out, int *n_out,
                             erg_error *err)
{
    int S = erg_plan_pairs_num_stages(pp);
    int **stages = erg__calloc((size_t)S, sizeof *stages);
    int *lens = erg__calloc((size_t)S, sizeof *lens);
    char ***names = all ? erg__calloc((size_t)S, sizeof *names) : NULL;
    erg_status st = !stages || !lens || (all && !names) ? ERG_ENOMEM : ERG_OK;
    for (int g = 0; !st && g < S; g++) {
        int n = erg_plan_pairs_stage_len(pp, g);
        const int *f = erg_plan_pairs_freqs(pp, g);
        if (!(stages[g] = erg__calloc((size_t)n + 1, sizeof(int))) ||
            (all && !(names[g] = erg__calloc((size_t)n + 1, sizeof(char *))))) {
            st = ERG_ENOMEM;
            break;
        }
        for (int i = 0; i < n; i++) {
            const char *nm = erg_plan_pairs_name(pp, g, i);
            if (all) {
                if (strlen(nm) > 64) {
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s: stage %d, pair %d: the instruction name is longer "
                                       "than 64 characters",
                                       path, g, i);
                    break;
                }
                if (!(names[g][lens[g]] = erg__strdup(nm))) {
                    st = ERG_ENOMEM;
                    break;
                }
            } else if (!erg__srv_instr_is_compute(erg__srv_instr_code(nm))) {
                continue;
            }
            stages[g][lens[g]++] = f[i];
        }
    }
    if (st) {
        names_free(names, lens, S);
        erg__srv_plan_stages_free(stages, lens, S);
        return st == ERG_ENOMEM ? erg_error_set(err, ERG_ENOMEM, "out of memory") : st;
    }
    *stages_out = stages;
    *lens_out = lens;
    if (names_out)
        *names_out = names;
    *n_out = S;
    return ERG_OK;
}

/* A plan file: its (instruction, clock) pairs when it is a pair literal (Zeus's format,
 * Perseus's master branch), else the plan (a kronos literal of 1F1B or an ergon JSON plan);
 * both read by plan.c. */
static erg_status read_plan(const char *path, erg_plan_pairs **pairs, erg_plan **plan,
                            erg_error *err)
{
    *pairs = NULL;
    *plan = NULL;
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_file(path, 64u << 20, &text, &len, err);
    if (st)
        return st;
    erg_error pe = {0};
    st = erg_plan_pairs_parse(text, len, path, pairs, &pe);
    if (st == ERG_ENOTFOUND)
        st = erg_plan_parse(text, len, path, NULL, plan, err);
    else if (st)
        *err = pe;
    erg__free(text);
    return st;
}

erg_status erg__srv_plan_load(const char *path, int ***stages, int **lens, int *n_stages,
                              erg_error *err)
{
    erg_plan_pairs *pairs = NULL;
    erg_plan *plan = NULL;
    erg_status st = read_plan(path, &pairs, &plan, err);
    if (st)
        return st;
    if (pairs) { /* only the pairs that get clocks: they are the plan */
        st = pairs_rows(pairs, path, false, stages, lens, NULL, n_stages, err);
        erg_plan_pairs_free(pairs);
        return st;
    }
    int S = erg_plan_num_stages(plan);
    int **rows = erg__calloc((size_t)S, sizeof *rows);
    int *l = erg__calloc((size_t)S, sizeof *l);
    if (!rows || !l) {
        erg__free(rows);
        erg__free(l);
        erg_plan_free(plan);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int s = 0; s < S; s++) {
        /* a rank's clock count: 2M for F/B schedules, 3VM for zero-bubble ones */
        int n = erg_plan_stage_len(plan, s);
        rows[s] = erg__malloc((size_t)(n + 1) * sizeof(int));
        if (!rows[s]) {
            erg__srv_plan_stages_free(rows, l, S);
            erg_plan_free(plan);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        memcpy(rows[s], erg_plan_stage_freqs_const(plan, s), (size_t)n * sizeof(int));
        l[s] = n;
    }
    erg_plan_free(plan);
    *stages = rows;
    *lens = l;
    *n_stages = S;
    return ERG_OK;
}

void erg__srv_plan_pairs_free(srv_plan_pairs *p)
{
    names_free(p->names, p->lens, p->n_stages);
    erg__srv_plan_stages_free(p->freqs, p->lens, p->n_stages);
    memset(p, 0, sizeof *p);
}

erg_status erg__srv_plan_load_pairs(const char *path, int hint_stages, srv_plan_pairs *out,
                                    erg_error *err)
{
    (void)hint_stages;
    memset(out, 0, sizeof *out);
    erg_plan_pairs *pairs = NULL;
    erg_plan *plan = NULL;
    erg_status st = read_plan(path, &pairs, &plan, err);
    if (st)
        return st;
    if (pairs) { /* every pair, with its name */
        st = pairs_rows(pairs, path, true, &out->freqs, &out->lens, &out->names, &out->n_stages,
                        err);
        erg_plan_pairs_free(pairs);
        return st;
    }
    /* kronos literal or JSON plan: name each clock by its stage's order. */
    int S = erg_plan_num_stages(plan), M = erg_plan_num_microbatches(plan);
    erg_schedule sched = erg_plan_schedule(plan);
    /* Every schedule's per-rank order (multi-chunk and zero-bubble ones too):
     * the plan's own, else the generator's; names by erg_instr_kind_name
     * (forward, backward, backward_input, backward_weight, overlap_f_b). */
    erg_order *own = NULL;
    const erg_order *order = erg_plan_order(plan);
    if (!order) {
        st = erg_order_new(&sched, S, M, &own, err);
        order = own;
    }
    if (!st) {
        out->lens = erg__calloc((size_t)S, sizeof *out->lens);
        out->freqs = erg__calloc((size_t)S, sizeof *out->freqs);
        out->names = erg__calloc((size_t)S, sizeof *out->names);
        if (!out->lens || !out->freqs || !out->names)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        else
            out->n_stages = S;
    }
    for (int g = 0; !st && g < S; g++) {
        const erg_instr *ins = NULL;
        int n = erg_order_rank(order, g, &ins);
        if (n != erg_plan_stage_len(plan, g)) {
            st = erg_error_set(err, ERG_EINVAL, "%s: stage %d has %d clocks for %d instructions",
                               path, g, erg_plan_stage_len(plan, g), n);
            break;
        }
        out->freqs[g] = erg__calloc((size_t)n + 1, sizeof(int));
        out->names[g] = erg__calloc((size_t)n + 1, sizeof(char *));
        if (!out->freqs[g] || !out->names[g]) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            break;
        }
        out->lens[g] = n;
        const int *f = erg_plan_stage_freqs_const(plan, g);
        for (int i = 0; i < n; i++) {
            out->freqs[g][i] = f[i];
            if (!(out->names[g][i] = erg__strdup(erg_instr_kind_name(ins[i].kind)))) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                break;
            }
        }
    }
    erg_order_free(own);
    erg_plan_free(plan);
    if (st)
        erg__srv_plan_pairs_free(out);
    return st;
}

/* profile.c: the stage profile container and its CSV reader/writer. */
#include "ergon/profile.h"
#include "core/internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ERG_MAX_STAGES 4096
#define ERG_MAX_PROFILE_BYTES (256u << 20)

typedef struct point_vec {
    erg_profile_point *v;
    size_t n, cap;
    long *lines; /* Source line of each point (0 when added by API). */
} point_vec;

struct erg_profile {
    point_vec (*stages)[ERG_NUM_INSTR_KINDS];
    int nstages; /* highest stage + 1 */
    int cap;
    char energy_source[16]; /* "" (unknown), counter, integrated, model or mixed */
};

static bool known_energy_source(const char *s)
{
    return !strcmp(s, "counter") || !strcmp(s, "integrated") || !strcmp(s, "model") ||
           !strcmp(s, "mixed");
}

const char *erg_profile_energy_source(const erg_profile *p)
{
    return p ? p->energy_source : "";
}

erg_status erg_profile_set_energy_source(erg_profile *p, const char *source, erg_error *err)
{
    if (!p || !source)
        return erg_error_set(err, ERG_EINVAL, "erg_profile_set_energy_source: NULL argument");
    if (*source && !known_energy_source(source))
        return erg_error_set(err, ERG_EINVAL,
                             "energy source '%s' is not counter, integrated, model or mixed",
                             source);
    snprintf(p->energy_source, sizeof p->energy_source, "%s", source);
    return ERG_OK;
}

const char *erg_instr_kind_name(erg_instr_kind kind)
{
    switch (kind) {
    case ERG_FORWARD:
        return "forward";
    case ERG_BACKWARD:
        return "backward";
    case ERG_BACKWARD_INPUT:
        return "backward_input";
    case ERG_BACKWARD_WEIGHT:
        return "backward_weight";
    case ERG_OVERLAP_F_B:
        return "overlap_f_b";
    }
    return "unknown";
}

erg_status erg_profile_new(erg_profile **out, erg_error *err)
{
    *out = erg__calloc(1, sizeof(erg_profile));
    if (!*out)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

void erg_profile_free(erg_profile *p)
{
    if (!p)
        return;
    for (int s = 0; s < p->cap; s++)
        for (int k = 0; k < ERG_NUM_INSTR_KINDS; k++) {
            erg__free(p->stages[s][k].v);
            erg__free(p->stages[s][k].lines);
        }
    erg__free(p->stages);
    erg__free(p);
}

/* Whether one point is within the physical bounds of profile.h (check_bounds says which it
 * breaks): the test alone, which every row of a profile passes, without formatting. */
static bool within_bounds(double freq, double t, double e)
{
    return freq >= 1 && freq <= ERG_PROFILE_MAX_FREQ_MHZ && t >= ERG_PROFILE_MIN_TIME_S &&
           t <= ERG_PROFILE_MAX_TIME_S && e >= 0 && e <= ERG_PROFILE_MAX_ENERGY_J &&
           !(e / t > ERG_PROFILE_MAX_POWER_W);
}

/* The physical bounds of profile.h on one point. `txt` holds the clock, time
 * and energy as written in the file (NULL: print the values); `where` is
 * "file:line: " or "". */
static erg_status check_bounds(const char *where, erg_status code, double freq, double t, double e,
                               const char *const *txt, erg_error *err)
{
    char b[3][40];
    snprintf(b[0], sizeof b[0], "%.17g", freq);
    snprintf(b[1], sizeof b[1], "%.17g", t);
    snprintf(b[2], sizeof b[2], "%.17g", e);
    const char *fs = txt ? txt[0] : b[0], *ts = txt ? txt[1] : b[1], *es = txt ? txt[2] : b[2];
    if (!(freq >= 1))
        return erg_error_set(err, code, "%sclock %s MHz is below the minimum of 1 MHz", where, fs);
    if (!(freq <= ERG_PROFILE_MAX_FREQ_MHZ))
        return erg_error_set(err, code, "%sclock %s MHz is above the maximum of %d MHz", where, fs,
                             ERG_PROFILE_MAX_FREQ_MHZ);
    if (!(t >= ERG_PROFILE_MIN_TIME_S))
        return erg_error_set(err, code, "%stime %s s is below the minimum of %g s (1 ns)", where,
                             ts, ERG_PROFILE_MIN_TIME_S);
    if (!(t <= ERG_PROFILE_MAX_TIME_S))
        return erg_error_set(err, code, "%stime %s s is above the maximum of %g s (1 day)", where,
                             ts, ERG_PROFILE_MAX_TIME_S);
    if (!(e >= 0))
        return erg_error_set(err, code, "%senergy %s J is below the minimum of 0 J", where, es);
    if (!(e <= ERG_PROFILE_MAX_ENERGY_J))
        return erg_error_set(err, code, "%senergy %s J is above the maximum of %g J", where, es,
                             ERG_PROFILE_MAX_ENERGY_J);
    if (e / t > ERG_PROFILE_MAX_POWER_W)
        return erg_error_set(err, code,
                             "%senergy %s J in %s s is an average power of %.3g W, above the "
                             "maximum of %g W",
                             where, es, ts, e / t, ERG_PROFILE_MAX_POWER_W);
    return ERG_OK;
}

static erg_status add_point(erg_profile *p, int stage, erg_instr_kind kind,
                            const erg_profile_point *pt, long line, const char *name,
                            erg_error *err)
{
    char where[300] = "";
    /* "file:line: " for the messages, formatted only for one (a profile has thousands of rows) */
    bool bad = stage < 0 || stage >= ERG_MAX_STAGES || (unsigned)kind >= ERG_NUM_INSTR_KINDS ||
               !within_bounds(pt->freq_mhz, pt->time_s, pt->energy_j);
    if (name && bad)
        snprintf(where, sizeof(where), "%s:%ld: ", name, line);
    if (stage < 0 || stage >= ERG_MAX_STAGES)
        return erg_error_set(err, name ? ERG_EPARSE : ERG_EINVAL, "%sstage %d out of range (0..%d)",
                             where, stage, ERG_MAX_STAGES - 1);
    if ((unsigned)kind >= ERG_NUM_INSTR_KINDS)
        return erg_error_set(err, ERG_EINVAL, "%sunknown instruction kind %d", where, (int)kind);
    if (bad) {
        erg_status bst = check_bounds(where, name ? ERG_EPARSE : ERG_EINVAL, pt->freq_mhz,
                                      pt->time_s, pt->energy_j, NULL, err);
        if (bst)
            return bst;
    }
    if (stage >= p->cap) {
        size_t cap = erg__grow_cap((size_t)p->cap, (size_t)stage + 1, 8);
        void *d = erg__reallocarray(p->stages, cap, sizeof(*p->stages));
        if (!d)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        p->stages = d;
        memset(&p->stages[p->cap], 0, (cap - (size_t)p->cap) * sizeof(*p->stages));
        p->cap = (int)cap;
    }
    point_vec *v = &p->stages[stage][kind];
    for (size_t i = 0; i < v->n; i++)
        if (v->v[i].freq_mhz == pt->freq_mhz) {
            if (name)
                snprintf(where, sizeof(where), "%s:%ld: ", name, line);
            if (name && v->lines[i])
                return erg_error_set(
                    err, ERG_EPARSE, "%sduplicate row: stage %d %s at %d MHz already on line %ld",
                    where, stage, erg_instr_kind_name(kind), pt->freq_mhz, v->lines[i]);
            return erg_error_set(err, name ? ERG_EPARSE : ERG_EINVAL,
                                 "%sduplicate point: stage %d %s at %d MHz", where, stage,
                                 erg_instr_kind_name(kind), pt->freq_mhz);
        }
    if (v->n == v->cap) {
        size_t cap = erg__grow_cap(v->cap, v->n + 1, 16);
        erg_profile_point *d = erg__reallocarray(v->v, cap, sizeof(*d));
        if (!d)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        v->v = d;
        long *l = erg__reallocarray(v->lines, cap, sizeof(*l));
        if (!l)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        v->lines = l;
        v->cap = cap;
    }
    v->v[v->n] = *pt;
    v->lines[v->n] = line;
    v->n++;
    if (stage + 1 > p->nstages)
        p->nstages = stage + 1;
    return ERG_OK;
}

erg_status erg_profile_add(erg_profile *p, int stage, erg_instr_kind kind,
                           const erg_profile_point *pt, erg_error *err)
{
    if (!p || !pt)
        return erg_error_set(err, ERG_EINVAL, "erg_profile_add: NULL argument");
    return add_point(p, stage, kind, pt, 0, NULL, err);
}

static erg_status validate(const erg_profile *p, const char *name, erg_error *err)
{
    const char *pre = name ? name : "profile";
    if (p->nstages == 0)
        return erg_error_set(err, name ? ERG_EPARSE : ERG_EINVAL, "%s: no forward or backward rows",
                             pre);
    for (int s = 0; s < p->nstages; s++) {
        bool f = p->stages[s][ERG_FORWARD].n > 0, b = p->stages[s][ERG_BACKWARD].n > 0;
        if (!f && !b)
            return erg_error_set(err, name ? ERG_EPARSE : ERG_EINVAL,
                                 "%s: stage %d is missing (stages must be numbered 0..%d without "
                                 "gaps)",
                                 pre, s, p->nstages - 1);
        if (!f || !b)
            return erg_error_set(err, name ? ERG_EPARSE : ERG_EINVAL, "%s: stage %d has no %s rows",
                                 pre, s, f ? "backward" : "forward");
        bool i = p->stages[s][ERG_BACKWARD_INPUT].n > 0,
             w = p->stages[s][ERG_BACKWARD_WEIGHT].n > 0;
        if (i != w)
            return erg_error_set(err, name ? ERG_EPARSE : ERG_EINVAL,
                                 "%s: stage %d has %s rows but no %s rows (give both or neither)",
                                 pre, s, i ? "backward_input" : "backward_weight",
                                 i ? "backward_weight" : "backward_input");
    }
    return ERG_OK;
}

erg_status erg_profile_validate(const erg_profile *p, erg_error *err)
{
    if (!p)
        return erg_error_set(err, ERG_EINVAL, "NULL profile");
    return validate(p, NULL, err);
}

static const char *const required_cols[] = {"stage", "instruction", "frequency", "time", "energy"};

erg_status erg_profile_parse_csv(const char *text, size_t len, const char *name, erg_profile **out,
                                 erg_error *err)
{
    *out = NULL;
    if (!name)
        name = "<profile>";
    erg_profile *p;
    erg_status st = erg_profile_new(&p, err);
    if (st)
        return st;
    erg__csv c;
    erg__csv_init(&c, text, len);
    int col[5];
    size_t ncols = 0;
    int r = erg__csv_next(&c);
    if (r < 0) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    if (r == 0) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: empty file (expected a header line "
                           "'stage,instruction,frequency,time,energy')",
                           name);
        goto fail;
    }
    ncols = c.nfields;
    int src_col = -1; /* the optional energy_source column */
    for (size_t i = 0; i < c.nfields; i++)
        if (!strcmp(c.fields[i], "energy_source"))
            src_col = (int)i;
    for (size_t k = 0; k < 5; k++) {
        col[k] = -1;
        for (size_t i = 0; i < c.nfields; i++)
            if (!strcmp(c.fields[i], required_cols[k]))
                col[k] = (int)i;
        if (col[k] < 0) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: missing column '%s' in the header (need "
                               "stage,instruction,frequency,time,energy)",
                               name, c.line, required_cols[k]);
            goto fail;
        }
    }
    while ((r = erg__csv_next(&c)) > 0) {
        if (c.nfields != ncols) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: expected %zu fields, found %zu", name,
                               c.line, ncols, c.nfields);
            goto fail;
        }
        const char *inst = c.fields[col[1]];
        erg_instr_kind kind;
        if (!strcmp(inst, "forward"))
            kind = ERG_FORWARD;
        else if (!strcmp(inst, "backward"))
            kind = ERG_BACKWARD;
        else if (!strcmp(inst, "backward_input"))
            kind = ERG_BACKWARD_INPUT;
        else if (!strcmp(inst, "backward_weight"))
            kind = ERG_BACKWARD_WEIGHT;
        else
            continue; /* load/other instruction kinds are not planned */
        if (src_col >= 0) {
            const char *es = c.fields[src_col];
            if (!known_energy_source(es)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: energy_source '%.40s' is not counter, integrated, "
                                   "model or mixed",
                                   name, c.line, es);
                goto fail;
            }
            if (!p->energy_source[0])
                snprintf(p->energy_source, sizeof p->energy_source, "%s", es);
            else if (strcmp(p->energy_source, es))
                snprintf(p->energy_source, sizeof p->energy_source, "mixed");
        }
        long stage;
        double freq, t, e;
        if (!erg__parse_long(c.fields[col[0]], &stage)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: stage '%s' is not an integer", name,
                               c.line, c.fields[col[0]]);
            goto fail;
        }
        if (stage < 0 || stage >= ERG_MAX_STAGES) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: stage %ld out of range (0..%d)", name,
                               c.line, stage, ERG_MAX_STAGES - 1);
            goto fail;
        }
        if (!erg__parse_double(c.fields[col[2]], &freq) || freq != floor(freq)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: frequency '%s' is not an integer MHz",
                               name, c.line, c.fields[col[2]]);
            goto fail;
        }
        if (!erg__parse_double(c.fields[col[3]], &t)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: time '%s' is not a number", name, c.line,
                               c.fields[col[3]]);
            goto fail;
        }
        if (!erg__parse_double(c.fields[col[4]], &e)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: energy '%s' is not a number", name, c.line,
                               c.fields[col[4]]);
            goto fail;
        }
        if (!within_bounds(freq, t, e)) {
            char where[300];
            snprintf(where, sizeof where, "%s:%ld: ", name, c.line);
            const char *txt[3] = {c.fields[col[2]], c.fields[col[3]], c.fields[col[4]]};
            if ((st = check_bounds(where, ERG_EPARSE, freq, t, e, txt, err)))
                goto fail;
        }
        erg_profile_point pt = {(int)freq, t, e};
        st = add_point(p, (int)stage, kind, &pt, c.line, name, err);
        if (st)
            goto fail;
    }
    if (r < 0) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    st = validate(p, name, err);
    if (st)
        goto fail;
    erg__csv_free(&c);
    *out = p;
    return ERG_OK;
fail:
    erg__csv_free(&c);
    erg_profile_free(p);
    return st;
}

erg_status erg_profile_read_csv(const char *path, erg_profile **out, erg_error *err)
{
    char *text;
    size_t len;
    *out = NULL;
    erg_status st = erg__read_file(path, ERG_MAX_PROFILE_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg_profile_parse_csv(text, len, path, out, err);
    erg__free(text);
    return st;
}

erg_status erg_profile_write_csv(const erg_profile *p, const char *path, erg_error *err)
{
    erg__buf b = {0};
    /* The energy_source column only when the source is known (readers that predate it
     * ignore extra columns). */
    const char *es = p->energy_source;
    char tail[24] = "";
    if (*es)
        snprintf(tail, sizeof tail, ",%s", es);
    erg_status st = erg__buf_printf(&b, "stage,instruction,frequency,time,energy%s\n",
                                    *es ? ",energy_source" : "");
    char t[40], e[40];
    for (int s = 0; s < p->nstages && !st; s++) {
        const point_vec *f = &p->stages[s][ERG_FORWARD], *bw = &p->stages[s][ERG_BACKWARD];
        /* Interleave forward and backward at each clock, in forward's order. */
        size_t i = 0, j = 0;
        while ((i < f->n || j < bw->n) && !st) {
            const erg_profile_point *pt;
            const char *kind;
            if (i < f->n && (j >= bw->n || f->v[i].freq_mhz >= bw->v[j].freq_mhz)) {
                pt = &f->v[i++];
                kind = "forward";
            } else {
                pt = &bw->v[j++];
                kind = "backward";
            }
            st = erg__buf_printf(&b, "%d,%s,%d,%s,%s%s\n", s, kind, pt->freq_mhz,
                                 erg__fmt_double_py(pt->time_s, t, sizeof t),
                                 erg__fmt_double_py(pt->energy_j, e, sizeof e), tail);
        }
        /* Then the zero-bubble rows, if any, I before W, in insertion order. */
        for (int k = ERG_BACKWARD_INPUT; k <= ERG_BACKWARD_WEIGHT && !st; k++) {
            const point_vec *v = &p->stages[s][k];
            for (size_t q = 0; q < v->n && !st; q++)
                st = erg__buf_printf(&b, "%d,%s,%d,%s,%s%s\n", s,
                                     erg_instr_kind_name((erg_instr_kind)k), v->v[q].freq_mhz,
                                     erg__fmt_double_py(v->v[q].time_s, t, sizeof t),
                                     erg__fmt_double_py(v->v[q].energy_j, e, sizeof e), tail);
        }
    }
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, st, "out of memory writing %s", path);
    }
    st = erg__write_file(path, b.data, b.len, err);
    erg__buf_free(&b);
    return st;
}

int erg_profile_num_stages(const erg_profile *p)
{
    return p ? p->nstages : 0;
}

size_t erg_profile_num_points(const erg_profile *p, int stage, erg_instr_kind kind)
{
    if (!p || stage < 0 || stage >= p->nstages || (unsigned)kind >= ERG_NUM_INSTR_KINDS)
        return 0;
    return p->stages[stage][kind].n;
}

const erg_profile_point *erg_profile_points(const erg_profile *p, int stage, erg_instr_kind kind)
{
    if (!erg_profile_num_points(p, stage, kind))
        return NULL;
    return p->stages[stage][kind].v;
}

erg_status erg_profile_lookup(const erg_profile *p, int stage, erg_instr_kind kind, int freq_mhz,
                              erg_profile_point *out, erg_error *err)
{
    size_t n = erg_profile_num_points(p, stage, kind);
    const erg_profile_point *v = erg_profile_points(p, stage, kind);
    for (size_t i = 0; i < n; i++)
        if (v[i].freq_mhz == freq_mhz) {
            *out = v[i];
            return ERG_OK;
        }
    return erg_error_set(err, ERG_ENOTFOUND, "the profile has no %s point at %d MHz for stage %d",
                         erg_instr_kind_name(kind), freq_mhz, stage);
}

erg_status erg_blocking_power_w(const char *gpu, double *power_w, erg_error *err)
{
    static const struct {
        const char *name;
        double w;
    } table[] = {{"a40", 70.38}, {"a100", 83.64}, {"a100-sxm", 83.64}, {"a100_sxm", 83.64}};
    for (size_t i = 0; i < ERG__ARRAY_LEN(table); i++)
        if (gpu && !strcasecmp(gpu, table[i].name)) {
            *power_w = table[i].w;
            return ERG_OK;
        }
    return erg_error_set(err, ERG_ENOTFOUND,
                         "no published blocking power for GPU '%s' (known: A40, A100); give it "
                         "with --blocking-power W",
                         gpu ? gpu : "");
}

static int cmp_freq(const void *a, const void *b)
{
    const erg_profile_point *x = a, *y = b;
    return (x->freq_mhz > y->freq_mhz) - (x->freq_mhz < y->freq_mhz);
}

void erg_profile_fingerprint(const erg_profile *p, char out[ERG_PROFILE_FINGERPRINT_LEN])
{
    uint64_t h = 14695981039346656037ULL;
    for (int s = 0; p && s < p->nstages; s++)
        for (int k = 0; k < ERG_NUM_INSTR_KINDS; k++) {
            size_t n = p->stages[s][k].n;
            if (!n)
                continue;
            erg_profile_point *v = erg__malloc(n * sizeof *v);
            if (v) {
                memcpy(v, p->stages[s][k].v, n * sizeof *v);
                qsort(v, n, sizeof *v, cmp_freq);
            }
            for (size_t i = 0; i < n; i++) {
                const erg_profile_point *pt = v ? &v[i] : &p->stages[s][k].v[i];
                /* the row "%d,%s,%d,%.17g,%.17g\n" (the fingerprint's definition), with the
                 * numbers formatted without printf's multi-precision cost */
                char row[160], t[40], e[40];
                int len = snprintf(row, sizeof row, "%d,%s,%d,%s,%s\n", s,
                                   erg_instr_kind_name((erg_instr_kind)k), pt->freq_mhz,
                                   erg__fmt_double_g17(pt->time_s, t, sizeof t),
                                   erg__fmt_double_g17(pt->energy_j, e, sizeof e));
                for (int c = 0; c < len && c < (int)sizeof row; c++) {
                    h ^= (unsigned char)row[c];
                    h *= 1099511628211ULL;
                }
            }
            erg__free(v);
        }
    snprintf(out, ERG_PROFILE_FINGERPRINT_LEN, "fnv1a64:%016llx", (unsigned long long)h);
}

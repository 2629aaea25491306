/* frontier.c: frontier storage (clock deltas + checkpoints), its directory
 * format, and plan choice for a deadline or a slowdown. */
#include "core/internal.h"
#include "planner/frontier_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#define ERG__CKPT_EVERY 512

struct erg_frontier {
    int S, M, n;        /* ranks, microbatches, instructions (2SM for 1F1B) */
    erg_schedule sched; /* a FILE schedule's order lives in tmpl */
    erg_plan *tmpl;     /* an empty plan: the order and each rank's offset */
    int *off;           /* [S+1] first instruction of each rank */
    double unit_s, power_w;
    size_t np, cap;
    erg_frontier_point *pts;
    /* Computed frontiers: clock changes of plan k are chg_id/chg_f in
     * [chg_off[k], chg_off[k+1]); checkpoint c holds the full clocks of plan
     * c * ERG__CKPT_EVERY. */
    int *initial;
    size_t *chg_off;
    int *chg_id, *chg_f;
    size_t nchg, chg_cap;
    int *ckpt;
    size_t nckpt, ckpt_cap;
    /* erg_frontier_push: the clocks of the last plan pushed (pushed_np plans then). */
    int *pushed;
    size_t pushed_np;
    /* Frontiers read from a directory: one plan file per point. */
    char **files;
    /* Read from plans.ergon: the fingerprint its header names ("" for none). */
    bool has_stored_fp;
    char stored_fp[ERG_FRONTIER_FINGERPRINT_LEN];
    /* The last plan is the all-max fallback (erg_frontier_append_plan), not the planner's:
     * frontier.csv leaves it out. */
    bool fallback;
};

void erg__frontier_set_fallback(erg_frontier *f)
{
    f->fallback = true;
}

bool erg_frontier_has_fallback(const erg_frontier *f)
{
    return f && f->fallback && f->np > 0;
}

size_t erg_frontier_num_planned(const erg_frontier *f)
{
    return f ? f->np - (erg_frontier_has_fallback(f) ? 1 : 0) : 0;
}

double erg_frontier_unit_s(const erg_frontier *f)
{
    return f ? f->unit_s : 0;
}

void erg__frontier_set_stored_fingerprint(erg_frontier *f, const char *fp)
{
    f->has_stored_fp = true;
    snprintf(f->stored_fp, sizeof f->stored_fp, "%s", fp);
}

const char *erg__frontier_stored_fingerprint(const erg_frontier *f)
{
    return f->has_stored_fp ? f->stored_fp : NULL;
}

erg_status erg__frontier_new(int S, int M, const erg_schedule *sched, double unit_s, double power_w,
                             erg_frontier **out, erg_error *err)
{
    erg_frontier *f = erg__calloc(1, sizeof(*f));
    if (!f)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    f->S = S;
    f->M = M;
    if (S == 0 && M == 0) {
        /* read from a directory: layout from its first plan (read_dir) */
        if (sched)
            f->sched = *sched;
        f->chg_off = erg__calloc(1, sizeof(size_t));
        if (!f->chg_off) {
            erg_frontier_free(f);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        *out = f;
        return ERG_OK;
    }
    erg_status st = erg_plan_new(sched, S, M, &f->tmpl, err);
    if (st) {
        erg__free(f);
        return st;
    }
    f->sched = erg_plan_schedule(f->tmpl);
    f->off = erg__calloc((size_t)S + 1, sizeof(int));
    if (!f->off) {
        erg_frontier_free(f);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int r = 0; r < S; r++)
        f->off[r + 1] = f->off[r] + erg_plan_stage_len(f->tmpl, r);
    f->n = f->off[S];
    f->unit_s = unit_s;
    f->power_w = power_w;
    f->initial = erg__calloc((size_t)f->n, sizeof(int));
    f->chg_off = erg__calloc(1, sizeof(size_t));
    if (!f->initial || !f->chg_off) {
        erg_frontier_free(f);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = f;
    return ERG_OK;
}

void erg_frontier_free(erg_frontier *f)
{
    if (!f)
        return;
    erg__free(f->pts);
    erg_plan_free(f->tmpl);
    erg__free(f->off);
    erg__free(f->initial);
    erg__free(f->chg_off);
    erg__free(f->chg_id);
    erg__free(f->chg_f);
    erg__free(f->ckpt);
    erg__free(f->pushed);
    if (f->files)
        for (size_t i = 0; i < f->np; i++)
            erg__free(f->files[i]);
    erg__free(f->files);
    erg__free(f);
}

erg_status erg__frontier_set_initial(erg_frontier *f, const int *freq, erg_error *err)
{
    (void)err;
    memcpy(f->initial, freq, sizeof(int) * (size_t)f->n);
    return ERG_OK;
}

static erg_status grow_points(erg_frontier *f, erg_error *err)
{
    if (f->np < f->cap)
        return ERG_OK;
    size_t cap = erg__grow_cap(f->cap, f->np + 1, 1024);
    erg_frontier_point *p = erg__reallocarray(f->pts, cap, sizeof(*p));
    if (!p)
        return erg_error_set(err, ERG_ENOMEM, "out of memory storing %zu plans", f->np);
    f->pts = p;
    if (!f->files) {
        size_t *o = erg__reallocarray(f->chg_off, cap + 1, sizeof(size_t));
        if (!o)
            return erg_error_set(err, ERG_ENOMEM, "out of memory storing %zu plans", f->np);
        f->chg_off = o;
    } else {
        char **fl = erg__reallocarray(f->files, cap, sizeof(char *));
        if (!fl)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        f->files = fl;
    }
    f->cap = cap;
    return ERG_OK;
}

erg_status erg__frontier_begin_plan(erg_frontier *f, const erg_frontier_point *pt, erg_error *err)
{
    erg_status st = grow_points(f, err);
    if (st)
        return st;
    f->pts[f->np] = *pt;
    f->chg_off[f->np] = f->nchg;
    return ERG_OK;
}

erg_status erg__frontier_add_change(erg_frontier *f, int instr, int freq, erg_error *err)
{
    if (f->nchg == f->chg_cap) {
        size_t cap = erg__grow_cap(f->chg_cap, f->nchg + 1, 4096);
        int *a = erg__reallocarray(f->chg_id, cap, sizeof(int));
        if (!a)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        f->chg_id = a;
        int *b = erg__reallocarray(f->chg_f, cap, sizeof(int));
        if (!b)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        f->chg_f = b;
        f->chg_cap = cap;
    }
    f->chg_id[f->nchg] = instr;
    f->chg_f[f->nchg] = freq;
    f->nchg++;
    return ERG_OK;
}

erg_status erg__frontier_end_plan(erg_frontier *f, const int *freq, erg_error *err)
{
    if (f->np % ERG__CKPT_EVERY == 0) {
        size_t c = f->np / ERG__CKPT_EVERY;
        if (c >= f->ckpt_cap) {
            size_t cap = erg__grow_cap(f->ckpt_cap, c + 1, 8);
            if (cap > SIZE_MAX / (size_t)f->n)
                return erg_error_set(err, ERG_ENOMEM, "out of memory");
            int *p = erg__reallocarray(f->ckpt, cap * (size_t)f->n, sizeof(int));
            if (!p)
                return erg_error_set(err, ERG_ENOMEM, "out of memory");
            f->ckpt = p;
            f->ckpt_cap = cap;
        }
        memcpy(f->ckpt + c * (size_t)f->n, freq, sizeof(int) * (size_t)f->n);
        f->nckpt = c + 1;
    }
    f->np++;
    f->chg_off[f->np] = f->nchg;
    return ERG_OK;
}

size_t erg_frontier_size(const erg_frontier *f)
{
    return f ? f->np : 0;
}
int erg_frontier_num_stages(const erg_frontier *f)
{
    return f->S;
}
int erg_frontier_num_microbatches(const erg_frontier *f)
{
    return f->M;
}

erg_status erg_frontier_get(const erg_frontier *f, size_t k, erg_frontier_point *out,
                            erg_error *err)
{
    if (!f || k >= f->np)
        return erg_error_set(err, ERG_EINVAL, "plan index %zu out of range (the frontier has %zu)",
                             k, f ? f->np : 0);
    *out = f->pts[k];
    return ERG_OK;
}

/* Clocks of plan k into freq (computed frontiers). */
static void replay(const erg_frontier *f, size_t k, int *freq)
{
    size_t c = k / ERG__CKPT_EVERY;
    memcpy(freq, f->ckpt + c * (size_t)f->n, sizeof(int) * (size_t)f->n);
    for (size_t j = c * ERG__CKPT_EVERY + 1; j <= k; j++)
        for (size_t i = f->chg_off[j]; i < f->chg_off[j + 1]; i++)
            freq[f->chg_id[i]] = f->chg_f[i];
}

erg_status erg_frontier_plan(const erg_frontier *f, size_t k, erg_plan **out, erg_error *err)
{
    *out = NULL;
    if (!f || k >= f->np)
        return erg_error_set(err, ERG_EINVAL, "plan index %zu out of range (the frontier has %zu)",
                             k, f ? f->np : 0);
    erg_status st;
    if (f->files) {
        st = erg_plan_read(f->files[k], &f->sched, out, err);
        if (st)
            return st;
    } else {
        st = erg_plan_new(&f->sched, f->S, f->M, out, err);
        if (st)
            return st;
        int *freq = erg__malloc(sizeof(int) * (size_t)f->n);
        if (!freq) {
            erg_plan_free(*out);
            *out = NULL;
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        replay(f, k, freq);
        for (int s = 0; s < f->S; s++)
            memcpy(erg_plan_stage_freqs(*out, s), freq + f->off[s],
                   sizeof(int) * (size_t)(f->off[s + 1] - f->off[s]));
        erg__free(freq);
    }
    erg_plan_set_estimate(*out, f->pts[k].time_s, f->pts[k].energy_j);
    return erg_plan_set_method(*out, "perseus", err);
}

/* ---- directory format ---- */

/* A plan as a Python literal: "[", then one list per stage (rank) followed by
 * ",", then "]" and three "# Iteration k ..." comment lines.
 * order == NULL: Perseus's frequencies.py (lists of clocks, its comment
 * wording). order != NULL: Zeus PFO's freqs_pipeline_%05d.py (its
 * run_optimization.py writes it; its PointSolution reads it): each stage's
 * list of (name, clock) tuples in that rank's execution order, the names the
 * instruction kinds' (forward, backward, backward_input, ...), which Zeus's
 * client compares with the name given to on_instruction_begin
 * (docs/zeus-protocol.md §8). */
static erg_status write_py_fast(const erg_frontier *f, size_t k, const int *freq,
                                const erg_instr *order, erg__buf *b, const char *path,
                                erg_error *err)
{
    b->len = 0;
    erg_status st = erg__buf_append(b, "[\n", 2);
    char num[40];
    for (int s = 0; s < f->S && !st; s++) {
        st = erg__buf_append(b, "[", 1);
        for (int j = 0; j < f->off[s + 1] - f->off[s] && !st; j++) {
            int x = f->off[s] + j;
            int n = order ? snprintf(num, sizeof num, "%s('%s', %d)", j ? ", " : "",
                                     erg_instr_kind_name(order[x].kind), freq[x])
                          : snprintf(num, sizeof num, j ? ", %d" : "%d", freq[x]);
            st = erg__buf_append(b, num, (size_t)n);
        }
        if (!st)
            st = erg__buf_append(b, "],\n", 3);
    }
    char c1[40], c2[40], c3[40];
    const erg_frontier_point *p = &f->pts[k];
    const char *fmt = order ? "]\n# Iteration %zu cost change: %s\n# Iteration %zu total cost: "
                              "%s\n# Iteration %zu total cost with P2P: %s\n"
                            : "]\n# Iteration %zu: cost change %s \n# Iteration %zu: total cost "
                              "%s \n# Iteration %zu: refined cost %s \n";
    if (!st)
        st = erg__buf_printf(b, fmt, k, erg__fmt_double_py(p->cost_change_j, c1, sizeof c1), k,
                             erg__fmt_double_py(p->cost_j, c2, sizeof c2), k,
                             erg__fmt_double_py(p->energy_j, c3, sizeof c3));
    if (st)
        return erg_error_set(err, st, "out of memory");
    return erg__write_file_direct(path, b->data, b->len, err);
}

static erg_status write_json_fast(const erg_frontier *f, size_t k, const int *freq,
                                  const erg_instr *order, erg__buf *b, const char *path,
                                  erg_error *err)
{
    b->len = 0;
    char t[40], e[40];
    const erg_frontier_point *p = &f->pts[k];
    int shortn = erg_schedule_chunks(&f->sched) == 1 && f->sched.kind != ERG_SCHED_FILE;
    erg_status st = erg__buf_printf(
        b,
        "{\"format\": \"ergon-plan\", \"version\": 1, \"method\": \"perseus\", \"index\": %zu,\n"
        " \"schedule\": \"%s\", \"num_stages\": %d, \"num_microbatches\": %d,\n"
        " \"time_s\": %s, \"energy_j\": %s,\n",
        k, erg_schedule_name(f->sched.kind), f->S, f->M, erg__fmt_double_py(p->time_s, t, sizeof t),
        erg__fmt_double_py(p->energy_j, e, sizeof e));
    if (!st && !shortn)
        st = erg__buf_printf(
            b, " \"num_chunks\": %d, \"backward_split\": %s,\n", erg_schedule_chunks(&f->sched),
            erg__fmt_double_py(erg_schedule_backward_split(&f->sched), t, sizeof t));
    if (!st)
        st = erg__buf_append(b, " \"stages\": [", 12);
    char num[96];
    for (int s = 0; s < f->S && !st; s++) {
        st = erg__buf_printf(b, "%s\n  {\"stage\": %d, \"order\": [", s ? "," : "", s);
        for (int j = 0; j < f->off[s + 1] - f->off[s] && !st; j++) {
            erg_instr in = order[f->off[s] + j];
            char nm[80];
            if (shortn)
                snprintf(nm, sizeof nm, "%c%d", in.kind == ERG_FORWARD ? 'F' : 'B', in.microbatch);
            else
                erg_instr_format(in, nm, sizeof nm);
            int n = snprintf(num, sizeof num, "%s\"%s\"", j ? ", " : "", nm);
            st = erg__buf_append(b, num, (size_t)n);
        }
        if (!st)
            st = erg__buf_append(b, "],\n   \"freq_mhz\": [", 19);
        for (int j = 0; j < f->off[s + 1] - f->off[s] && !st; j++) {
            int n = snprintf(num, sizeof num, j ? ", %d" : "%d", freq[f->off[s] + j]);
            st = erg__buf_append(b, num, (size_t)n);
        }
        if (!st)
            st = erg__buf_append(b, "]}", 2);
    }
    if (!st)
        st = erg__buf_append(b, "\n ]}\n", 5);
    if (st)
        return erg_error_set(err, st, "out of memory");
    return erg__write_file_direct(path, b->data, b->len, err);
}

static const erg__name format_names[] = {
    {"csv", ERG_FRONTIER_CSV}, {"packed", ERG_FRONTIER_PACKED},   {"perseus-py", ERG_FRONTIER_PY},
    {"py", ERG_FRONTIER_PY},   {"zeus-py", ERG_FRONTIER_ZEUS_PY}, {"json", ERG_FRONTIER_JSON},
};

erg_status erg_frontier_formats_parse(const char *list, int *what, erg_error *err)
{
    if (!list || !what)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_formats_parse: NULL argument");
    int w = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n) {
            char tok[32];
            int v = 0;
            bool known = n < sizeof tok;
            if (known) {
                memcpy(tok, p, n);
                tok[n] = '\0';
                known = erg__name_lookup(ERG__NAMES(format_names), tok, &v);
            }
            if (!known)
                return erg_error_set(
                    err, ERG_EINVAL,
                    "unknown format '%.*s' (csv, packed, perseus-py, zeus-py, json)", (int)n, p);
            w |= v;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    if ((w & ERG_FRONTIER_PY) && (w & ERG_FRONTIER_ZEUS_PY))
        return erg_error_set(err, ERG_EINVAL,
                             "perseus-py and zeus-py both write "
                             "freqs_pipeline_%%05d.py; pick one per directory");
    *what = w;
    return ERG_OK;
}

erg_status erg_frontier_write_dir(const erg_frontier *f, const char *dir, int what,
                                  erg_progress_fn progress, void *user, erg_error *err)
{
    if (!f || !dir)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    if ((what & ERG_FRONTIER_PY) && (what & ERG_FRONTIER_ZEUS_PY))
        return erg_error_set(err, ERG_EINVAL,
                             "the Perseus and the Zeus plan formats both use the file names "
                             "freqs_pipeline_%%05d.py: write one of them per directory");
    if (f->files && (what & (ERG_FRONTIER_PY | ERG_FRONTIER_JSON | ERG_FRONTIER_ZEUS_PY)))
        return erg_error_set(err, ERG_ENOTSUP,
                             "a frontier read from a directory can only be written as CSV");
    erg_status st = erg__mkdir_p(dir, err);
    if (st)
        return st;
    size_t dl = strlen(dir);
    char *path = erg__malloc(dl + 64);
    erg__buf b = {0};
    int *freq = erg__malloc(sizeof(int) * (size_t)f->n);
    erg_instr *order = erg__malloc(sizeof(erg_instr) * (size_t)f->n);
    if (!path || !freq || !order) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    for (int s = 0; s < f->S; s++) {
        const erg_instr *v;
        int nr = erg_order_rank(erg_plan_order(f->tmpl), s, &v);
        memcpy(order + f->off[s], v, sizeof(erg_instr) * (size_t)nr);
    }
    if (what & ERG_FRONTIER_CSV) {
        st = erg__buf_append(&b, "time,energy\n", 12);
        char t[40], e[40];
        /* "%s,%s\n" appended directly (a printf per row was a tenth of the writing); the
         * planner's rows only: the all-max fallback is not a point of its frontier */
        for (size_t k = 0; k < erg_frontier_num_planned(f) && !st; k++) {
            size_t lt = strlen(erg__fmt_double_py(f->pts[k].time_s, t, sizeof t));
            size_t le = strlen(erg__fmt_double_py(f->pts[k].energy_j, e, sizeof e));
            t[lt] = ',';
            e[le] = '\n';
            st = erg__buf_append(&b, t, lt + 1);
            if (!st)
                st = erg__buf_append(&b, e, le + 1);
        }
        if (st) {
            st = erg_error_set(err, st, "out of memory");
            goto done;
        }
        snprintf(path, dl + 64, "%s/frontier.csv", dir);
        st = erg__write_file(path, b.data, b.len, err);
    }
    if (!st && (what & ERG_FRONTIER_PACKED)) {
        snprintf(path, dl + 64, "%s/" ERG__PACKED_NAME, dir);
        st = erg__frontier_write_packed(f, path, 1, NULL, NULL, err);
    }
    if (!f->files && (what & (ERG_FRONTIER_PY | ERG_FRONTIER_JSON | ERG_FRONTIER_ZEUS_PY))) {
        if (f->np)
            memcpy(freq, f->ckpt, sizeof(int) * (size_t)f->n);
        for (size_t k = 0; k < f->np && !st; k++) {
            if (k > 0)
                for (size_t i = f->chg_off[k]; i < f->chg_off[k + 1]; i++)
                    freq[f->chg_id[i]] = f->chg_f[i];
            if (what & ERG_FRONTIER_PY) {
                snprintf(path, dl + 64, "%s/freqs_pipeline_%05zu.py", dir, k);
                st = write_py_fast(f, k, freq, NULL, &b, path, err);
            }
            if (!st && (what & ERG_FRONTIER_ZEUS_PY)) {
                snprintf(path, dl + 64, "%s/freqs_pipeline_%05zu.py", dir, k);
                st = write_py_fast(f, k, freq, order, &b, path, err);
            }
            if (!st && (what & ERG_FRONTIER_JSON)) {
                snprintf(path, dl + 64, "%s/plan_%05zu.json", dir, k);
                st = write_json_fast(f, k, freq, order, &b, path, err);
            }
            if (!st && progress && (k % 64 == 0 || k + 1 == f->np) && progress(user, k + 1, f->np))
                st = erg_error_set(err, ERG_ECANCELED, "canceled while writing plans");
        }
    }
done:
    erg__buf_free(&b);
    erg__free(path);
    erg__free(freq);
    erg__free(order);
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* List dir entries starting with prefix and ending with suffix, sorted. */
static erg_status list_files(const char *dir, const char *prefix, const char *suffix, char ***out,
                             size_t *count, erg_error *err)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return erg_error_set(err, ERG_ENOTFOUND, "%s: cannot open the directory", dir);
    struct dirent *e;
    char **v = NULL;
    size_t n = 0, cap = 0;
    erg_status st = ERG_OK;
    size_t pl = strlen(prefix), sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < pl + sl || strncmp(e->d_name, prefix, pl) || strcmp(e->d_name + l - sl, suffix))
            continue;
        if (!ERG__GROW(v, cap, n + 1, 256)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            break;
        }
        size_t len = strlen(dir) + l + 2;
        v[n] = erg__malloc(len);
        if (!v[n]) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            break;
        }
        snprintf(v[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (st) {
        for (size_t i = 0; i < n; i++)
            erg__free(v[i]);
        erg__free(v);
        return st;
    }
    if (n)
        qsort(v, n, sizeof(char *), cmp_str);
    *out = v;
    *count = n;
    return ERG_OK;
}

/* A frontier.csv beside plans.ergon must list the plans' estimates (both are written from one
 * frontier, in the same repr): one from another run is refused, naming both files. */
static erg_status check_csv_matches(const erg_frontier *f, const char *csv_path,
                                    const char *packed_path, erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_file(csv_path, 1u << 30, &text, &len, err);
    if (st)
        return st;
    erg__csv c;
    erg__csv_init(&c, text, len);
    size_t k = 0, want = erg_frontier_num_planned(f);
    int r = erg__csv_next(&c); /* the header */
    while (!st && r > 0 && (r = erg__csv_next(&c)) > 0) {
        double t, e;
        if (k >= want || c.nfields != 2 || !erg__parse_double(c.fields[0], &t) ||
            !erg__parse_double(c.fields[1], &e) || t != f->pts[k].time_s || e != f->pts[k].energy_j)
            st = erg_error_set(err, ERG_EINVAL,
                               "%s:%ld does not list plan %zu of %s (%zu plans): the two files "
                               "come from different runs; plan again into this directory",
                               csv_path, c.line, k, packed_path, f->np);
        k++;
    }
    if (!st && r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st && k != want)
        st = erg_error_set(err, ERG_EINVAL,
                           "%s lists %zu plans but %s holds %zu%s: the two files come from "
                           "different runs; plan again into this directory",
                           csv_path, k, packed_path, want,
                           erg_frontier_has_fallback(f) ? " and the all-max fallback" : "");
    erg__csv_free(&c);
    erg__free(text);
    return st;
}

/* The number of a `key,value` row of DIR/frontier-info.csv; false when absent. */
static bool info_number(const char *dir, const char *key, double *v)
{
    size_t dl = strlen(dir), kl = strlen(key);
    char *path = erg__malloc(dl + 32), *text = NULL;
    size_t len = 0;
    erg_error e;
    bool found = false;
    if (path) {
        snprintf(path, dl + 32, "%s/frontier-info.csv", dir);
        if (erg__read_file(path, 1 << 20, &text, &len, &e))
            text = NULL;
    }
    for (const char *p = text; p && *p && !found;) {
        const char *nl = strchr(p, '\n');
        if (!strncmp(p, key, kl) && p[kl] == ',') {
            char num[64];
            size_t l = (size_t)((nl ? nl : p + strlen(p)) - (p + kl + 1));
            snprintf(num, sizeof num, "%.*s", (int)(l < 63 ? l : 63), p + kl + 1);
            found = erg__parse_double(num, v);
        }
        p = nl ? nl + 1 : NULL;
    }
    erg__free(text);
    erg__free(path);
    return found;
}

/* A directory of plan files with one file more than frontier.csv has rows: the last is the
 * all-max fallback when frontier-info.csv names it (fallback_time_s, fallback_energy_j);
 * ERG_ENOTFOUND when it does not. */
static erg_status fallback_point(const char *dir, erg_frontier *f, char **files, erg_error *err)
{
    erg_frontier_point p = {0, 0, NAN, NAN, -1};
    if (!info_number(dir, "fallback_time_s", &p.time_s) ||
        !info_number(dir, "fallback_energy_j", &p.energy_j) || !(p.time_s > 0))
        return ERG_ENOTFOUND;
    erg_status st = grow_points(f, err);
    if (st)
        return st;
    f->pts[f->np] = p;
    f->files[f->np] = files[f->np];
    files[f->np] = NULL;
    f->np++;
    f->fallback = true;
    return ERG_OK;
}

static erg_status read_dir_locked(const char *dir, const erg_schedule *hint, erg_frontier **out,
                                  erg_error *err)
{
    *out = NULL;
    size_t dl = strlen(dir);
    char *path = erg__malloc(dl + 32), *csv = erg__malloc(dl + 32);
    if (!path || !csv) {
        erg__free(path);
        erg__free(csv);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    /* every plan in one file (plans.ergon) when there is one */
    snprintf(path, dl + 32, "%s/" ERG__PACKED_NAME, dir);
    snprintf(csv, dl + 32, "%s/frontier.csv", dir);
    struct stat psb;
    if (stat(path, &psb) == 0) {
        erg_status pst = erg__frontier_read_packed(path, hint, out, err);
        if (!pst && stat(csv, &psb) == 0 && (pst = check_csv_matches(*out, csv, path, err))) {
            erg_frontier_free(*out);
            *out = NULL;
        }
        erg__free(path);
        erg__free(csv);
        return pst;
    }
    erg__free(csv);
    snprintf(path, dl + 32, "%s/frontier.csv", dir);
    char *text = NULL;
    size_t len;
    erg_status st = erg__read_file(path, 1u << 30, &text, &len, err);
    if (st) {
        erg__free(path);
        return st;
    }
    erg_frontier *f = NULL;
    char **files = NULL;
    size_t nfiles = 0;
    erg__csv c;
    erg__csv_init(&c, text, len);
    /* JSON plans name their schedule (and carry a file schedule's order), so
     * they are preferred; .py plans need the hint's schedule. */
    st = list_files(dir, "plan_", ".json", &files, &nfiles, err);
    if (!st && nfiles == 0) {
        erg__free(files);
        st = list_files(dir, "freqs_pipeline_", ".py", &files, &nfiles, err);
    }
    if (!st && nfiles == 0)
        st = erg_error_set(err, ERG_ENOTFOUND,
                           "%s: no plans beside it (no " ERG__PACKED_NAME
                           ", plan_*.json or freqs_pipeline_*.py in the directory)",
                           path);
    if (st)
        goto done;
    st = erg__frontier_new(0, 0, hint, 0, 0, &f, err);
    if (st)
        goto done;
    f->files = erg__calloc(1, sizeof(char *));
    if (!f->files) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    int r = erg__csv_next(&c);
    if (r <= 0 || c.nfields < 2 || strcmp(c.fields[0], "time") || strcmp(c.fields[1], "energy")) {
        st = erg_error_set(err, ERG_EPARSE, "%s:1: expected the header 'time,energy'", path);
        goto done;
    }
    while ((r = erg__csv_next(&c)) > 0) {
        double t, e;
        if (c.nfields != 2 || !erg__parse_double(c.fields[0], &t) ||
            !erg__parse_double(c.fields[1], &e) || t <= 0) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: expected 'time,energy' with a positive time", path, c.line);
            goto done;
        }
        if (f->np >= nfiles) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: more rows than plan files (%zu) in the directory", path,
                               c.line, nfiles);
            goto done;
        }
        st = grow_points(f, err);
        if (st)
            goto done;
        erg_frontier_point p = {t, e, NAN, NAN, -1};
        f->pts[f->np] = p;
        f->files[f->np] = files[f->np];
        files[f->np] = NULL;
        f->np++;
    }
    if (r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    else if (f->np == 0)
        st = erg_error_set(err, ERG_EPARSE, "%s: no plans", path);
    else if (f->np + 1 == nfiles && (st = fallback_point(dir, f, files, err)) != ERG_ENOTFOUND)
        ; /* the last plan file is the all-max fallback, its point in frontier-info.csv */
    else if ((st = ERG_OK, f->np != nfiles))
        st = erg_error_set(err, ERG_EPARSE, "%s: %zu rows but %zu plan files", path, f->np, nfiles);
    if (!st) {
        erg_plan *p0;
        st = erg_plan_read(f->files[0], hint, &p0, err);
        if (!st) {
            f->S = erg_plan_num_stages(p0);
            f->M = erg_plan_num_microbatches(p0);
            f->tmpl = p0;
            f->sched = erg_plan_schedule(p0);
            f->off = erg__calloc((size_t)f->S + 1, sizeof(int));
            if (!f->off)
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            for (int q = 0; q < f->S && !st; q++)
                f->off[q + 1] = f->off[q] + erg_plan_stage_len(p0, q);
            if (!st)
                f->n = f->off[f->S];
        }
    }
done:
    erg__csv_free(&c);
    erg__free(text);
    erg__free(path);
    if (files) {
        for (size_t i = 0; i < nfiles; i++)
            erg__free(files[i]);
        erg__free(files);
    }
    if (st) {
        erg_frontier_free(f);
        return st;
    }
    *out = f;
    return ERG_OK;
}

erg_status erg_frontier_read_dir(const char *dir, const erg_schedule *hint, erg_frontier **out,
                                 erg_error *err)
{
    *out = NULL;
    erg_frontier_dir_lock *lock = NULL;
    erg_status st =
        erg_frontier_dir_lock_take(dir, false, ERG_FRONTIER_DIR_LOCK_WAIT_S, &lock, err);
    if (!st)
        st = read_dir_locked(dir, hint, out, err);
    erg_frontier_dir_lock_release(lock);
    return st;
}

const char *erg_frontier_plan_path(const erg_frontier *f, size_t k)
{
    return f && f->files && k < f->np ? f->files[k] : NULL;
}

static erg_status copy_file(const char *from, const char *to, erg_error *err)
{
    char *text;
    size_t len;
    erg_status st = erg__read_file(from, 1u << 30, &text, &len, err);
    if (st)
        return st;
    st = erg__write_file(to, text, len, err);
    erg__free(text);
    return st;
}

/* The all-max baseline of a frontier directory (frontier-info.csv, profile.csv: emulate's
 * frontier_save.c writes them) goes with its plans, when it has one. */
static erg_status copy_baseline(const char *in, const char *out, erg_error *err)
{
    static const char *const names[] = {"frontier-info.csv", "profile.csv"};
    size_t il = strlen(in) + 32, ol = strlen(out) + 32;
    char *from = erg__malloc(il), *to = erg__malloc(ol);
    erg_status st = !from || !to ? erg_error_set(err, ERG_ENOMEM, "out of memory") : ERG_OK;
    struct stat sb;
    if (!st)
        snprintf(from, il, "%s/%s", in, names[0]);
    for (int i = 0; i < 2 && !st && stat(from, &sb) == 0; i++) {
        snprintf(from, il, "%s/%s", in, names[i]);
        snprintf(to, ol, "%s/%s", out, names[i]);
        st = copy_file(from, to, err);
    }
    erg__free(from);
    erg__free(to);
    return st;
}

erg_status erg_frontier_sample_dir(const char *in, const char *out, size_t every, size_t *kept,
                                   size_t *total, erg_error *err)
{
    if (every < 1)
        return erg_error_set(err, ERG_EINVAL, "the sampling distance must be at least 1");
    struct stat sb;
    if (stat(out, &sb) == 0)
        return erg_error_set(err, ERG_EEXIST, "%s already exists; choose a new directory", out);
    erg_frontier *f;
    erg_status st = erg_frontier_read_dir(in, NULL, &f, err);
    if (st)
        return st;
    st = erg__mkdir_p(out, err);
    if (!st && !f->files) { /* read from plans.ergon: write one too */
        size_t ol = strlen(out) + 32;
        char *pp = erg__malloc(ol);
        if (!pp) {
            erg_frontier_free(f);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        snprintf(pp, ol, "%s/" ERG__PACKED_NAME, out);
        st = erg__frontier_write_packed(f, pp, every, kept, NULL, err);
        erg_frontier *g = NULL;
        if (!st)
            st = erg__frontier_read_packed(pp, NULL, &g, err);
        if (!st)
            st = erg_frontier_write_dir(g, out, ERG_FRONTIER_CSV, NULL, NULL, err);
        if (!st)
            st = copy_baseline(in, out, err);
        if (!st && kept && erg_frontier_has_fallback(g))
            --*kept; /* the planner's plans kept */
        erg_frontier_free(g);
        erg__free(pp);
        if (total)
            *total = erg_frontier_num_planned(f);
        erg_frontier_free(f);
        return st;
    }
    erg__buf csv = {0};
    size_t n = 0;
    char *path = erg__malloc(strlen(out) + 300);
    if (!path)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st)
        st = erg__buf_append(&csv, "time,energy\n", 12);
    size_t planned = erg_frontier_num_planned(f);
    for (size_t k = 0; k < f->np && !st; k++) {
        if (k < planned && k % every != 0 && k + 1 != planned)
            continue;
        const char *src = f->files[k];
        const char *base = strrchr(src, '/');
        base = base ? base + 1 : src;
        snprintf(path, strlen(out) + 300, "%s/%s", out, base);
        st = copy_file(src, path, err);
        /* the twin in the other format (.py <-> .json), when there is one */
        size_t bl = strlen(src);
        char *twin = erg__malloc(bl + 32);
        if (!st && twin) {
            snprintf(twin, bl + 32, "%s", src);
            char *slash = strrchr(twin, '/');
            char *name = slash ? slash + 1 : twin;
            unsigned long idx;
            char tname[64] = "";
            if (sscanf(name, "freqs_pipeline_%lu.py", &idx) == 1)
                snprintf(tname, sizeof tname, "plan_%05lu.json", idx);
            else if (sscanf(name, "plan_%lu.json", &idx) == 1)
                snprintf(tname, sizeof tname, "freqs_pipeline_%05lu.py", idx);
            if (tname[0]) {
                snprintf(name, bl + 32 - (size_t)(name - twin), "%s", tname);
                if (stat(twin, &sb) == 0) {
                    snprintf(path, strlen(out) + 300, "%s/%s", out, tname);
                    st = copy_file(twin, path, err);
                }
            }
        }
        erg__free(twin);
        char t[40], e[40];
        if (k >= planned) /* the all-max fallback: its file only (frontier-info.csv names it) */
            continue;
        if (!st)
            st = erg__buf_printf(&csv, "%s,%s\n", erg__fmt_double_py(f->pts[k].time_s, t, sizeof t),
                                 erg__fmt_double_py(f->pts[k].energy_j, e, sizeof e));
        n++;
    }
    if (!st) {
        snprintf(path, strlen(out) + 300, "%s/frontier.csv", out);
        st = erg__write_file(path, csv.data, csv.len, err);
    }
    if (!st)
        st = copy_baseline(in, out, err);
    if (kept)
        *kept = n;
    if (total)
        *total = planned;
    erg__buf_free(&csv);
    erg__free(path);
    erg_frontier_free(f);
    return st;
}

/* ---- plan choice ---- */

erg_status erg_frontier_choose_deadline(const erg_frontier *f, double deadline_s, size_t *index,
                                        erg_error *err)
{
    if (!f || f->np == 0)
        return erg_error_set(err, ERG_EINVAL, "the frontier is empty");
    if (!(deadline_s > 0) || !isfinite(deadline_s))
        return erg_error_set(err, ERG_EINVAL, "the deadline must be a positive time, got %g s",
                             deadline_s);
    size_t best = SIZE_MAX;
    double tmin = INFINITY;
    /* A tiny relative slack so that a deadline equal to a printed time fits. */
    double limit = deadline_s * (1 + 1e-12);
    for (size_t k = 0; k < f->np; k++) {
        if (f->pts[k].time_s < tmin)
            tmin = f->pts[k].time_s;
        if (f->pts[k].time_s <= limit &&
            (best == SIZE_MAX || f->pts[k].energy_j < f->pts[best].energy_j))
            best = k;
    }
    if (best == SIZE_MAX)
        return erg_error_set(err, ERG_ENOTFOUND,
                             "no plan meets the deadline of %.6g s: the fastest plan takes %.6g s",
                             deadline_s, tmin);
    *index = best;
    return ERG_OK;
}

erg_status erg_frontier_choose_slowdown(const erg_frontier *f, double slowdown, size_t *index,
                                        erg_error *err)
{
    if (!f || f->np == 0)
        return erg_error_set(err, ERG_EINVAL, "the frontier is empty");
    if (!(slowdown >= 1) || !isfinite(slowdown))
        return erg_error_set(err, ERG_EINVAL,
                             "the slowdown must be a factor >= 1 (e.g. 1.01 for 1%%), got %g",
                             slowdown);
    double tmin = INFINITY;
    for (size_t k = 0; k < f->np; k++)
        if (f->pts[k].time_s < tmin)
            tmin = f->pts[k].time_s;
    return erg_frontier_choose_deadline(f, tmin * slowdown, index, err);
}

erg_status erg_frontier_append_plan(erg_frontier *f, const erg_plan *p,
                                    const erg_frontier_point *pt, erg_error *err)
{
    if (!f || !p || !pt)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_append_plan: NULL argument");
    if (f->files || !f->tmpl || f->np == 0)
        return erg_error_set(err, ERG_EINVAL,
                             "only a computed frontier with plans can take another plan");
    if (erg_plan_num_stages(p) != f->S || erg_plan_num_microbatches(p) != f->M)
        return erg_error_set(err, ERG_EINVAL,
                             "the plan has %d stages and %d microbatches, the frontier %d and %d",
                             erg_plan_num_stages(p), erg_plan_num_microbatches(p), f->S, f->M);
    for (int s = 0; s < f->S; s++)
        if (erg_plan_stage_len(p, s) != f->off[s + 1] - f->off[s] ||
            !erg_plan_stage_freqs_const(p, s))
            return erg_error_set(err, ERG_EINVAL,
                                 "the plan's stage %d has %d instructions, the frontier's %d", s,
                                 erg_plan_stage_len(p, s), f->off[s + 1] - f->off[s]);
    if (f->fallback)
        return erg_error_set(err, ERG_EINVAL, "the frontier already has its all-max fallback");
    if (!(pt->time_s <= f->pts[f->np - 1].time_s))
        return erg_error_set(err, ERG_EINVAL,
                             "an appended plan's time (%.17g s) must not exceed the fastest "
                             "plan's (%.17g s)",
                             pt->time_s, f->pts[f->np - 1].time_s);
    int *prev = erg__malloc(sizeof(int) * (size_t)f->n);
    int *cur = erg__malloc(sizeof(int) * (size_t)f->n);
    erg_status st = ERG_OK;
    if (!prev || !cur) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    replay(f, f->np - 1, prev);
    for (int s = 0; s < f->S; s++)
        memcpy(cur + f->off[s], erg_plan_stage_freqs_const(p, s),
               sizeof(int) * (size_t)(f->off[s + 1] - f->off[s]));
    st = erg__frontier_begin_plan(f, pt, err);
    for (int i = 0; !st && i < f->n; i++)
        if (cur[i] != prev[i])
            st = erg__frontier_add_change(f, i, cur[i], err);
    if (!st)
        st = erg__frontier_end_plan(f, cur, err);
    if (!st)
        f->fallback = true;
done:
    erg__free(prev);
    erg__free(cur);
    return st;
}

/* ---- for the packed plan file (frontier_pack.c) ---- */

bool erg__frontier_computed(const erg_frontier *f)
{
    return f && !f->files;
}

const erg_schedule *erg__frontier_schedule(const erg_frontier *f)
{
    return &f->sched;
}

void erg__frontier_advance(const erg_frontier *f, size_t k, int *freq)
{
    if (k == 0) {
        memcpy(freq, f->ckpt, sizeof(int) * (size_t)f->n);
        return;
    }
    for (size_t i = f->chg_off[k]; i < f->chg_off[k + 1]; i++)
        freq[f->chg_id[i]] = f->chg_f[i];
}

void erg__frontier_replay(const erg_frontier *f, size_t k, int *freq)
{
    replay(f, k, freq);
}

const int *erg__frontier_rank_offsets(const erg_frontier *f)
{
    return f->off;
}

const erg_order *erg__frontier_order(const erg_frontier *f)
{
    return f->tmpl ? erg_plan_order(f->tmpl) : NULL;
}

/* ---- frontiers built outside the Perseus planner ---- */

erg_status erg_frontier_new(int S, int M, const erg_schedule *sched, double unit_s,
                            double blocking_power_w, erg_frontier **out, erg_error *err)
{
    *out = NULL;
    if (S < 1 || M < 1 || !sched)
        return erg_error_set(err, ERG_EINVAL,
                             "a frontier needs a schedule, at least 1 rank "
                             "and 1 microbatch (S=%d, M=%d)",
                             S, M);
    return erg__frontier_new(S, M, sched, unit_s, blocking_power_w, out, err);
}

erg_status erg_frontier_push(erg_frontier *f, const erg_frontier_point *pt, const int *freq,
                             erg_error *err)
{
    if (!erg__frontier_computed(f) || !f->tmpl)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_push: not a computed frontier");
    erg_status st;
    if (!f->pushed && !(f->pushed = erg__malloc(sizeof(int) * (size_t)(f->n ? f->n : 1))))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (f->np == 0) {
        if ((st = erg__frontier_set_initial(f, freq, err)))
            return st;
        memcpy(f->pushed, freq, sizeof(int) * (size_t)f->n);
    } else if (f->pushed_np != f->np) {
        replay(f, f->np - 1, f->pushed); /* plans were added another way since */
    }
    if ((st = erg__frontier_begin_plan(f, pt, err)))
        return st;
    for (int i = 0; i < f->n; i++)
        if (freq[i] != f->pushed[i]) {
            f->pushed[i] = freq[i];
            if ((st = erg__frontier_add_change(f, i, freq[i], err)))
                return st;
        }
    if ((st = erg__frontier_end_plan(f, freq, err)))
        return st;
    f->pushed_np = f->np;
    return ERG_OK;
}

erg_status erg_frontier_plan_clocks(const erg_frontier *f, size_t k, bool sequential, int *freq,
                                    erg_error *err)
{
    if (k >= f->np)
        return erg_error_set(err, ERG_EINVAL, "plan %zu of a frontier of %zu plans", k, f->np);
    if (erg__frontier_computed(f)) {
        if (sequential)
            erg__frontier_advance(f, k, freq);
        else
            replay(f, k, freq);
        return ERG_OK;
    }
    erg_plan *p;
    erg_status st = erg_frontier_plan(f, k, &p, err);
    if (st)
        return st;
    int S = erg_plan_num_stages(p), off = 0;
    for (int s = 0; s < S; s++) {
        int len = erg_plan_stage_len(p, s);
        memcpy(freq + off, erg_plan_stage_freqs_const(p, s), sizeof(int) * (size_t)len);
        off += len;
    }
    erg_plan_free(p);
    return ERG_OK;
}

/* power.c: a plan's power over one iteration (docs/fleet.md).
 *
 * The emulator places every instruction on the timeline (erg_emulate_ex); while an instruction
 * runs, its GPU draws the instruction's profiled energy over its profiled time at its clock
 * (the clock's power), and while a GPU waits it draws the blocking power. The job's power is
 * the sum over its GPUs: a step function with a step wherever an instruction starts or ends.
 * Iterations repeat, so the trace is periodic with the iteration time as its period, and the
 * window statistics (swing, ramp) wrap around the iteration's end. */
#include "core/internal.h"
#include "ergon/emulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct erg_power_trace {
    int num_gpus;
    size_t len; /* segments */
    double period_s;
    double *t;     /* len + 1 breakpoints: t[0] = 0, t[len] = period_s */
    double *gpu_w; /* len x num_gpus */
    double *compute_w;
    double *blocking_w;
    double *total_w;
};

void erg_power_trace_free(erg_power_trace *tr)
{
    if (!tr)
        return;
    erg__free(tr->t);
    erg__free(tr->gpu_w);
    erg__free(tr->compute_w);
    erg__free(tr->blocking_w);
    erg__free(tr->total_w);
    erg__free(tr);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The sorted distinct breakpoints of the instructions' starts and ends within [0, T]. */
static size_t breakpoints(const double *es, const double *dur, int n, double T, double *bp)
{
    size_t k = 0;
    bp[k++] = 0;
    bp[k++] = T;
    for (int i = 0; i < n; i++) {
        bp[k++] = es[i];
        bp[k++] = es[i] + dur[i];
    }
    qsort(bp, k, sizeof *bp, cmp_double);
    double eps = 1e-12 * (T > 0 ? T : 1);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (bp[i] < 0 || bp[i] > T)
            continue;
        if (m && bp[i] - bp[m - 1] <= eps)
            continue;
        bp[m++] = bp[i];
    }
    if (m >= 2)
        bp[m - 1] = T; /* the last one is the period itself */
    return m;
}

/* The segment holding time x (bp[j] <= x < bp[j + 1]); len segments. */
static size_t segment_of(const double *bp, size_t len, double x)
{
    size_t lo = 0, hi = len;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (bp[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static erg_status fill(erg_power_trace *tr, const erg_profile *profile, const erg_dag *dag,
                       const erg_plan *plan, const double *es, const double *dur, double p_block,
                       erg_error *err)
{
    int S = tr->num_gpus;
    size_t L = tr->len;
    for (size_t j = 0; j < L; j++)
        for (int s = 0; s < S; s++)
            tr->gpu_w[j * (size_t)S + (size_t)s] = -1; /* idle until an instruction covers it */
    for (int s = 0; s < S; s++) {
        const int *f = erg_plan_stage_freqs_const(plan, s);
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        for (int k = 0; k < len; k++) {
            int id = off + k;
            erg_profile_point pt;
            erg_status st = erg_instr_cost_point(profile, dag, id, f[k], &pt, err);
            if (st)
                return st;
            if (!(dur[id] > 0))
                continue;
            double p = pt.time_s > 0 ? pt.energy_j / pt.time_s : 0;
            double mid_lo = es[id], mid_hi = es[id] + dur[id];
            size_t j = segment_of(tr->t, L, mid_lo + 1e-12 * (tr->period_s + 1));
            for (; j < L && tr->t[j] < mid_hi - 1e-12 * (tr->period_s + 1); j++)
                tr->gpu_w[j * (size_t)S + (size_t)s] = p;
        }
    }
    for (size_t j = 0; j < L; j++) {
        double c = 0, b = 0;
        for (int s = 0; s < S; s++) {
            double *w = &tr->gpu_w[j * (size_t)S + (size_t)s];
            if (*w < 0) {
                *w = p_block;
                b += p_block;
            } else {
                c += *w;
            }
        }
        tr->compute_w[j] = c;
        tr->blocking_w[j] = b;
        tr->total_w[j] = c + b;
    }
    return ERG_OK;
}

erg_status erg_power_trace_new(const erg_profile *profile, const erg_dag *dag, const erg_plan *plan,
                               const erg_emulate_opts *opts, erg_power_trace **out, erg_error *err)
{
    if (!profile || !dag || !plan || !opts || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_new: NULL argument");
    *out = NULL;
    int n = erg_dag_num_instrs(dag), S = erg_dag_num_stages(dag);
    double *es = erg__calloc((size_t)n * 2 + 1, sizeof(double));
    double *bp = erg__calloc((size_t)n * 2 + 2, sizeof(double));
    erg_power_trace *tr = erg__calloc(1, sizeof *tr);
    erg_status st = ERG_OK;
    if (!es || !bp || !tr) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    double *dur = es + n;
    erg_emulation em;
    st = erg_emulate_ex(profile, dag, plan, opts, &em, es, dur, err);
    if (st)
        goto fail;
    if (!(em.time_s > 0)) {
        st = erg_error_set(err, ERG_EINVAL, "power trace: the plan's iteration takes %g s",
                           em.time_s);
        goto fail;
    }
    size_t m = breakpoints(es, dur, n, em.time_s, bp);
    tr->num_gpus = S;
    tr->len = m - 1;
    tr->period_s = em.time_s;
    tr->t = bp;
    bp = NULL;
    tr->gpu_w = erg__calloc(tr->len * (size_t)S, sizeof(double));
    tr->compute_w = erg__calloc(tr->len, sizeof(double));
    tr->blocking_w = erg__calloc(tr->len, sizeof(double));
    tr->total_w = erg__calloc(tr->len, sizeof(double));
    if (!tr->gpu_w || !tr->compute_w || !tr->blocking_w || !tr->total_w) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    st = fill(tr, profile, dag, plan, es, dur, opts->blocking_power_w, err);
    if (st)
        goto fail;
    erg__free(es);
    *out = tr;
    return ERG_OK;
fail:
    erg__free(es);
    erg__free(bp);
    erg_power_trace_free(tr);
    return st;
}

erg_status erg_power_trace_floor(const erg_power_trace *tr, double floor_w, erg_power_trace **out,
                                 erg_error *err)
{
    if (!tr || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_floor: NULL argument");
    if (!(floor_w >= 0) || !isfinite(floor_w))
        return erg_error_set(err, ERG_EINVAL, "power floor: %g W is not a power", floor_w);
    *out = NULL;
    size_t L = tr->len, S = (size_t)tr->num_gpus;
    erg_power_trace *c = erg__calloc(1, sizeof *c);
    if (c) {
        *c = *tr;
        c->t = erg__malloc((L + 1) * sizeof(double));
        c->gpu_w = erg__malloc((L * S > 0 ? L * S : 1) * sizeof(double));
        c->compute_w = erg__malloc(L * sizeof(double));
        c->blocking_w = erg__malloc(L * sizeof(double));
        c->total_w = erg__malloc(L * sizeof(double));
    }
    if (!c || !c->t || !c->gpu_w || !c->compute_w || !c->blocking_w || !c->total_w) {
        erg_power_trace_free(c);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    memcpy(c->t, tr->t, (L + 1) * sizeof(double));
    for (size_t j = 0; j < L; j++) {
        double add_b = 0;
        for (size_t g = 0; g < S; g++) {
            double w = tr->gpu_w[j * S + g], v = w < floor_w ? floor_w : w;
            c->gpu_w[j * S + g] = v;
            add_b += v - w; /* what the floor burns counts with the blocking power */
        }
        c->compute_w[j] = tr->compute_w[j];
        c->blocking_w[j] = tr->blocking_w[j] + add_b;
        c->total_w[j] = c->compute_w[j] + c->blocking_w[j];
    }
    *out = c;
    return ERG_OK;
}

size_t erg_power_trace_len(const erg_power_trace *tr)
{
    return tr ? tr->len : 0;
}

int erg_power_trace_num_gpus(const erg_power_trace *tr)
{
    return tr ? tr->num_gpus : 0;
}

double erg_power_trace_period(const erg_power_trace *tr)
{
    return tr ? tr->period_s : NAN;
}

bool erg_power_trace_segment(const erg_power_trace *tr, size_t i, erg_power_segment *seg)
{
    if (!tr || i >= tr->len || !seg)
        return false;
    seg->start_s = tr->t[i];
    seg->end_s = tr->t[i + 1];
    seg->total_w = tr->total_w[i];
    seg->compute_w = tr->compute_w[i];
    seg->blocking_w = tr->blocking_w[i];
    return true;
}

double erg_power_trace_gpu(const erg_power_trace *tr, size_t i, int gpu)
{
    if (!tr || i >= tr->len || gpu < 0 || gpu >= tr->num_gpus)
        return NAN;
    return tr->gpu_w[i * (size_t)tr->num_gpus + (size_t)gpu];
}

/* ---- statistics over the periodic step function ---- */

/* Segment j of the trace repeated: j may run past len (the next iteration). */
static double seg_start(const erg_power_trace *tr, size_t j)
{
    size_t q = j / tr->len, r = j % tr->len;
    return (double)q * tr->period_s + tr->t[r];
}

static double seg_total(const erg_power_trace *tr, size_t j)
{
    return tr->total_w[j % tr->len];
}

/* The power at time x (any real: periodic). */
static double power_at(const erg_power_trace *tr, double x)
{
    double T = tr->period_s;
    x = fmod(x, T);
    if (x < 0)
        x += T;
    return tr->total_w[segment_of(tr->t, tr->len, x)];
}

/* Largest max - min of the power inside any window of w seconds (0 < w < T): for each first
 * segment i the widest set of segments a window starting in it reaches is i .. J(i), with J the
 * last segment starting before t[i + 1] + w; both ends only move forward, so two monotone
 * queues give every range's max and min. */
static erg_status window_swing(const erg_power_trace *tr, double w, double *swing, erg_error *err)
{
    size_t L = tr->len, cap = 2 * L + 2;
    size_t *qmax = erg__calloc(cap * 2, sizeof(size_t));
    if (!qmax)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    size_t *qmin = qmax + cap;
    size_t hmax = 0, tmax = 0, hmin = 0, tmin = 0, next = 0;
    double best = 0;
    for (size_t i = 0; i < L; i++) {
        double limit = seg_start(tr, i + 1) + w;
        if (next < i)
            next = i;
        while (next < 2 * L && seg_start(tr, next) < limit) {
            double v = seg_total(tr, next);
            while (tmax > hmax && seg_total(tr, qmax[tmax - 1]) <= v)
                tmax--;
            qmax[tmax++] = next;
            while (tmin > hmin && seg_total(tr, qmin[tmin - 1]) >= v)
                tmin--;
            qmin[tmin++] = next;
            next++;
        }
        while (hmax < tmax && qmax[hmax] < i)
            hmax++;
        while (hmin < tmin && qmin[hmin] < i)
            hmin++;
        if (hmax < tmax && hmin < tmin) {
            double d = seg_total(tr, qmax[hmax]) - seg_total(tr, qmin[hmin]);
            if (d > best)
                best = d;
        }
    }
    erg__free(qmax);
    *swing = best;
    return ERG_OK;
}

/* max over t of |P(t + w) - P(t)| / w: the steepest slope of the power averaged over w seconds
 * (its derivative is exactly that). The difference is a step function whose steps are at the
 * trace's breakpoints and those moved back by w: checking every such point is exact. */
static double window_ramp(const erg_power_trace *tr, double w)
{
    double best = 0;
    for (size_t i = 0; i < tr->len; i++) {
        double pts[2] = {tr->t[i], tr->t[i] - w};
        for (int k = 0; k < 2; k++) {
            double d = fabs(power_at(tr, pts[k] + w) - power_at(tr, pts[k]));
            if (d > best)
                best = d;
        }
    }
    return best / w;
}

erg_status erg_power_trace_stats(const erg_power_trace *tr, double window_s, erg_power_stats *out,
                                 erg_error *err)
{
    if (!tr || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_stats: NULL argument");
    if (!(window_s > 0) || !isfinite(window_s))
        return erg_error_set(err, ERG_EINVAL,
                             "power statistics: the window must be a positive number of seconds, "
                             "not %g",
                             window_s);
    double e = 0, peak = -INFINITY, trough = INFINITY;
    for (size_t j = 0; j < tr->len; j++) {
        double d = tr->t[j + 1] - tr->t[j], v = tr->total_w[j];
        e += v * d;
        if (d <= 0)
            continue;
        if (v > peak)
            peak = v;
        if (v < trough)
            trough = v;
    }
    out->avg_w = e / tr->period_s;
    out->peak_w = peak;
    out->trough_w = trough;
    out->window_s = window_s;
    if (window_s >= tr->period_s) {
        out->swing_w = peak - trough;
    } else {
        erg_status st = window_swing(tr, window_s, &out->swing_w, err);
        if (st)
            return st;
    }
    out->ramp_w_per_s = window_ramp(tr, window_s);
    return ERG_OK;
}

erg_status erg_power_trace_format_csv(const erg_power_trace *tr, char **out, erg_error *err)
{
    if (!tr || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_format_csv: NULL argument");
    erg__buf b = {0};
    erg_status st = erg__buf_printf(&b, "start_s,end_s,total_w,compute_w,blocking_w");
    for (int s = 0; !st && s < tr->num_gpus; s++)
        st = erg__buf_printf(&b, ",gpu%d_w", s);
    if (!st)
        st = erg__buf_append(&b, "\n", 1);
    for (size_t j = 0; !st && j < tr->len; j++) {
        st = erg__buf_printf(&b, "%.9g,%.9g,%.6f,%.6f,%.6f", tr->t[j], tr->t[j + 1], tr->total_w[j],
                             tr->compute_w[j], tr->blocking_w[j]);
        for (int s = 0; !st && s < tr->num_gpus; s++)
            st = erg__buf_printf(&b, ",%.6f", tr->gpu_w[j * (size_t)tr->num_gpus + (size_t)s]);
        if (!st)
            st = erg__buf_append(&b, "\n", 1);
    }
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = b.data;
    return ERG_OK;
}

erg_status erg_power_trace_write_csv(const erg_power_trace *tr, const char *path, erg_error *err)
{
    if (!tr || !path)
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_write_csv: NULL argument");
    char *csv = NULL;
    erg_status st = erg_power_trace_format_csv(tr, &csv, err);
    if (!st)
        st = erg__write_file(path, csv, strlen(csv), err);
    erg__free(csv);
    return st;
}

/* ---- reading the CSV back ---- */

#define ERG__MAX_TRACE_BYTES (256u << 20)

static erg_status trace_alloc(erg_power_trace *tr, size_t len)
{
    size_t S = (size_t)tr->num_gpus;
    double **arrs[] = {&tr->t, &tr->compute_w, &tr->blocking_w, &tr->total_w};
    size_t ns[] = {len + 1, len, len, len};
    for (size_t i = 0; i < 4; i++) {
        double *p = erg__realloc(*arrs[i], (ns[i] ? ns[i] : 1) * sizeof(double));
        if (!p)
            return ERG_ENOMEM;
        *arrs[i] = p;
    }
    double *g = erg__realloc(tr->gpu_w, (len * S > 0 ? len * S : 1) * sizeof(double));
    if (!g)
        return ERG_ENOMEM;
    tr->gpu_w = g;
    return ERG_OK;
}

/* The header: start_s,end_s,total_w,compute_w,blocking_w,gpu0_w,...,gpu<N-1>_w (N >= 1). */
static erg_status trace_header(const erg__csv *c, const char *name, int *num_gpus, erg_error *err)
{
    static const char *const fixed[] = {"start_s", "end_s", "total_w", "compute_w", "blocking_w"};
    const char *want = "start_s,end_s,total_w,compute_w,blocking_w,gpu0_w,...";
    for (size_t i = 0; i < 5; i++)
        if (i >= c->nfields || strcmp(c->fields[i], fixed[i]))
            return erg_error_set(err, ERG_EPARSE, "%s:%ld: column %zu is '%s', expected '%s' (%s)",
                                 name, c->line, i + 1, i < c->nfields ? c->fields[i] : "", fixed[i],
                                 want);
    if (c->nfields < 6 || c->nfields - 5 > 1000000)
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: %zu GPU columns (expected 1 or more: %s)",
                             name, c->line, c->nfields < 5 ? 0 : c->nfields - 5, want);
    for (size_t i = 5; i < c->nfields; i++) {
        char col[32];
        snprintf(col, sizeof col, "gpu%zu_w", i - 5);
        if (strcmp(c->fields[i], col))
            return erg_error_set(err, ERG_EPARSE, "%s:%ld: column %zu is '%s', expected '%s'", name,
                                 c->line, i + 1, c->fields[i], col);
    }
    *num_gpus = (int)(c->nfields - 5);
    return ERG_OK;
}

/* Row j (the line in c): its segment's start and end and its powers. */
static erg_status trace_row(erg_power_trace *tr, size_t j, const erg__csv *c, const char *name,
                            erg_error *err)
{
    static const char *const cols[] = {"start_s", "end_s", "total_w", "compute_w", "blocking_w"};
    size_t S = (size_t)tr->num_gpus;
    if (c->nfields != S + 5)
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: expected %zu fields, found %zu", name,
                             c->line, S + 5, c->nfields);
    double v[5];
    for (size_t i = 0; i < c->nfields; i++) {
        double x;
        if (!erg__parse_double(c->fields[i], &x) || x < 0)
            return erg_error_set(err, ERG_EPARSE, "%s:%ld: %s '%s' is not a number >= 0", name,
                                 c->line, i < 5 ? cols[i] : "GPU power", c->fields[i]);
        if (i < 5)
            v[i] = x;
        else
            tr->gpu_w[j * S + (i - 5)] = x;
    }
    if (!j && v[0] != 0)
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: start_s %.17g: the first row starts at 0",
                             name, c->line, v[0]);
    if (j && v[0] != tr->t[j])
        return erg_error_set(err, ERG_EPARSE,
                             "%s:%ld: start_s %.17g is not the previous row's end_s %.17g", name,
                             c->line, v[0], tr->t[j]);
    if (v[1] < v[0])
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: end_s %.17g is before start_s %.17g", name,
                             c->line, v[1], v[0]);
    tr->t[j + 1] = v[1];
    tr->total_w[j] = v[2];
    tr->compute_w[j] = v[3];
    tr->blocking_w[j] = v[4];
    return ERG_OK;
}

erg_status erg_power_trace_parse_csv(const char *text, size_t len, const char *name,
                                     erg_power_trace **out, erg_error *err)
{
    if (!out || (!text && len))
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_parse_csv: NULL argument");
    *out = NULL;
    if (!name)
        name = "<power trace>";
    erg_power_trace *tr = erg__calloc(1, sizeof *tr);
    erg__csv c;
    erg__csv_init(&c, text ? text : "", len);
    erg_status st = tr ? ERG_OK : ERG_ENOMEM;
    int r = st ? -1 : erg__csv_next(&c);
    if (r == 0)
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: empty file (expected a header line "
                           "'start_s,end_s,total_w,compute_w,blocking_w,gpu0_w')",
                           name);
    else if (r > 0)
        st = trace_header(&c, name, &tr->num_gpus, err);
    size_t cap = 0;
    while (!st && r > 0 && (r = erg__csv_next(&c)) > 0) {
        if (tr->len + 1 > cap) {
            cap = erg__grow_cap(cap, tr->len + 1, 64);
            if (!cap || trace_alloc(tr, cap)) {
                r = -1;
                break;
            }
            tr->t[0] = 0;
        }
        st = trace_row(tr, tr->len, &c, name, err);
        tr->len += !st;
    }
    if (!st && r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st && !tr->len)
        st = erg_error_set(err, ERG_EPARSE, "%s: no rows after the header", name);
    if (!st && !(tr->t[tr->len] > 0))
        st = erg_error_set(err, ERG_EPARSE, "%s: the trace ends at %.17g s (expected > 0)", name,
                           tr->t[tr->len]);
    erg__csv_free(&c);
    if (st) {
        erg_power_trace_free(tr);
        return st;
    }
    tr->period_s = tr->t[tr->len];
    *out = tr;
    return ERG_OK;
}

erg_status erg_power_trace_read_csv(const char *path, erg_power_trace **out, erg_error *err)
{
    if (!path || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_power_trace_read_csv: NULL argument");
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_regular_file(path, ERG__MAX_TRACE_BYTES, &text, &len, err);
    if (!st)
        st = erg_power_trace_parse_csv(text, len, path, out, err);
    erg__free(text);
    return st;
}

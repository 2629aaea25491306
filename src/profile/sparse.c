/* sparse.c: sparse, adaptive profiling (docs/sparse-profiling.md). */
#include "ergon/sparse.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SPARSE_MAX_STAGES 4096

typedef struct curve {
    int budget;
    int nmeas;
    int nrep;    /* repeated measurements (a clock measured again) */
    bool *meas;  /* per clock index (descending clocks) */
    double *t_s; /* measured time at index (valid where meas) */
    double *e_j; /* measured energy */
    int *cnt;    /* measurements averaged into a point (NULL in pooled copies: 1) */
} curve;

struct erg_sparse {
    int S, n;
    int *freqs; /* descending */
    erg_sparse_opts o;
    curve *c; /* S * 2 */
    int measured;
    /* What every curve wants next, worked out again after a report (lazily:
     * erg_sparse_next is const to its callers, and asking is pure). */
    bool stale;
    int *want;  /* per curve: clock index, -1 when done */
    int *group; /* per stage: the lowest stage of its replica group */
    int *grid;  /* per stage: its grid index (see update_wants) */
    bool *pool_meas, *pool_taken; /* scratch over the clocks */
    double *pool_e;
    double *fit; /* under noise: the fit, [kind][quantity][stage][clock] */
};

void erg_sparse_opts_init(erg_sparse_opts *o)
{
    memset(o, 0, sizeof *o);
    o->patience = 2;
    o->rise_tolerance = 0.005;
    o->near_max = 2;
    o->time_margin = 1.0;
    o->energy_margin = 1.0;
    o->time_noise = 0.002;
    o->remeasure = true;
}

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

erg_status erg_sparse_new(int num_stages, const int *freqs_mhz, size_t num_freqs,
                          const erg_sparse_opts *opts, erg_sparse **out, erg_error *err)
{
    if (!out || (!freqs_mhz && num_freqs))
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_new: NULL argument");
    *out = NULL;
    if (num_stages < 1 || num_stages > SPARSE_MAX_STAGES)
        return erg_error_set(err, ERG_EINVAL, "sparse profiling: %d stages (need 1..%d)",
                             num_stages, SPARSE_MAX_STAGES);
    if (num_freqs > 100000)
        return erg_error_set(err, ERG_EINVAL, "sparse profiling: %zu clocks is too many",
                             num_freqs);
    erg_sparse_opts o;
    if (opts)
        o = *opts;
    else
        erg_sparse_opts_init(&o);
    if (o.budget < 0 || o.patience < 1 || !(o.rise_tolerance >= 0) ||
        !isfinite(o.rise_tolerance) || o.near_max < 0 || !(o.time_margin >= 0) ||
        !(o.time_margin <= 10) || !(o.energy_margin >= 0) || !(o.energy_margin <= 10) ||
        !(o.time_noise >= 0) || !(o.time_noise <= 1))
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling: invalid options (budget %d, patience %d, rise "
                             "tolerance %g, near-max %d, time margin %g, energy margin %g, time "
                             "noise %g; margins 0..10, noise 0..1)",
                             o.budget, o.patience, o.rise_tolerance, o.near_max, o.time_margin,
                             o.energy_margin, o.time_noise);
    erg_sparse *sp = erg__calloc(1, sizeof *sp);
    if (!sp)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    sp->freqs = erg__calloc(num_freqs ? num_freqs : 1, sizeof(int));
    if (!sp->freqs) {
        erg__free(sp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < num_freqs; i++) {
        if (freqs_mhz[i] <= 0) {
            erg__free(sp->freqs);
            erg__free(sp);
            return erg_error_set(err, ERG_EINVAL, "sparse profiling: clock %d MHz is not positive",
                                 freqs_mhz[i]);
        }
        sp->freqs[i] = freqs_mhz[i];
    }
    qsort(sp->freqs, num_freqs, sizeof(int), cmp_desc);
    size_t n = 0;
    for (size_t i = 0; i < num_freqs; i++)
        if (!n || sp->freqs[n - 1] != sp->freqs[i])
            sp->freqs[n++] = sp->freqs[i];
    if (n < 2) {
        erg__free(sp->freqs);
        erg__free(sp);
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling needs at least 2 distinct clocks, got %zu", n);
    }
    sp->S = num_stages;
    sp->n = (int)n;
    sp->o = o;
    int ncurves = 2 * num_stages;
    long full = (long)ncurves * sp->n;
    /* under noise a quarter: the fit averages neighbouring clocks */
    long budget = o.budget ? o.budget : o.time_noise >= ERG_SPARSE_NOISY ? full / 4 : full / 6;
    int per = (int)(budget / ncurves);
    int extra = (int)(budget % ncurves);
    if (!o.budget && per < 4)
        per = 4, extra = 0;
    if (per < 1) {
        erg__free(sp->freqs);
        erg__free(sp);
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling: a budget of %d points is less than one per "
                             "(stage, instruction) (%d)",
                             o.budget, ncurves);
    }
    sp->c = erg__calloc((size_t)ncurves, sizeof(curve));
    if (!sp->c) {
        erg_sparse_free(sp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    sp->want = erg__calloc((size_t)ncurves, sizeof(int));
    sp->group = erg__calloc((size_t)num_stages, sizeof(int));
    sp->grid = erg__calloc((size_t)num_stages, sizeof(int));
    sp->pool_meas = erg__calloc(n, sizeof(bool));
    sp->pool_taken = erg__calloc(n, sizeof(bool));
    sp->pool_e = erg__calloc(n, sizeof(double));
    sp->fit = erg__calloc(4 * (size_t)num_stages * n, sizeof(double));
    sp->stale = true;
    if (!sp->want || !sp->group || !sp->grid || !sp->pool_meas || !sp->pool_taken ||
        !sp->pool_e || !sp->fit) {
        sp->S = num_stages;
        erg_sparse_free(sp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int i = 0; i < ncurves; i++) {
        curve *c = &sp->c[i];
        c->budget = ERG__MIN(per + (i < extra), sp->n);
        c->meas = erg__calloc(n, sizeof(bool));
        c->t_s = erg__calloc(n, sizeof(double));
        c->e_j = erg__calloc(n, sizeof(double));
        c->cnt = erg__calloc(n, sizeof(int));
        if (!c->meas || !c->t_s || !c->e_j || !c->cnt) {
            sp->S = num_stages;
            erg_sparse_free(sp);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
    }
    *out = sp;
    return ERG_OK;
}

void erg_sparse_free(erg_sparse *sp)
{
    if (!sp)
        return;
    if (sp->c)
        for (int i = 0; i < 2 * sp->S; i++) {
            erg__free(sp->c[i].meas);
            erg__free(sp->c[i].t_s);
            erg__free(sp->c[i].e_j);
            erg__free(sp->c[i].cnt);
        }
    erg__free(sp->c);
    erg__free(sp->want);
    erg__free(sp->group);
    erg__free(sp->grid);
    erg__free(sp->pool_meas);
    erg__free(sp->pool_taken);
    erg__free(sp->pool_e);
    erg__free(sp->fit);
    erg__free(sp->freqs);
    erg__free(sp);
}

static const curve *get_curve(const erg_sparse *sp, int stage, erg_instr_kind kind)
{
    if (!sp || stage < 0 || stage >= sp->S || (kind != ERG_FORWARD && kind != ERG_BACKWARD))
        return NULL;
    return &sp->c[2 * stage + (int)kind];
}

static int freq_index(const erg_sparse *sp, int f)
{
    int lo = 0, hi = sp->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (sp->freqs[mid] == f)
            return mid;
        if (sp->freqs[mid] > f)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Index of the lowest measured energy (ties: the higher clock), -1 if none. */
static int argmin_energy(const erg_sparse *sp, const bool *meas, const double *e_j)
{
    int best = -1;
    for (int i = 0; i < sp->n; i++)
        if (meas[i] && (best < 0 || e_j[i] < e_j[best]))
            best = i;
    return best;
}

/* Whether the descent is over: at the bottom, or past the first third of the
 * range and below the lowest energy found, energy rose `patience`
 * measurements in a row (Zeus's rule). Only measurements at least `spacing`
 * clocks apart count (1: all): a replica group descends clock by clock, and
 * the jags of a flat curve top would stop it at once. */
static bool descent_done(const erg_sparse *sp, const bool *meas, const double *e_j, int lowest,
                         int spacing)
{
    if (lowest == sp->n - 1)
        return true;
    if (lowest < (sp->n - 1) / 3 || sp->o.time_noise >= ERG_SPARSE_NOISY)
        return false; /* (under noise a rise is no evidence: go to the bottom) */
    int m = argmin_energy(sp, meas, e_j);
    double thr = e_j[m] * (1 + sp->o.rise_tolerance);
    int rises = 0, last = m;
    for (int i = m + 1; i < sp->n; i++)
        if (meas[i] && i - last >= spacing) {
            last = i;
            if (e_j[i] > thr)
                rises++;
            else
                rises = 0;
        }
    return rises >= sp->o.patience;
}

/* Whether stages a and b are replicas: at every clock both measured (at least
 * two, the highest among them) both instructions took the same time and
 * energy, to rounding. A profile that measured one stage and copied it to its
 * identical peers has such stages; on a real GPU measurement noise makes two
 * stages never agree this closely, and nothing is pooled. */
static bool replicas(const erg_sparse *sp, int a, int b)
{
    for (int k = 0; k < 2; k++) {
        const curve *ca = &sp->c[2 * a + k], *cb = &sp->c[2 * b + k];
        if (!ca->meas[0] || !cb->meas[0])
            return false;
        int common = 0;
        for (int x = 0; x < sp->n; x++) {
            if (!ca->meas[x] || !cb->meas[x])
                continue;
            if (fabs(ca->t_s[x] - cb->t_s[x]) > 1e-9 * ca->t_s[x] ||
                fabs(ca->e_j[x] - cb->e_j[x]) > 1e-9 * fabs(ca->e_j[x]))
                return false;
            common++;
        }
        if (common < 2)
            return false;
    }
    return true;
}

/* group[s] receives the lowest stage of stage s's replica group. Beyond 256
 * stages (the test is quadratic in them) every stage is its own group. */
static void find_groups(const erg_sparse *sp, int *group)
{
    for (int s = 0; s < sp->S; s++) {
        group[s] = s;
        for (int r = 0; r < s && sp->S <= 256; r++)
            if (group[r] == r && replicas(sp, r, s)) {
                group[s] = r;
                break;
            }
    }
}

/* The near-maximum clocks measured first and the descent's stride, for a
 * series with `budget` points: the budget reaches about 80 % of the range. */
static int descent_stride(const erg_sparse *sp, int budget, int *near_out)
{
    int near = ERG__MAX(ERG__MIN(ERG__MIN(sp->o.near_max, budget - 4), sp->n - 1), 0);
    int left = budget - 1 - near;
    int stride = (int)ceil(0.8 * (sp->n - 1 - near) / (left > 1 ? left - 1 : 1));
    if (near_out)
        *near_out = near;
    return stride < 1 ? 1 : stride;
}

/* Offset of a stage's first descent step in 0..stride-1: the van der Corput
 * sequence (0, 1/2, 1/4, 3/4, 1/8, ...) of its grid index scaled to the
 * stride, so that any number of consecutive grids spread evenly over the
 * clocks between two steps (the shared shape sees them all). */
static int stagger(int g, int stride)
{
    double v = 0, b = 0.5;
    for (unsigned u = (unsigned)g; u; u >>= 1, b /= 2)
        if (u & 1)
            v += b;
    return (int)(v * stride) % stride;
}

/* The next clock index of one series -- a stage's own curve, or the pooled
 * curve of a replica group -- or -1 when it wants no more. meas/e_j: the
 * measured clocks and energies; taken: meas plus the clocks already handed to
 * other replicas this round (they count for where to go next, not for the
 * energy rules); spent of budget points used; grid: its grid index;
 * spacing: see descent_done. */
static int series_next(const erg_sparse *sp, const bool *meas, const bool *taken,
                       const double *e_j, int spent, int budget, int grid, int spacing)
{
    if (spent >= budget)
        return -1;
    if (!taken[0])
        return 0;
    /* The clocks right below the maximum: where time is still flat and
     * energy already falls, what plans near the all-max time use. */
    int near;
    int stride = descent_stride(sp, budget, &near);
    for (int i = 1; i <= near; i++)
        if (!taken[i])
            return i;
    int lowest = 0;
    for (int i = 0; i < sp->n; i++)
        if (taken[i])
            lowest = i;
    if (!descent_done(sp, meas, e_j, lowest, spacing)) {
        /* stagger the grids of different stages so that together they cover
         * the clocks (the shared shape of the prediction) */
        if (lowest == near)
            return ERG__MIN(lowest + 1 + (stride > 1 ? stagger(grid, stride) : 0), sp->n - 1);
        return ERG__MIN(lowest + stride, sp->n - 1);
    }
    /* Refinement: split the widest gap between measured clocks above the
     * lowest one; gaps next to the lowest-energy clock count double. */
    int m = argmin_energy(sp, meas, e_j);
    int best = -1;
    double best_score = 0;
    int prev = 0;
    for (int i = 1; i <= lowest; i++) {
        if (!taken[i])
            continue;
        int gap = i - prev;
        if (gap >= 2) {
            double score = gap * ((prev == m || i == m) ? 2.0 : 1.0);
            if (score > best_score) {
                best_score = score;
                best = (prev + i) / 2;
            }
        }
        prev = i;
    }
    return best;
}

/* Whether the measurements are noisy enough to be fitted rather than trusted
 * point by point. */
static bool noisy_mode(const erg_sparse *sp)
{
    return sp->o.time_noise >= ERG_SPARSE_NOISY;
}

static erg_status noise_fit(const erg_sparse *sp, const curve *cv, int kind, int q, double *fit,
                            erg_error *err);

/* Standardised departure of measured point x of curve (stage s, kind k) from
 * the fit in sp->fit: the larger of time's and energy's |log(mean / fit)|
 * over the noise of the mean (time_noise / sqrt(measurements)). */
static double departure(const erg_sparse *sp, int s, int k, int x)
{
    const curve *c = &sp->c[2 * s + k];
    int S = sp->S, n = sp->n;
    const double *ft = sp->fit + (size_t)(2 * k) * S * n, *fe = ft + (size_t)S * n;
    double se = sp->o.time_noise / sqrt(c->cnt[x] > 0 ? c->cnt[x] : 1);
    double dt = fabs(log(c->t_s[x] / ft[s * n + x]));
    double de = c->e_j[x] > 0 && fe[s * n + x] > 0 ? fabs(log(c->e_j[x] / fe[s * n + x])) : 0;
    return (dt > de ? dt : de) / (se > 0 ? se : 1e-300);
}

/* A measured point departing from the fit by more than this many standard
 * deviations of its mean is measured again (a point of noise is averaged
 * down; a real jag or step of the curve is confirmed, and kept). */
#define NOISE_OUTLIER 2.0

/* Under noise: the measured clock of curve (s, k) most worth measuring
 * again (the largest departure above NOISE_OUTLIER), -1 if none. */
static int worst_outlier(const erg_sparse *sp, int s, int k)
{
    const curve *c = &sp->c[2 * s + k];
    int best = -1;
    double worst = NOISE_OUTLIER;
    for (int x = 0; x < sp->n; x++)
        if (c->meas[x] && c->cnt[x] < 4) {
            double d = departure(sp, s, k, x);
            if (d > worst)
                worst = d, best = x;
        }
    return best;
}

/* Under noise every stage follows its own curve (measurement noise makes no
 * two stages replicas): its descent and refinement with two thirds of its
 * budget, then, while the budget lasts, measure again the point that departs
 * most from the fit (opts.remeasure) or, where none does, split the widest
 * gap. */
static void update_wants_noisy(erg_sparse *sp)
{
    int S = sp->S, n = sp->n;
    bool fitted = true;
    for (int i = 0; i < 2 * S; i++)
        fitted = fitted && sp->c[i].nmeas > 0;
    for (int k = 0; k < 2 && fitted; k++)
        for (int q = 0; q < 2 && fitted; q++)
            fitted = !noise_fit(sp, sp->c, k, q, sp->fit + (size_t)(2 * k + q) * S * n, NULL);
    for (int s = 0; s < S; s++) {
        sp->group[s] = s;
        sp->grid[s] = s;
    }
    for (int i = 0; i < 2 * S; i++) {
        const curve *c = &sp->c[i];
        int spent = c->nmeas + c->nrep;
        int base = ERG__MAX(ERG__MIN(4, c->budget), c->budget * 2 / 3);
        int x = series_next(sp, c->meas, c->meas, c->e_j, spent, base, i / 2, 1);
        if (x < 0 && spent < c->budget) {
            if (fitted && sp->o.remeasure)
                x = worst_outlier(sp, i / 2, i % 2);
            if (x < 0)
                x = series_next(sp, c->meas, c->meas, c->e_j, spent, c->budget, i / 2, 1);
        }
        sp->want[i] = x;
    }
    sp->stale = false;
}

/* Work out again what every curve wants next (after a report).
 *
 * Replica groups: the lowest stage of each group, and the grid each stage
 * descends on -- the number of replica groups before its own plus its rank
 * among its replicas, so that distinct stages get distinct grids (they cover
 * the clocks together) and the first stage of a later group shares its grid
 * with the second member of the group before it (its measurements have exact
 * counterparts there).
 *
 * A stage with no replica follows its own curve. A replica group measures one
 * pooled curve with the budgets of all its members: each round its members
 * take the next clocks the pooled curve wants, one each, so that no two
 * replicas measure the same clock. */
static void update_wants(erg_sparse *sp)
{
    if (noisy_mode(sp)) {
        update_wants_noisy(sp);
        return;
    }
    int S = sp->S, n = sp->n;
    find_groups(sp, sp->group);
    for (int s = 0; s < S; s++) {
        int g = sp->group[s], idx = 0;
        for (int r = 0; r < s; r++)
            idx += (sp->group[r] == r && r < g) || sp->group[r] == g;
        sp->grid[s] = idx;
    }
    for (int s = 0; s < S; s++) {
        if (sp->group[s] != s)
            continue;
        int members = 0;
        for (int r = s; r < S; r++)
            members += sp->group[r] == s;
        for (int k = 0; k < 2; k++) {
            const curve *c = &sp->c[2 * s + k];
            if (members == 1) {
                sp->want[2 * s + k] =
                    series_next(sp, c->meas, c->meas, c->e_j, c->nmeas, c->budget, sp->grid[s], 1);
                continue;
            }
            int spent = 0, budget = 0;
            for (int x = 0; x < n; x++)
                sp->pool_meas[x] = false;
            for (int r = s; r < S; r++) {
                if (sp->group[r] != s)
                    continue;
                const curve *m = &sp->c[2 * r + k];
                spent += m->nmeas;
                budget += m->budget;
                for (int x = 0; x < n; x++)
                    if (m->meas[x] && !sp->pool_meas[x]) {
                        sp->pool_meas[x] = true;
                        sp->pool_e[x] = m->e_j[x];
                    }
            }
            memcpy(sp->pool_taken, sp->pool_meas, (size_t)n * sizeof(bool));
            /* Zeus's rule sees the pooled curve at the spacing one member's
             * own descent would have */
            int spacing = descent_stride(sp, c->budget, NULL);
            for (int r = s; r < S; r++) {
                if (sp->group[r] != s)
                    continue;
                int x = series_next(sp, sp->pool_meas, sp->pool_taken, sp->pool_e, spent, budget,
                                    sp->grid[s], spacing);
                sp->want[2 * r + k] = x;
                if (x >= 0) {
                    sp->pool_taken[x] = true;
                    spent++;
                }
            }
        }
    }
    sp->stale = false;
}

/* Next clock index of curve number ci (2*stage + kind), -1 when done. */
static int curve_next(const erg_sparse *sp, int ci)
{
    if (sp->stale)
        update_wants((erg_sparse *)sp); /* a cache: asking stays pure */
    return sp->want[ci];
}

int erg_sparse_next(const erg_sparse *sp, int stage, erg_instr_kind kind)
{
    const curve *c = get_curve(sp, stage, kind);
    if (!c)
        return 0;
    int i = curve_next(sp, (int)(c - sp->c));
    return i < 0 ? 0 : sp->freqs[i];
}

erg_status erg_sparse_report(erg_sparse *sp, int stage, erg_instr_kind kind,
                             const erg_profile_point *pt, erg_error *err)
{
    curve *c = (curve *)get_curve(sp, stage, kind);
    if (!c || !pt)
        return erg_error_set(err, ERG_EINVAL, "sparse profiling: no stage %d %s", stage,
                             erg_instr_kind_name(kind));
    int i = freq_index(sp, pt->freq_mhz);
    if (i < 0)
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling: %d MHz is not one of the supported clocks",
                             pt->freq_mhz);
    if (!(pt->time_s > 0) || !isfinite(pt->time_s) || !(pt->energy_j >= 0) ||
        !isfinite(pt->energy_j))
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling: stage %d %s at %d MHz: invalid measurement "
                             "(time %g s, energy %g J)",
                             stage, erg_instr_kind_name(kind), pt->freq_mhz, pt->time_s,
                             pt->energy_j);
    if (c->meas[i]) {
        /* under noise a clock measured again is accepted (asked for: a
         * point departing from the fit; the fit, and so what a curve wants,
         * moves with every report of a round): the point keeps the mean */
        if (!noisy_mode(sp))
            return erg_error_set(err, ERG_EEXIST,
                                 "sparse profiling: stage %d %s at %d MHz is already measured",
                                 stage, erg_instr_kind_name(kind), pt->freq_mhz);
        int m = c->cnt[i];
        c->t_s[i] = (c->t_s[i] * m + pt->time_s) / (m + 1);
        c->e_j[i] = (c->e_j[i] * m + pt->energy_j) / (m + 1);
        c->cnt[i] = m + 1;
        c->nrep++;
        sp->measured++;
        sp->stale = true;
        return ERG_OK;
    }
    c->meas[i] = true;
    c->t_s[i] = pt->time_s;
    c->e_j[i] = pt->energy_j;
    c->cnt[i] = 1;
    c->nmeas++;
    sp->measured++;
    sp->stale = true;
    return ERG_OK;
}

bool erg_sparse_done(const erg_sparse *sp)
{
    if (!sp)
        return true;
    for (int i = 0; i < 2 * sp->S; i++)
        if (curve_next(sp, i) >= 0)
            return false;
    return true;
}

int erg_sparse_num_measured(const erg_sparse *sp)
{
    return sp ? sp->measured : 0;
}

int erg_sparse_num_full(const erg_sparse *sp)
{
    return sp ? 2 * sp->S * sp->n : 0;
}

erg_status erg_sparse_run(erg_sparse *sp, erg_measure_fn measure, void *user, int *rounds,
                          erg_error *err)
{
    if (!sp || !measure)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_run: NULL argument");
    int *want = erg__calloc((size_t)(2 * sp->S), sizeof(int));
    if (!want)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    int r = 0;
    erg_status st = ERG_OK;
    for (;;) {
        int asked = 0;
        for (int i = 0; i < 2 * sp->S; i++) {
            int k = curve_next(sp, i);
            want[i] = k < 0 ? 0 : sp->freqs[k];
            asked += k >= 0;
        }
        if (!asked)
            break;
        r++;
        /* a round measures every (stage, kind) that wants a clock, as a
         * pipeline does in one window */
        for (int i = 0; i < 2 * sp->S && !st; i++) {
            if (!want[i])
                continue;
            int stage = i / 2;
            erg_instr_kind kind = (erg_instr_kind)(i % 2);
            erg_profile_point pt = {want[i], 0, 0};
            st = measure(user, stage, kind, want[i], &pt, err);
            if (!st) {
                pt.freq_mhz = want[i];
                st = erg_sparse_report(sp, stage, kind, &pt, err);
            }
        }
        if (st)
            break;
    }
    erg__free(want);
    if (!st && rounds)
        *rounds = r;
    return st;
}

int erg_sparse_num_samples(const erg_sparse *sp, int stage, erg_instr_kind kind, int freq_mhz)
{
    const curve *c = get_curve(sp, stage, kind);
    int i = c ? freq_index(sp, freq_mhz) : -1;
    return i >= 0 && c->meas[i] ? c->cnt[i] : 0;
}

int erg_sparse_uncertain(const erg_sparse *sp, int stage, erg_instr_kind kind, int *freqs_mhz,
                         int max)
{
    const curve *c = get_curve(sp, stage, kind);
    if (!c || !noisy_mode(sp))
        return 0;
    if (sp->stale)
        update_wants((erg_sparse *)sp); /* refreshes the fit */
    for (int i = 0; i < 2 * sp->S; i++)
        if (!sp->c[i].nmeas)
            return 0;
    int k = 0;
    for (int x = 0; x < sp->n; x++)
        if (c->meas[x] && departure(sp, stage, (int)kind, x) > NOISE_OUTLIER) {
            if (freqs_mhz && k < max)
                freqs_mhz[k] = sp->freqs[x];
            k++;
        }
    return k;
}

bool erg_sparse_is_measured(const erg_sparse *sp, int stage, erg_instr_kind kind, int freq_mhz)
{
    const curve *c = get_curve(sp, stage, kind);
    if (!c)
        return false;
    int i = freq_index(sp, freq_mhz);
    return i >= 0 && c->meas[i];
}

/* ---- prediction ---- */

/* Linear interpolation/extrapolation of y over x through (x0,y0), (x1,y1). */
static double lerp(double x0, double y0, double x1, double y1, double x)
{
    if (x1 == x0)
        return y0;
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

/* Predict (time, energy) at clock index x from the measured points of one
 * series (meas, t, e over the clock indices). Time is linear in 1/f between
 * measured neighbours (t = a/f + b piecewise), power E/t linear in f; beyond
 * the measured range the nearest segment is extended (one point: t ~ 1/f,
 * constant power). */
static void interp_point(const erg_sparse *sp, const bool *meas, const double *tv,
                         const double *ev, int x, double *t, double *e)
{
    int n = sp->n;
    int idx[2] = {x, x}, k = 0;
    int above = -1, below = -1;
    for (int i = x - 1; i >= 0; i--)
        if (meas[i]) {
            above = i;
            break;
        }
    for (int i = x + 1; i < n; i++)
        if (meas[i]) {
            below = i;
            break;
        }
    if (above >= 0 && below >= 0) {
        idx[0] = above;
        idx[1] = below;
        k = 2;
    } else {
        int dir = above >= 0 ? -1 : 1;
        for (int i = x + dir; i >= 0 && i < n && k < 2; i += dir)
            if (meas[i])
                idx[k++] = i;
    }
    double f = sp->freqs[x];
    if (k == 0) {
        *t = *e = 0;
        return;
    }
    if (k == 1) {
        double f0 = sp->freqs[idx[0]];
        *t = tv[idx[0]] * f0 / f;
        *e = ev[idx[0]] / tv[idx[0]] * *t;
        return;
    }
    double f0 = sp->freqs[idx[0]], f1 = sp->freqs[idx[1]];
    double t0 = tv[idx[0]], t1 = tv[idx[1]];
    double tp = lerp(1 / f0, t0, 1 / f1, t1, 1 / f);
    double tmin = ERG__MIN(t0, t1) * 0.5;
    if (!(tp > tmin))
        tp = tmin;
    double p0 = ev[idx[0]] / t0, p1 = ev[idx[1]] / t1;
    double pp = lerp(f0, p0, f1, p1, f);
    double pmin = ERG__MIN(p0, p1) * 0.5;
    if (!(pp > pmin))
        pp = pmin;
    *t = tp;
    *e = pp * tp;
}

/* The shared shape of instruction kind k: every stage's measurements divided
 * by its own value at the highest clock, averaged per clock over the stages
 * that measured it, interpolated where none did. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void shared_shape(const erg_sparse *sp, const curve *cv, int kind, bool *m, double *ts,
                         double *es, double *tmp)
{
    int n = sp->n;
    double *tt = tmp, *ee = tmp + sp->S;
    for (int x = 0; x < n; x++) {
        int k = 0;
        for (int s = 0; s < sp->S; s++) {
            const curve *c = &cv[2 * s + kind];
            if (!c->meas[0] || !c->meas[x])
                continue;
            tt[k] = c->t_s[x] / c->t_s[0];
            ee[k] = c->e_j[x] / (c->e_j[0] > 0 ? c->e_j[0] : 1);
            k++;
        }
        m[x] = k > 0;
        ts[x] = k ? median(tt, k) : 0;
        es[x] = k ? median(ee, k) : 0;
    }
    for (int x = 0; x < n; x++)
        if (!m[x])
            interp_point(sp, m, ts, es, x, &ts[x], &es[x]);
}

/* Predict curve c at clock index x: its value at the highest clock times the
 * shared shape, times a correction interpolated (linearly in f) between the
 * ratios measured/shape at c's own measured clocks. */
static void predict_point(const erg_sparse *sp, const curve *c, const double *ts,
                          const double *es, int x, double *t, double *e, double *u)
{
    *u = 0;
    if (!c->meas[0] || !(ts[x] > 0)) {
        interp_point(sp, c->meas, c->t_s, c->e_j, x, t, e);
        return;
    }
    int above = -1, below = -1;
    for (int i = x - 1; i >= 0; i--)
        if (c->meas[i]) {
            above = i;
            break;
        }
    for (int i = x + 1; i < sp->n; i++)
        if (c->meas[i]) {
            below = i;
            break;
        }
    double T0 = c->t_s[0], E0 = c->e_j[0];
    double rt, re;
#define RT(i) (c->t_s[i] / (T0 * ts[i]))
#define RE(i) (es[i] > 0 && E0 > 0 ? c->e_j[i] / (E0 * es[i]) : 1)
    if (above >= 0 && below >= 0) {
        rt = lerp(sp->freqs[above], RT(above), sp->freqs[below], RT(below), sp->freqs[x]);
        re = lerp(sp->freqs[above], RE(above), sp->freqs[below], RE(below), sp->freqs[x]);
        *u = fabs(RT(above) - RT(below));
    } else {
        int i = above >= 0 ? above : below;
        rt = RT(i);
        re = RE(i);
        *u = fabs(rt - 1);
    }
    /* the curve's own departure from the shared shape (RMS over its points) */
    double ss = 0;
    int k = 0;
    for (int i = 1; i < sp->n; i++)
        if (c->meas[i] && ts[i] > 0) {
            ss += (RT(i) - 1) * (RT(i) - 1);
            k++;
        }
    if (k && sqrt(ss / k) > *u)
        *u = sqrt(ss / k);
#undef RT
#undef RE
    *t = T0 * ts[x] * rt;
    *e = E0 * es[x] * re;
}

static void free_curves(curve *cv, int ncurves)
{
    if (!cv)
        return;
    for (int i = 0; i < ncurves; i++) {
        erg__free(cv[i].meas);
        erg__free(cv[i].t_s);
        erg__free(cv[i].e_j);
        erg__free(cv[i].cnt);
    }
    erg__free(cv);
}

/* The curves with replica stages' measurements pooled: a clock measured on
 * one stage counts as measured on each of its replicas. group[s] receives the
 * lowest stage of s's replica group. */
static curve *pooled_curves(const erg_sparse *sp, int *group)
{
    int n = sp->n, S = sp->S;
    curve *cv = erg__calloc((size_t)(2 * S), sizeof(curve));
    if (!cv)
        return NULL;
    for (int i = 0; i < 2 * S; i++) {
        cv[i].meas = erg__calloc((size_t)n, sizeof(bool));
        cv[i].t_s = erg__calloc((size_t)n, sizeof(double));
        cv[i].e_j = erg__calloc((size_t)n, sizeof(double));
        cv[i].cnt = erg__calloc((size_t)n, sizeof(int));
        if (!cv[i].meas || !cv[i].t_s || !cv[i].e_j || !cv[i].cnt) {
            free_curves(cv, 2 * S);
            return NULL;
        }
    }
    find_groups(sp, group);
    for (int s = 0; s < S; s++)
        for (int t = 0; t < S; t++) {
            if (group[t] != group[s])
                continue;
            for (int k = 0; k < 2; k++) {
                const curve *src = &sp->c[2 * t + k];
                curve *dst = &cv[2 * s + k];
                for (int x = 0; x < n; x++)
                    if (src->meas[x] && !dst->meas[x]) {
                        dst->meas[x] = true;
                        dst->t_s[x] = src->t_s[x];
                        dst->e_j[x] = src->e_j[x];
                        dst->cnt[x] = src->cnt[x];
                        dst->nmeas++;
                    }
            }
        }
    return cv;
}

/* ---- the fit under measurement noise (docs/sparse-profiling.md) ---- */

/* Half-width, in clocks, of the window the shared shape is smoothed over:
 * none below 1 % noise (each clock's own measurements, with the nearest
 * clocks' until there are 3), 2 from 1 % (docs/sparse-profiling.md: at 0.5 %
 * the +-2 window's bias cost more than the noise it removed, 46 of 192 cells
 * against 8). */
#define NOISE_WINDOW (sp->o.time_noise < 0.0075 ? 0 : 2)
/* Degree of the local polynomial (2 was tried: no better, more variance). */
#define NOISE_DEG 1

/* Solve the 3x3 (or 2x2 with deg 1) normal equations A c = b by Gaussian
 * elimination; false when singular. */
static bool solve_small(double A[3][3], double b[3], int m, double c[3])
{
    for (int i = 0; i < m; i++) {
        int p = i;
        for (int j = i + 1; j < m; j++)
            if (fabs(A[j][i]) > fabs(A[p][i]))
                p = j;
        if (!(fabs(A[p][i]) > 1e-12))
            return false;
        for (int j = 0; j < m; j++) {
            double t = A[i][j];
            A[i][j] = A[p][j];
            A[p][j] = t;
        }
        double t = b[i];
        b[i] = b[p];
        b[p] = t;
        for (int j = i + 1; j < m; j++) {
            double f = A[j][i] / A[i][i];
            for (int k = i; k < m; k++)
                A[j][k] -= f * A[i][k];
            b[j] -= f * b[i];
        }
    }
    for (int i = m - 1; i >= 0; i--) {
        double v = b[i];
        for (int k = i + 1; k < m; k++)
            v -= A[i][k] * c[k];
        c[i] = v / A[i][i];
    }
    return true;
}

/* Weighted local polynomial fit (degree deg, lower where the clocks in the
 * window are too few) of r over the clocks lo..hi, evaluated at x. */
static bool local_poly(const double *r, const double *w, int lo, int hi, int x, int deg,
                       double *val)
{
    int clocks = 0;
    double sw = 0, sy = 0;
    for (int y = lo; y <= hi; y++)
        if (w[y] > 0) {
            clocks++;
            sw += w[y];
            sy += w[y] * r[y];
        }
    if (!(sw > 0))
        return false;
    for (int d = deg < clocks - 1 ? deg : clocks - 1; d >= 1; d--) {
        double A[3][3] = {{0}}, b[3] = {0}, c[3] = {0};
        int m = d + 1;
        for (int y = lo; y <= hi; y++) {
            if (!(w[y] > 0))
                continue;
            double u = (y - x) / (double)(hi - lo + 1), pw[3] = {1, u, u * u};
            for (int i = 0; i < m; i++) {
                b[i] += w[y] * pw[i] * r[y];
                for (int j = 0; j < m; j++)
                    A[i][j] += w[y] * pw[i] * pw[j];
            }
        }
        if (solve_small(A, b, m, c)) {
            *val = c[0];
            return true;
        }
    }
    *val = sy / sw;
    return true;
}

/* Smooth r (weights w, over the clock indices) into g: at each clock the
 * local linear fit over the clocks within NOISE_WINDOW of it (wider where
 * fewer than 3 measurements fall in it), centred, or one-sided where a
 * one-sided window fits clearly better (a step in the curve: A40 times jump
 * 3-6 % between two clocks, and a centred window would smear the step over
 * its width). */
static void smooth_shape(const erg_sparse *sp, const double *r, const double *w, double *g)
{
    int n = sp->n;
    for (int x = 0; x < n; x++) {
        int h = NOISE_WINDOW;
        double val = 0;
        for (;; h++) {
            double cnt = 0;
            for (int y = ERG__MAX(0, x - h); y <= ERG__MIN(n - 1, x + h); y++)
                cnt += w[y];
            if (cnt >= 3 || h >= n)
                break;
        }
        if (!local_poly(r, w, ERG__MAX(0, x - h), ERG__MIN(n - 1, x + h), x, NOISE_DEG, &val)) {
            g[x] = 0;
            continue;
        }
        g[x] = val;
    }
}

/* Fit one quantity (q 0: time, 1: energy) of instruction kind `kind` over all
 * stages: log v(s, x) = a_s + b_s z_x + g_x, z_x the clock's place in the
 * range (0 at the maximum, -1 at the minimum), g a shared shape smoothed
 * across neighbouring clocks, a_s + b_s z a stage's own level and tilt
 * (weighted least squares over its measurements, weights = repeats),
 * alternating a few times. fit[s * n + x] receives the fitted value. */
static erg_status noise_fit(const erg_sparse *sp, const curve *cv, int kind, int q, double *fit,
                            erg_error *err)
{
    int n = sp->n, S = sp->S;
    double *buf = erg__calloc((size_t)(4 * n + 2 * S), sizeof(double));
    if (!buf)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *g = buf, *r = buf + n, *w = buf + 2 * n, *z = buf + 3 * n, *a = buf + 4 * n,
           *b = a + S;
    double span = sp->freqs[0] - sp->freqs[n - 1];
    for (int x = 0; x < n; x++)
        z[x] = (sp->freqs[x] - sp->freqs[0]) / span;
#define V(c, x) log((q ? (c)->e_j[x] : (c)->t_s[x]) > 0 ? (q ? (c)->e_j[x] : (c)->t_s[x]) : 1e-300)
#define W(c, x) ((c)->cnt ? (double)(c)->cnt[x] : 1.0)
    for (int s = 0; s < S; s++) {
        const curve *c = &cv[2 * s + kind];
        double sw = 0, sy = 0;
        for (int x = 0; x < n; x++)
            if (c->meas[x]) {
                sw += W(c, x);
                sy += W(c, x) * V(c, x);
            }
        a[s] = sw > 0 ? sy / sw : 0;
        b[s] = 0;
    }
    for (int it = 0; it < 8; it++) {
        for (int x = 0; x < n; x++)
            r[x] = w[x] = 0;
        for (int s = 0; s < S; s++) {
            const curve *c = &cv[2 * s + kind];
            for (int x = 0; x < n; x++)
                if (c->meas[x]) {
                    r[x] += W(c, x) * (V(c, x) - a[s] - b[s] * z[x]);
                    w[x] += W(c, x);
                }
        }
        for (int x = 0; x < n; x++)
            if (w[x] > 0)
                r[x] /= w[x];
        smooth_shape(sp, r, w, g);
        for (int s = 0; s < S; s++) {
            const curve *c = &cv[2 * s + kind];
            double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
            int k = 0;
            for (int x = 0; x < n; x++)
                if (c->meas[x]) {
                    double y = V(c, x) - g[x], ww = W(c, x);
                    sw += ww;
                    sx += ww * z[x];
                    sy += ww * y;
                    sxx += ww * z[x] * z[x];
                    sxy += ww * z[x] * y;
                    k++;
                }
            /* the tilt is shrunk toward the shared shape (ridge): a stage
             * departs from the others by a tilt of about 1 % over the range
             * (stage 7 of the published profiles: 0.1-2.6 %), and a slope
             * fitted to ten points with 1-2 % noise is off by as much */
            double sig = sp->o.time_noise, lam = (sig / 0.01) * (sig / 0.01);
            double szz = sxx - sx * sx / (sw > 0 ? sw : 1);
            if (k >= 3 && szz + lam > 1e-12) {
                b[s] = (sxy - sx * sy / sw) / (szz + lam);
                a[s] = (sy - b[s] * sx) / sw;
            } else {
                b[s] = 0;
                a[s] = sw > 0 ? sy / sw : 0;
            }
        }
    }
#undef V
#undef W
    for (int s = 0; s < S; s++)
        for (int x = 0; x < n; x++)
            fit[s * n + x] = exp(a[s] + b[s] * z[x] + g[x]);
    erg__free(buf);
    return ERG_OK;
}

erg_status erg_sparse_predict(const erg_sparse *sp, erg_profile **out, erg_error *err)
{
    if (!sp || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_predict: NULL argument");
    *out = NULL;
    for (int i = 0; i < 2 * sp->S; i++)
        if (!sp->c[i].nmeas)
            return erg_error_set(err, ERG_ESTATE,
                                 "sparse profiling: stage %d %s has no measurement yet", i / 2,
                                 erg_instr_kind_name((erg_instr_kind)(i % 2)));
    int n = sp->n, S = sp->S;
    bool *m = erg__calloc((size_t)n, sizeof(bool));
    double *ts = erg__calloc((size_t)n * 2, sizeof(double));
    double *tmp = erg__calloc((size_t)S * 2, sizeof(double));
    int *group = erg__calloc((size_t)S, sizeof(int));
    curve *cv = group ? pooled_curves(sp, group) : NULL;
    erg_profile *p = NULL;
    erg_status st = (!m || !ts || !tmp || !group || !cv)
                        ? erg_error_set(err, ERG_ENOMEM, "out of memory")
                        : erg_profile_new(&p, err);
    bool noisy = noisy_mode(sp);
    double *fit = st || !noisy ? NULL : erg__calloc((size_t)(2 * S * n), sizeof(double));
    if (noisy && !st && !fit)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int k = 0; k < 2 && !st; k++) {
        if (noisy) {
            if ((st = noise_fit(sp, cv, k, 0, fit, err)) ||
                (st = noise_fit(sp, cv, k, 1, fit + S * n, err)))
                break;
            /* every clock from the fit; at a measured clock the measured
             * mean's departure from the fit is kept in the part that exceeds
             * its noise (positive-part shrinkage: a departure of d standard
             * deviations keeps 1 - (2/d)^2 of itself, nothing below 2) */
            for (int s = 0; s < S && !st; s++) {
                const curve *c = &cv[2 * s + k];
                for (int x = 0; x < n && !st; x++) {
                    erg_profile_point pt = {sp->freqs[x], fit[s * n + x], fit[S * n + s * n + x]};
                    if (c->meas[x] && x == 0) {
                        /* the maximum as measured: the all-max plan, whose
                         * time the targets are taken from, as measured */
                        pt.time_s = c->t_s[0];
                        pt.energy_j = c->e_j[0];
                    } else if (c->meas[x]) {
                        double se = sp->o.time_noise / sqrt(c->cnt[x] > 0 ? c->cnt[x] : 1);
                        double dt = log(c->t_s[x] / pt.time_s);
                        double de = c->e_j[x] > 0 && pt.energy_j > 0 ? log(c->e_j[x] / pt.energy_j) : 0;
                        double kt = 1 - NOISE_OUTLIER * NOISE_OUTLIER * se * se / (dt * dt + 1e-300);
                        double ke = 1 - NOISE_OUTLIER * NOISE_OUTLIER * se * se / (de * de + 1e-300);
                        pt.time_s *= exp(dt * (kt > 0 ? kt : 0));
                        pt.energy_j *= exp(de * (ke > 0 ? ke : 0));
                    }
                    st = erg_profile_add(p, s, (erg_instr_kind)k, &pt, err);
                }
            }
            continue;
        }
        shared_shape(sp, cv, k, m, ts, ts + n, tmp);
        for (int s = 0; s < S && !st; s++) {
            const curve *c = &cv[2 * s + k];
            for (int x = 0; x < n && !st; x++) {
                erg_profile_point pt = {sp->freqs[x], 0, 0};
                if (c->meas[x]) {
                    pt.time_s = c->t_s[x];
                    pt.energy_j = c->e_j[x];
                } else {
                    double u;
                    predict_point(sp, c, ts, ts + n, x, &pt.time_s, &pt.energy_j, &u);
                    /* uncertainty margin: how much this curve departs from
                     * the shared shape between its measured neighbours, at
                     * least the noise of a measurement */
                    if (u < sp->o.time_noise)
                        u = sp->o.time_noise;
                    pt.time_s *= 1 + sp->o.time_margin * u;
                    pt.energy_j *= 1 + sp->o.energy_margin * u;
                }
                st = erg_profile_add(p, s, (erg_instr_kind)k, &pt, err);
            }
        }
    }
    erg__free(fit);
    erg__free(m);
    erg__free(ts);
    erg__free(tmp);
    erg__free(group);
    free_curves(cv, 2 * S);
    if (st) {
        erg_profile_free(p);
        return st;
    }
    *out = p;
    return ERG_OK;
}

erg_status erg_sparse_format_csv(const erg_sparse *sp, char **out, size_t *len, erg_error *err)
{
    if (!sp || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_format_csv: NULL argument");
    *out = NULL;
    if (len)
        *len = 0;
    erg_profile *p = NULL;
    erg_status st = erg_sparse_predict(sp, &p, err);
    if (st)
        return st;
    erg__buf b = {0};
    st = erg__buf_printf(&b, "stage,instruction,frequency,time,energy,source\n");
    char t[40], e[40];
    for (int s = 0; s < sp->S && !st; s++)
        for (int x = 0; x < sp->n && !st; x++)
            for (int k = 0; k < 2 && !st; k++) {
                erg_profile_point pt;
                if (erg_profile_lookup(p, s, (erg_instr_kind)k, sp->freqs[x], &pt, NULL))
                    continue;
                st = erg__buf_printf(&b, "%d,%s,%d,%s,%s,%s\n", s,
                                     erg_instr_kind_name((erg_instr_kind)k), pt.freq_mhz,
                                     erg__fmt_double_py(pt.time_s, t, sizeof t),
                                     erg__fmt_double_py(pt.energy_j, e, sizeof e),
                                     sp->c[2 * s + k].meas[x] ? "measured" : "predicted");
            }
    erg_profile_free(p);
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (len)
        *len = b.len;
    *out = b.data;
    return ERG_OK;
}

erg_status erg_sparse_write_csv(const erg_sparse *sp, const char *path, erg_error *err)
{
    char *text = NULL;
    size_t n = 0;
    erg_status st = erg_sparse_format_csv(sp, &text, &n, err);
    if (st)
        return st;
    st = erg__write_file(path, text, n, err);
    erg_free(text);
    return st;
}

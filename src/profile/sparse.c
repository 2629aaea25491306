/* sparse.c: sparse, adaptive profiling (docs/sparse-profiling.md): the measuring half --
 * which clocks each (stage, instruction) curve measures next, replica groups, the noisy mode's
 * re-measurements, the reports and the run loop. The prediction of the clocks not measured is
 * in sparse_predict.c. */
#include "profile/sparse_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SPARSE_MAX_STAGES ERG_MAX_STAGES

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

/* The default time_noise: the clock-to-clock jitter of the published profiles, the least
 * margin a predicted time gets; also the least level an estimate is used at. */
#define NOISE_DEFAULT 0.002
/* An estimated noise level is used once it rests on this many measured points. */
#define NOISE_MIN_POINTS 8

/* Each curve's budget: opts.budget split evenly, or by default a sixth of the full sweep (a
 * quarter under noise: the fit averages neighbouring clocks), at least 4 per curve. */
static void set_budgets(erg_sparse *sp)
{
    int ncurves = 2 * sp->S;
    long full = (long)ncurves * sp->n;
    long budget = sp->o.budget                           ? sp->o.budget
                  : sp->o.time_noise >= ERG_SPARSE_NOISY ? full / 4
                                                         : full / 6;
    int per = (int)(budget / ncurves);
    int extra = (int)(budget % ncurves);
    if (!sp->o.budget && per < 4)
        per = 4, extra = 0;
    for (int i = 0; i < ncurves; i++)
        sp->c[i].budget = ERG__MIN(per + (i < extra), sp->n);
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
    if (o.budget < 0 || o.patience < 1 || !(o.rise_tolerance >= 0) || !isfinite(o.rise_tolerance) ||
        o.near_max < 0 || !(o.time_margin >= 0) || !(o.time_margin <= 10) ||
        !(o.energy_margin >= 0) || !(o.energy_margin <= 10) || !(o.time_noise <= 1) ||
        !isfinite(o.time_noise))
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling: invalid options (budget %d, patience %d, rise "
                             "tolerance %g, near-max %d, time margin %g, energy margin %g, time "
                             "noise %g; margins 0..10, noise 0..1 or negative: estimated)",
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
    sp->noise_est = NAN;
    if (o.time_noise < 0) {
        /* estimated from the measurements: the default until there are enough */
        sp->noise_auto = true;
        sp->o.time_noise = NOISE_DEFAULT;
    }
    int ncurves = 2 * num_stages;
    if (o.budget && o.budget < ncurves) {
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
    if (!sp->want || !sp->group || !sp->grid || !sp->pool_meas || !sp->pool_taken || !sp->pool_e ||
        !sp->fit) {
        sp->S = num_stages;
        erg_sparse_free(sp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (sp->noise_auto && !(sp->resid = erg__calloc(4 * (size_t)num_stages * n, sizeof(double)))) {
        erg_sparse_free(sp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    set_budgets(sp);
    for (int i = 0; i < ncurves; i++) {
        curve *c = &sp->c[i];
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
    erg__free(sp->resid);
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
    if (lowest < (sp->n - 1) / 3 || erg__sparse_noisy_mode(sp))
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
void erg__sparse_find_groups(const erg_sparse *sp, int *group)
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
static int series_next(const erg_sparse *sp, const bool *meas, const bool *taken, const double *e_j,
                       int spent, int budget, int grid, int spacing)
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
bool erg__sparse_noisy_mode(const erg_sparse *sp)
{
    return sp->o.time_noise >= ERG_SPARSE_NOISY;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The relative noise of one measurement, estimated from the measurements themselves (a
 * replay has no repeats).
 *
 * Across stages (2 stages or more): the stages of a pipeline share a shape (the predictor's
 * assumption), so for neighbouring stages s, s+1 and two consecutive clocks x, y both measured
 * the double difference [log v_s(x) - log v_s(y)] - [log v_s+1(x) - log v_s+1(y)] holds no
 * curve -- no bend, no jag or step common to the stages -- only noise (4 points: its standard
 * deviation sigma * sqrt(sum of 1/samples)) and the stages' difference in tilt between x and y.
 * With fewer than NOISE_MIN_POINTS of those (one stage), along each curve: each measured point
 * against the line through its two measured neighbours (log value over log clock: a time that
 * scales with 1/f lies on it exactly); there the curve's own bends and jags count as noise.
 * Either way time and energy, the median absolute residual / 0.6745 (a normal's): robust to a
 * minority of steps. An upper bound: what of the curves does not cancel counts as noise.
 * *points receives the residuals it rests on. NAN with none. */
static double estimate_noise(const erg_sparse *sp, int *points)
{
    int m = 0;
    for (int s = 0; s + 1 < sp->S; s++)
        for (int k = 0; k < 2; k++) {
            const curve *c = &sp->c[2 * s + k], *d = &sp->c[2 * (s + 1) + k];
            for (int q = 0; q < 2; q++) {
                const double *v = q ? c->e_j : c->t_s, *w = q ? d->e_j : d->t_s;
                int y = -1;
                for (int x = 0; x < sp->n; x++) {
                    if (!c->meas[x] || !d->meas[x] || !(v[x] > 0) || !(w[x] > 0))
                        continue;
                    if (y >= 0) {
                        double dd = log(v[x] / v[y]) - log(w[x] / w[y]);
                        double sd = sqrt(1.0 / c->cnt[x] + 1.0 / c->cnt[y] + 1.0 / d->cnt[x] +
                                         1.0 / d->cnt[y]);
                        sp->resid[m++] = fabs(dd) / sd;
                    }
                    y = x;
                }
            }
        }
    if (m < NOISE_MIN_POINTS) {
        m = 0;
        for (int i = 0; i < 2 * sp->S; i++) {
            const curve *c = &sp->c[i];
            for (int q = 0; q < 2; q++) {
                const double *v = q ? c->e_j : c->t_s;
                int a = -1, b = -1;
                for (int x = 0; x < sp->n; x++) {
                    if (!c->meas[x] || !(v[x] > 0))
                        continue;
                    if (a >= 0) {
                        double la = log(sp->freqs[a]), lb = log(sp->freqs[b]),
                               lc = log(sp->freqs[x]);
                        double w = (la - lb) / (la - lc); /* weight of x at b */
                        double pred = (1 - w) * log(v[a]) + w * log(v[x]);
                        double sd = sqrt(1.0 / c->cnt[b] + (1 - w) * (1 - w) / c->cnt[a] +
                                         w * w / c->cnt[x]);
                        sp->resid[m++] = fabs(log(v[b]) - pred) / sd;
                    }
                    a = b;
                    b = x;
                }
            }
        }
    }
    *points = m;
    if (!m)
        return NAN;
    qsort(sp->resid, (size_t)m, sizeof(double), cmp_dbl);
    double med = m % 2 ? sp->resid[m / 2] : 0.5 * (sp->resid[m / 2 - 1] + sp->resid[m / 2]);
    return med / 0.6745;
}

/* With the noise estimated: estimate it again from what is measured now and put the level in
 * use in o.time_noise -- the default until NOISE_MIN_POINTS residuals, then the estimate (at
 * least the default). Once it reaches ERG_SPARSE_NOISY the noisy procedure stays on (at least
 * that level): its budget and its fit, with no flip back on a smaller estimate later. */
static void refresh_noise(erg_sparse *sp)
{
    if (!sp->noise_auto)
        return;
    int pts = 0;
    double est = estimate_noise(sp, &pts);
    sp->noise_est = est;
    sp->noise_pts = pts;
    double level = pts >= NOISE_MIN_POINTS && est > NOISE_DEFAULT ? est : NOISE_DEFAULT;
    if (level > 1)
        level = 1;
    if (level >= ERG_SPARSE_NOISY && !sp->noise_latched) {
        sp->noise_latched = true;
        sp->o.time_noise = level;
        set_budgets(sp); /* a quarter of the sweep from now on */
    }
    if (sp->noise_latched && level < ERG_SPARSE_NOISY)
        level = ERG_SPARSE_NOISY;
    sp->o.time_noise = level;
}

erg_status erg_sparse_set_noise(erg_sparse *sp, double time_noise, erg_error *err)
{
    if (!sp)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_set_noise: NULL argument");
    if (!(time_noise <= 1) || !isfinite(time_noise))
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling: time noise %g is not in 0..1 (or negative: "
                             "estimated from the measurements)",
                             time_noise);
    for (int i = 0; i < 2 * sp->S; i++)
        for (int x = 1; x < sp->n; x++)
            if (sp->c[i].meas[x])
                return erg_error_set(err, ERG_ESTATE,
                                     "sparse profiling: the noise level can be set only before "
                                     "a clock below the maximum (%d MHz) is measured; stage %d "
                                     "%s has measured %d MHz",
                                     sp->freqs[0], i / 2,
                                     erg_instr_kind_name((erg_instr_kind)(i % 2)), sp->freqs[x]);
    if (time_noise < 0 && !sp->resid &&
        !(sp->resid = erg__calloc(4 * (size_t)sp->S * sp->n, sizeof(double))))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    sp->noise_auto = time_noise < 0;
    sp->noise_latched = false;
    sp->noise_est = NAN;
    sp->noise_pts = 0;
    sp->o.time_noise = time_noise < 0 ? NOISE_DEFAULT : time_noise;
    set_budgets(sp);
    sp->stale = true;
    return ERG_OK;
}

double erg_sparse_noise(const erg_sparse *sp, double *estimate, int *points)
{
    if (estimate)
        *estimate = NAN;
    if (points)
        *points = 0;
    if (!sp)
        return NAN;
    erg__sparse_refresh(sp);
    if (sp->noise_auto) {
        if (estimate)
            *estimate = sp->noise_est;
        if (points)
            *points = sp->noise_pts;
    }
    return sp->o.time_noise;
}

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
            fitted = !erg__sparse_noise_fit(sp, sp->c, k, q, sp->fit + (size_t)(2 * k + q) * S * n,
                                            NULL);
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
    refresh_noise(sp);
    if (erg__sparse_noisy_mode(sp)) {
        update_wants_noisy(sp);
        return;
    }
    int S = sp->S, n = sp->n;
    erg__sparse_find_groups(sp, sp->group);
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

void erg__sparse_refresh(const erg_sparse *sp)
{
    if (sp->stale)
        update_wants((erg_sparse *)sp); /* a cache: asking stays pure */
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
        if (!erg__sparse_noisy_mode(sp))
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
    if (!c || !erg__sparse_noisy_mode(sp))
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

/* swing.c: the least-energy frontier plan whose power swing stays within a bound
 * (docs/fleet.md).
 *
 * A pass over a frontier's plans: each plan within the deadline is emulated, the plans are
 * taken in order of energy, and the first whose swing over the window meets the bound wins --
 * unless a per-GPU power floor is allowed: then a plan whose swing is too large takes the least
 * floor that brings it within the bound (bisection: a floor at the highest power any GPU draws
 * leaves no swing at all), and pays the energy the floor burns; the least total energy wins, and
 * the search stops at the first plan whose own energy is already no better. */
#include "core/internal.h"
#include "ergon/emulate.h"

#include <math.h>
#include <stdlib.h>

typedef struct cand {
    size_t k;
    double energy_j;
} cand;

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->energy_j != y->energy_j)
        return x->energy_j < y->energy_j ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* The least floor that brings tr's swing within max_swing_w, and the stats with it. */
static erg_status least_floor(const erg_power_trace *tr, double window_s, double max_swing_w,
                              double *floor_w, erg_power_stats *ps, erg_error *err)
{
    double lo = 0, hi = 0;
    for (size_t i = 0; i < erg_power_trace_len(tr); i++)
        for (int g = 0; g < erg_power_trace_num_gpus(tr); g++)
            hi = fmax(hi, erg_power_trace_gpu(tr, i, g));
    erg_status st = ERG_OK;
    for (int it = 0; it < 40 && !st && hi - lo > 1e-6 * (hi + 1); it++) {
        double mid = 0.5 * (lo + hi);
        erg_power_trace *fl;
        erg_power_stats s;
        st = erg_power_trace_floor(tr, mid, &fl, err);
        if (!st)
            st = erg_power_trace_stats(fl, window_s, &s, err);
        erg_power_trace_free(fl);
        if (!st && s.swing_w <= max_swing_w)
            hi = mid;
        else
            lo = mid;
    }
    erg_power_trace *fl = NULL;
    if (!st)
        st = erg_power_trace_floor(tr, hi, &fl, err);
    if (!st)
        st = erg_power_trace_stats(fl, window_s, ps, err);
    erg_power_trace_free(fl);
    *floor_w = hi;
    return st;
}

/* The emulated energy of every plan within the deadline, least first. */
static erg_status candidates(const erg_profile *profile, const erg_dag *dag, const erg_frontier *f,
                             const erg_emulate_opts *opts, double deadline_s, cand **out,
                             size_t *n_out, erg_error *err)
{
    size_t n = erg_frontier_size(f), m = 0;
    cand *c = erg__calloc(n ? n : 1, sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        erg_plan *p;
        erg_emulation em;
        erg_status st = erg_frontier_plan(f, k, &p, err);
        if (!st)
            st = erg_emulate_ex(profile, dag, p, opts, &em, NULL, NULL, err);
        erg_plan_free(p);
        if (st) {
            erg__free(c);
            return st;
        }
        if (em.time_s <= deadline_s * (1 + 1e-12))
            c[m++] = (cand){k, em.energy_j};
    }
    qsort(c, m, sizeof *c, cmp_cand);
    *out = c;
    *n_out = m;
    return ERG_OK;
}

erg_status erg_frontier_pick_swing(const erg_profile *profile, const erg_dag *dag,
                                   const erg_frontier *f, const erg_emulate_opts *opts,
                                   double deadline_s, double window_s, double max_swing_w,
                                   bool allow_floor, erg_swing_pick *out, erg_error *err)
{
    if (!profile || !dag || !f || !opts || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_pick_swing: NULL argument");
    if (!(deadline_s > 0) || !(max_swing_w >= 0) || !isfinite(max_swing_w))
        return erg_error_set(err, ERG_EINVAL,
                             "swing-bounded choice: deadline %g s and swing bound %g W (need a "
                             "deadline > 0 and a finite bound >= 0)",
                             deadline_s, max_swing_w);
    if (!(window_s > 0) || !isfinite(window_s))
        return erg_error_set(err, ERG_EINVAL, "swing-bounded choice: window %g s (must be > 0)",
                             window_s);
    cand *c = NULL;
    size_t m = 0;
    erg_status st = candidates(profile, dag, f, opts, deadline_s, &c, &m, err);
    if (st)
        return st;
    double best = INFINITY, least_swing = INFINITY;
    size_t checked = 0;
    for (size_t i = 0; i < m && !st && c[i].energy_j < best; i++) {
        erg_plan *p = NULL;
        erg_power_trace *tr = NULL;
        erg_power_stats ps;
        erg_emulation em;
        st = erg_frontier_plan(f, c[i].k, &p, err);
        if (!st)
            st = erg_emulate_ex(profile, dag, p, opts, &em, NULL, NULL, err);
        if (!st)
            st = erg_power_trace_new(profile, dag, p, opts, &tr, err);
        if (!st)
            st = erg_power_trace_stats(tr, window_s, &ps, err);
        double floor_w = 0;
        if (!st) {
            checked++;
            least_swing = fmin(least_swing, ps.swing_w);
            if (ps.swing_w > max_swing_w && allow_floor)
                st = least_floor(tr, window_s, max_swing_w, &floor_w, &ps, err);
        }
        if (!st && ps.swing_w <= max_swing_w) {
            double total = ps.avg_w * em.time_s;
            if (total < best) {
                best = total;
                out->index = c[i].k;
                out->em = em;
                out->power = ps;
                out->floor_w = floor_w;
                out->floor_energy_j = floor_w > 0 ? total - em.energy_j : 0;
            }
        }
        erg_power_trace_free(tr);
        erg_plan_free(p);
    }
    erg__free(c);
    if (st)
        return st;
    out->plans_checked = checked;
    if (!isfinite(best)) {
        if (!m)
            return erg_error_set(err, ERG_ENOTFOUND,
                                 "swing-bounded choice: no plan runs within %g s", deadline_s);
        return erg_error_set(err, ERG_ENOTFOUND,
                             "swing-bounded choice: no plan within %g s swings at most %g W over "
                             "%g s (the least swing there is %.1f W)",
                             deadline_s, max_swing_w, window_s, least_swing);
    }
    return ERG_OK;
}

/* fleet.c: the fleet's power budget as a multiple-choice knapsack (docs/fleet.md).
 *
 * Each job keeps the points no other of its points beats on both power and slowdown (its Pareto
 * list, by power), and their lower convex hull. For a price mu >= 0 per watt every job's best
 * hull point minimises cost + mu x power; the Lagrangian L(mu) = sum of those minima - mu x cap is
 * a lower bound on any assignment under the cap, and its maximum is the LP relaxation's value.
 * Bisection on mu finds the price where the hull choices just fit the cap; those choices,
 * improved greedily with the watts left, are the first assignment. A depth-first branch and
 * bound over the jobs' Pareto points then proves it optimal or finds a better one: a node's bound
 * is its cost plus the Lagrangian bound of the jobs still open at their capacity, an O(1) sum.
 * When the node budget runs out the best assignment found is returned with its gap to L. */
#include "core/internal.h"
#include "ergon/fleet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fpoint {
    double p, c; /* power, weighted slowdown */
    size_t idx;  /* in the caller's arrays */
} fpoint;

typedef struct fjob {
    fpoint *par; /* Pareto list: power ascending, cost strictly descending */
    size_t npar;
    fpoint *hull; /* lower convex hull of par (a subsequence) */
    size_t nhull;
    double g; /* min over hull of c + mu p at the chosen mu */
} fjob;

void erg_fleet_opts_init(erg_fleet_opts *o)
{
    memset(o, 0, sizeof *o);
}

static int cmp_point(const void *a, const void *b)
{
    const fpoint *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

static erg_status check_job(const erg_fleet_job *j, size_t k, erg_error *err)
{
    if (!j->num_points || !j->time_s || !j->power_w)
        return erg_error_set(err, ERG_EINVAL, "fleet: job %zu has no frontier points", k);
    if (!(j->weight >= 0) || !isfinite(j->weight))
        return erg_error_set(err, ERG_EINVAL, "fleet: job %zu has weight %g (must be >= 0)", k,
                             j->weight);
    for (size_t i = 0; i < j->num_points; i++)
        if (!(j->time_s[i] > 0) || !isfinite(j->time_s[i]) || !(j->power_w[i] >= 0) ||
            !isfinite(j->power_w[i]))
            return erg_error_set(err, ERG_EINVAL,
                                 "fleet: job %zu point %zu has time %g s and power %g W (need a "
                                 "time > 0 and a power >= 0)",
                                 k, i, j->time_s[i], j->power_w[i]);
    return ERG_OK;
}

/* Pareto list and hull of one job; pts (num_points) is scratch that becomes par. */
static void build_job(const erg_fleet_job *j, fpoint *pts, fpoint *hull, fjob *fj)
{
    size_t n = j->num_points;
    double tmin = INFINITY;
    for (size_t i = 0; i < n; i++)
        tmin = j->time_s[i] < tmin ? j->time_s[i] : tmin;
    bool asc = true, desc = true;
    for (size_t i = 0; i < n; i++) {
        pts[i].p = j->power_w[i];
        pts[i].c = j->weight * j->time_s[i] / tmin;
        pts[i].idx = i;
        if (i && cmp_point(&pts[i - 1], &pts[i]) > 0)
            asc = false;
        if (i && cmp_point(&pts[i - 1], &pts[i]) < 0)
            desc = false;
    }
    if (!asc && desc) /* frontiers come slowest (least power) first or last: no sort needed */
        for (size_t i = 0; i < n / 2; i++) {
            fpoint t = pts[i];
            pts[i] = pts[n - 1 - i];
            pts[n - 1 - i] = t;
        }
    else if (!asc)
        qsort(pts, n, sizeof *pts, cmp_point);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && pts[i].c >= pts[m - 1].c)
            continue; /* as much power or more for no less slowdown */
        if (m && pts[i].p == pts[m - 1].p)
            m--; /* same power, less slowdown */
        pts[m++] = pts[i];
    }
    size_t h = 0;
    for (size_t i = 0; i < m; i++) {
        while (h >= 2) {
            const fpoint *a = &hull[h - 2], *b = &hull[h - 1], *c = &pts[i];
            /* b lies on or above the segment a-c: not on the lower hull */
            if ((b->c - a->c) * (c->p - a->p) >= (c->c - a->c) * (b->p - a->p))
                h--;
            else
                break;
        }
        hull[h++] = pts[i];
    }
    fj->par = pts;
    fj->npar = m;
    fj->hull = hull;
    fj->nhull = h;
}

/* The hull point minimising c + mu p: the first whose next slope is >= -mu. */
static size_t hull_argmin(const fjob *fj, double mu)
{
    size_t lo = 0, hi = fj->nhull - 1; /* answer in [lo, hi] */
    while (lo < hi) {
        size_t k = (lo + hi) / 2;
        const fpoint *a = &fj->hull[k], *b = &fj->hull[k + 1];
        if (b->c - a->c < -mu * (b->p - a->p))
            lo = k + 1;
        else
            hi = k;
    }
    return lo;
}

/* Power of the hull choices at mu, and L(mu). */
static double at_price(fjob *jobs, size_t n, double mu, double cap, double *lag)
{
    double pw = 0, g = 0;
    for (size_t j = 0; j < n; j++) {
        const fpoint *q = &jobs[j].hull[hull_argmin(&jobs[j], mu)];
        pw += q->p;
        g += q->c + mu * q->p;
    }
    *lag = g - mu * cap;
    return pw;
}

/* Pareto position of the hull choice at mu. */
static size_t par_pos(const fjob *fj, const fpoint *q)
{
    size_t lo = 0, hi = fj->npar - 1;
    while (lo < hi) {
        size_t k = (lo + hi) / 2;
        if (fj->par[k].p < q->p)
            lo = k + 1;
        else
            hi = k;
    }
    return lo;
}

/* Spend the watts left: repeatedly move the job whose best affordable point saves most. */
static void greedy_fill(const fjob *jobs, size_t n, double cap, size_t *pos, double *power)
{
    for (int pass = 0; pass < 64; pass++) {
        double left = cap - *power, best = 0;
        size_t bj = n, bq = 0;
        for (size_t j = 0; j < n; j++) {
            const fjob *fj = &jobs[j];
            size_t q = pos[j], lo = q, hi = fj->npar - 1;
            double lim = fj->par[q].p + left;
            while (lo < hi) { /* the last point with power <= lim */
                size_t k = (lo + hi + 1) / 2;
                if (fj->par[k].p <= lim)
                    lo = k;
                else
                    hi = k - 1;
            }
            double save = fj->par[q].c - fj->par[lo].c;
            if (save > best) {
                best = save;
                bj = j;
                bq = lo;
            }
        }
        if (bj == n)
            return;
        *power += jobs[bj].par[bq].p - jobs[bj].par[pos[bj]].p;
        pos[bj] = bq;
    }
}

typedef struct bnb {
    const fjob *jobs;
    size_t n;
    double mu;
    const double *suf_g;    /* sum of g over jobs d.. */
    const double *suf_minp; /* sum of the least power over jobs d.. */
    double best;
    size_t *best_pos;
    size_t nodes, max_nodes;
    double rel_tol;
    bool stopped;
} bnb;

/* Depth-first search from job 0 with an explicit stack (one Pareto position per depth). */
static void search(bnb *b, double cap, size_t *cur)
{
    size_t n = b->n, d = 0;
    double *cost = erg__calloc(n + 1, sizeof(double)), *left = erg__calloc(n + 1, sizeof(double));
    if (!cost || !left) {
        b->stopped = true;
        goto out;
    }
    left[0] = cap;
    cur[0] = (size_t)-1;
    for (;;) {
        /* advance job d to its next point whose child bound can beat the best */
        const fjob *fj = &b->jobs[d];
        size_t q = cur[d] + 1;
        double tol = b->rel_tol * (fabs(b->best) + 1e-300);
        for (; q < fj->npar; q++) {
            if (++b->nodes > b->max_nodes) {
                b->stopped = true;
                goto out;
            }
            const fpoint *pt = &fj->par[q];
            double l2 = left[d] - pt->p;
            if (l2 < b->suf_minp[d + 1] - 1e-9 * (cap + 1)) {
                q = fj->npar; /* more power from here on: nothing fits */
                break;
            }
            /* at the last job the bound is the cost itself */
            double bound = cost[d] + pt->c + (d + 1 < n ? b->suf_g[d + 1] - b->mu * l2 : 0);
            if (bound < b->best - tol)
                break;
        }
        if (q >= fj->npar) {
            if (d == 0)
                goto out;
            d--;
            continue;
        }
        cur[d] = q;
        cost[d + 1] = cost[d] + fj->par[q].c;
        left[d + 1] = left[d] - fj->par[q].p;
        if (d + 1 == n) {
            if (cost[n] < b->best) {
                b->best = cost[n];
                memcpy(b->best_pos, cur, n * sizeof *cur);
            }
            continue;
        }
        d++;
        cur[d] = (size_t)-1;
    }
out:
    erg__free(cost);
    erg__free(left);
}

static erg_status solve(fjob *jobs, size_t n, double cap, const erg_fleet_opts *o, size_t *pos,
                        erg_fleet_result *r, erg_error *err)
{
    double minp = 0, maxslope = 0;
    for (size_t j = 0; j < n; j++) {
        minp += jobs[j].hull[0].p;
        for (size_t k = 0; k + 1 < jobs[j].nhull; k++) {
            double s = (jobs[j].hull[k].c - jobs[j].hull[k + 1].c) /
                       (jobs[j].hull[k + 1].p - jobs[j].hull[k].p);
            maxslope = s > maxslope ? s : maxslope;
        }
    }
    if (minp > cap) {
        for (size_t j = 0; j < n; j++)
            pos[j] = 0;
        r->feasible = false;
        return ERG_OK;
    }
    double lag0, lo = 0, hi = maxslope * 2 + 1, lag_hi, best_lag;
    if (at_price(jobs, n, 0, cap, &lag0) <= cap) {
        hi = 0;
        best_lag = lag0;
    } else {
        at_price(jobs, n, hi, cap, &lag_hi);
        best_lag = lag0 > lag_hi ? lag0 : lag_hi;
        for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; it++) {
            double mid = 0.5 * (lo + hi), lag;
            if (at_price(jobs, n, mid, cap, &lag) <= cap)
                hi = mid;
            else
                lo = mid;
            best_lag = lag > best_lag ? lag : best_lag;
        }
        double lag;
        at_price(jobs, n, hi, cap, &lag);
        best_lag = lag > best_lag ? lag : best_lag;
    }
    double power = 0, cost = 0;
    for (size_t j = 0; j < n; j++) {
        pos[j] = par_pos(&jobs[j], &jobs[j].hull[hull_argmin(&jobs[j], hi)]);
        power += jobs[j].par[pos[j]].p;
    }
    greedy_fill(jobs, n, cap, pos, &power);
    for (size_t j = 0; j < n; j++)
        cost += jobs[j].par[pos[j]].c;
    r->lower_bound = best_lag;
    double *suf = erg__calloc(2 * (n + 1), sizeof(double));
    size_t *cur = erg__calloc(n + 1, sizeof(size_t));
    if (!suf || !cur) {
        erg__free(suf);
        erg__free(cur);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (size_t j = n; j-- > 0;) {
        const fpoint *q = &jobs[j].hull[hull_argmin(&jobs[j], hi)];
        suf[j] = suf[j + 1] + q->c + hi * q->p;
        suf[n + 1 + j] = suf[n + 1 + j + 1] + jobs[j].par[0].p;
    }
    bnb b = {jobs, n, hi, suf, suf + n + 1, cost, pos, 0, o->max_nodes, o->rel_tol, false};
    if (cost - best_lag > o->rel_tol * fabs(cost))
        search(&b, cap, cur);
    erg__free(suf);
    erg__free(cur);
    r->feasible = true;
    r->nodes = b.nodes;
    r->exact = !b.stopped;
    r->cost = b.best;
    r->gap = b.best - best_lag;
    if (r->gap < 0)
        r->gap = 0;
    return ERG_OK;
}

erg_status erg_fleet_assign(const erg_fleet_job *jobs, size_t n, double cap_w,
                            const erg_fleet_opts *opts, size_t *choice, erg_fleet_result *r,
                            erg_error *err)
{
    if (!jobs || !choice || !r || !n)
        return erg_error_set(err, ERG_EINVAL, "erg_fleet_assign: NULL argument or no jobs");
    if (!(cap_w >= 0) || isnan(cap_w))
        return erg_error_set(err, ERG_EINVAL, "fleet: invalid power cap %g W", cap_w);
    erg_fleet_opts def;
    erg_fleet_opts_init(&def);
    if (!opts)
        opts = &def;
    erg_fleet_opts o = *opts;
    if (!o.max_nodes)
        o.max_nodes = 1000000;
    if (!(o.rel_tol > 0))
        o.rel_tol = 1e-9;
    size_t total = 0;
    for (size_t j = 0; j < n; j++) {
        erg_status st = check_job(&jobs[j], j, err);
        if (st)
            return st;
        total += jobs[j].num_points;
    }
    memset(r, 0, sizeof *r);
    fjob *fj = erg__calloc(n, sizeof *fj);
    fpoint *pts = erg__calloc(total * 2, sizeof *pts);
    size_t *pos = erg__calloc(n, sizeof *pos);
    if (!fj || !pts || !pos) {
        erg__free(fj);
        erg__free(pts);
        erg__free(pos);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (size_t j = 0, off = 0; j < n; off += jobs[j].num_points, j++)
        build_job(&jobs[j], pts + 2 * off, pts + 2 * off + jobs[j].num_points, &fj[j]);
    erg_status st = solve(fj, n, cap_w, &o, pos, r, err);
    if (!st) {
        r->power_w = 0;
        double cost = 0;
        for (size_t j = 0; j < n; j++) {
            choice[j] = fj[j].par[pos[j]].idx;
            r->power_w += fj[j].par[pos[j]].p;
            cost += fj[j].par[pos[j]].c;
        }
        if (!r->feasible) {
            r->cost = cost;
            r->lower_bound = cost;
        }
    }
    erg__free(fj);
    erg__free(pts);
    erg__free(pos);
    return st;
}

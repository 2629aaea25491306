/* perseus.c: the Perseus time-energy frontier planner (docs/planner.md).
 *
 * WHAT IT DOES: for an S-stage, M-microbatch pipeline and a stage profile,
 * it emits every per-instruction clock plan on the iteration time-energy
 * frontier, from the slowest plan to the fastest, one time unit apart.
 *
 * HOW IT WORKS (Phillips-Dessouky crashing, as in the reference):
 *  1. Each (stage, instruction kind) keeps its Pareto-optimal clocks with
 *     quantised times q; an exponential a exp(b d) + c is fitted to the
 *     effective energy (energy above what blocking would have burnt) as a
 *     function of the duration d in units.
 *  2. Every instruction starts at its slowest duration. Each iteration
 *     computes the critical sub-DAG (CPM on integer durations), gives each
 *     critical instruction the flow bounds lb = energy saved by lengthening it
 *     one unit and ub = energy spent shortening it one unit, and finds the
 *     minimum cut by max flow with lower bounds. Arcs crossing the cut
 *     forward are shortened, arcs crossing backward are lengthened: every
 *     critical path gets one unit shorter at the least energy.
 *  3. It stops when the cut must cross an arc that cannot be shortened.
 *
 * All flow bounds are rounded down to multiples of 1e-6 J by the reference,
 * so the flow runs in exact integer micro-joules, and the cut is the exact
 * minimal minimum cut (any residual of one micro-joule or more crosses). The
 * reference judges residuals in floating point against a 1e-6 tolerance;
 * the exact cut reproduces its published frontiers more closely than any
 * tolerance we tried (all eight A100 frontiers to 1e-9 J with its fits).
 *
 * LIMITATIONS: plans that differ from the reference only in near-ties at the
 * 1e-6 tolerance of the minimum cut's capacity comparisons can resolve the other way; energies
 * then differ by about 1e-6 J and the trajectories re-converge. */
#include "planner/perseus_internal.h"
#include "core/internal.h"
#include "planner/maxflow.h"
#include "planner/perseus_crash.h"
#include "planner/frontier_internal.h"

#include <cminpack.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ERG__PD_INF 10000.0             /* the reference's "infinite" bound, J */
#define ERG__PD_TOL 1e-6                /* the reference's tolerance, J */
#define ERG__BIG_CAP ((int64_t)1 << 60) /* truly unbounded (sink->source arc) */
#ifndef ERG__CUT_MIN_RES
#define ERG__CUT_MIN_RES 1 /* exact: any residual crosses */
#endif
#ifndef ERG__FEAS_MAX_DEFICIT
#define ERG__FEAS_MAX_DEFICIT 1 /* unsaturated by more than 1e-6 J */
#endif

void erg_perseus_opts_init(erg_perseus_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->unit_s = 0.001;
    o->noise_factor = 0.95;
    o->schedule.kind = ERG_SCHED_1F1B;
}

/* ---- candidates (docs/planner.md, step 1) ---- */

int erg__perseus_candidates(const erg_profile_point *pts, int n, double unit_s, double nf,
                            erg__cand *out)
{
    int ns = 0;
    /* Steps 1-2: quantise, then the (soft) Pareto filter on raw values. */
    int *surv = erg__malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!surv)
        return -1;
    for (int i = 0; i < n; i++) {
        bool dominated = false;
        for (int j = 0; j < n && !dominated; j++)
            if (pts[j].time_s < nf * pts[i].time_s && pts[j].energy_j < nf * pts[i].energy_j)
                dominated = true;
        if (!dominated)
            surv[ns++] = i;
    }
    /* Step 3: per quantised time keep the largest energy (ties: larger time,
     * then earlier row), which is what "sort by time desc, stable sort by
     * energy desc, first per q wins" selects. */
    int nc = 0;
    for (int k = 0; k < ns; k++) {
        const erg_profile_point *p = &pts[surv[k]];
        int q = (int)erg__floordiv_py(p->time_s, unit_s);
        int found = -1;
        for (int c = 0; c < nc; c++)
            if (out[c].q == q)
                found = c;
        erg__cand cand = {q, p->freq_mhz, p->time_s, p->energy_j};
        if (found < 0) {
            out[nc++] = cand;
        } else {
            erg__cand *b = &out[found];
            if (p->energy_j > b->energy_j || (p->energy_j == b->energy_j && p->time_s > b->time_s))
                *b = cand;
        }
    }
    erg__free(surv);
    /* Step 4: q descending (q values are unique now). */
    for (int i = 1; i < nc; i++) {
        erg__cand c = out[i];
        int j = i - 1;
        while (j >= 0 && out[j].q < c.q) {
            out[j + 1] = out[j];
            j--;
        }
        out[j + 1] = c;
    }
    return nc;
}

/* ---- exponential fit (docs/planner.md, step 2) ---- */

/* The points and the last two exp(b x[i]) vectors: the forward-difference Jacobian perturbs
 * one parameter at a time, so two of its three evaluations (a and c) and the first after it
 * have the b of an earlier call, and exp(b * x[i]) of the same b is the same bits. */
typedef struct fit_data {
    const double *x, *y;
    double *e[2]; /* [m] exp(b[k] * x[i]) */
    double b[2];  /* the b of each vector */
    int valid[2]; /* vector k holds b[k] */
    int last;     /* the vector used last */
} fit_data;

static const double *fit_exp(fit_data *d, int m, double b)
{
    for (int k = 0; k < 2; k++)
        if (d->valid[k] && !memcmp(&d->b[k], &b, sizeof b)) {
            d->last = k;
            return d->e[k];
        }
    int k = d->last ^ 1; /* the least recently used */
    double *e = d->e[k];
    for (int i = 0; i < m; i++)
        e[i] = exp(b * d->x[i]);
    d->b[k] = b;
    d->valid[k] = 1;
    d->last = k;
    return e;
}

static int fit_residuals(void *p, int m, int n, const double *x, double *fvec, int iflag)
{
    (void)n;
    (void)iflag;
    fit_data *d = p;
    const double *e = fit_exp(d, m, x[1]);
    for (int i = 0; i < m; i++)
        fvec[i] = x[0] * e[i] + x[2] - d->y[i];
    return 0;
}

erg_status erg__perseus_fit(const double *x, const double *y, int m, double unit_s, double abc[3],
                            erg_error *err)
{
    static const double a0s[] = {10, 100, 1000};
    static const double b0s[] = {-0.01, -0.02, -0.03, -0.04, -0.05, -0.1};
    static const double c0s[] = {10, 100, 1000};
    if (m <= 3)
        return erg_error_set(err, ERG_ENUMERIC,
                             "cannot fit a 3-parameter curve to %d points (need at least 4)", m);
    double *work = erg__malloc(sizeof(double) * (size_t)(m * 3 + m + 3 + 3 * 3 + m + 16 + 2 * m));
    int ipvt[3];
    if (!work)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *fjac = work, *fvec = fjac + 3 * m, *qtf = fvec + m, *wa1 = qtf + 3, *wa2 = wa1 + 3,
           *wa3 = wa2 + 3, *wa4 = wa3 + 3, *diag = wa4 + m;
    /* diag needs 3 of the 16 spare; the two exp vectors follow */
    fit_data d = {x, y, {diag + 16, diag + 16 + m}, {0, 0}, {0, 0}, 0};
    double best_mse = INFINITY;
    bool found = false;
    double scale = unit_s / 0.001;
    for (size_t ia = 0; ia < ERG__ARRAY_LEN(a0s); ia++)
        for (size_t ib = 0; ib < ERG__ARRAY_LEN(b0s); ib++)
            for (size_t ic = 0; ic < ERG__ARRAY_LEN(c0s); ic++) {
                double p[3] = {a0s[ia], b0s[ib] * scale, c0s[ic]};
                int nfev = 0;
                int info = lmdif(fit_residuals, &d, m, 3, p, fvec, 1.49012e-8, 1.49012e-8, 0.0,
                                 50000, 2.220446049250313e-16, diag, 1, 100.0, 0, &nfev, fjac, m,
                                 ipvt, qtf, wa1, wa2, wa3, wa4);
                if (info < 1 || info > 4)
                    continue; /* scipy: "optimal parameters not found" */
                /* scipy returns an infinite covariance when R is singular. */
                bool singular = false;
                for (int k = 0; k < 3; k++)
                    if (fjac[k * m + k] == 0.0)
                        singular = true;
                if (singular || p[0] < 0)
                    continue;
                double sse = 0;
                const double *e = fit_exp(&d, m, p[1]);
                for (int i = 0; i < m; i++) {
                    double r = y[i] - (p[0] * e[i] + p[2]);
                    sse += r * r;
                }
                double mse = sse / m;
                if (!isfinite(mse) || !isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2]))
                    continue;
                if (mse < best_mse) {
                    best_mse = mse;
                    memcpy(abc, p, sizeof(p));
                    found = true;
                }
            }
    erg__free(work);
    if (!found) {
        double tmax = 0;
        for (int i = 0; i < m; i++)
            tmax = fmax(tmax, x[i] * unit_s);
        char hint[200] = "";
        if (tmax > 10)
            snprintf(hint, sizeof hint,
                     " (the instruction times reach %g s: are the profile's times in "
                     "milliseconds? The profile takes seconds and joules)",
                     tmax);
        return erg_error_set(err, ERG_ENUMERIC,
                             "no exponential fit a*exp(b*d)+c was accepted for %d points%s", m,
                             hint);
    }
    return ERG_OK;
}

/* ---- operation specs ---- */

static int64_t bound_units(double x)
{
    /* The reference rounds down to a multiple of 1e-6 with Python's floor
     * division; we keep the multiple as an integer. */
    return (int64_t)erg__floordiv_py(x, ERG__PD_TOL);
}

/* The fitted coefficients of an earlier spec (prev[0..nprev)) whose fit read exactly the
 * points x, y (nc of them, bit for bit), or NULL. erg__perseus_fit is a deterministic function
 * of (x, y, m, unit_s), so its result is the one fitting them again would give; on the
 * published profiles the stages without the embedding or the head share their clocks, so most
 * (stage, kind) classes fit the same points (gpt3-175b: 4 distinct fits of 16). */
static const double *same_fit(const op_spec *prev, int nprev, const double *x, const double *y,
                              int nc, const erg_perseus_opts *o)
{
    for (int k = 0; k < nprev; k++) {
        const op_spec *p = &prev[k];
        if (!p->fitted || p->ncand != nc)
            continue;
        int same = 1;
        for (int i = 0; i < nc && same; i++) {
            /* build_spec's x and y of p, the same operations */
            double px = (double)p->cand[i].q;
            double py = p->cand[i].energy_j - ((o->blocking_power_w * p->cand[i].q) * o->unit_s);
            same = !memcmp(&px, &x[i], sizeof px) && !memcmp(&py, &y[i], sizeof py);
        }
        if (same)
            return p->abc;
    }
    return NULL;
}

/* A spec from the points of one cost class (pts, n). fit_idx >= 0 selects
 * the o->fits coefficients of (stage s, kind) when the caller gave fits. The specs built
 * before (prev[0..nprev)) lend their fits to the same points. */
static erg_status build_spec(const erg_profile_point *pts, size_t n, int s, erg_instr_kind kind,
                             int fit_idx, const erg_perseus_opts *o, const op_spec *prev, int nprev,
                             op_spec *sp, erg_error *err)
{
    const double *abc_prev;
    sp->stage = s;
    sp->kind = kind;
    sp->cand = erg__calloc(n ? n : 1, sizeof(erg__cand));
    if (!sp->cand)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    /* Quantised times are ints: refuse before the conversion overflows. */
    for (size_t i = 0; i < n; i++)
        if (!(pts[i].time_s / o->unit_s < 1e9))
            return erg_error_set(err, ERG_EINVAL,
                                 "stage %d %s at %d MHz: time %g s is %.3g units of %g s (more "
                                 "than 1e9); use a larger --unit-time",
                                 s, erg_instr_kind_name(kind), pts[i].freq_mhz, pts[i].time_s,
                                 pts[i].time_s / o->unit_s, o->unit_s);
    double nf = o->always_use_noise_factor ? o->noise_factor : 1.0;
    int nc = erg__perseus_candidates(pts, (int)n, o->unit_s, nf, sp->cand);
    if (nc >= 0 && nc <= 3 && !o->always_use_noise_factor) {
        nf = o->noise_factor;
        nc = erg__perseus_candidates(pts, (int)n, o->unit_s, nf, sp->cand);
    }
    if (nc < 0)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    sp->ncand = nc;
    sp->nf_used = nf;
    if (nc == 0)
        return erg_error_set(err, ERG_EINVAL, "stage %d %s: no usable clock in the profile", s,
                             erg_instr_kind_name(kind));
    sp->max_q = sp->cand[0].q;
    sp->min_q = sp->cand[nc - 1].q;
    if (sp->min_q < 0 || (long)sp->max_q - sp->min_q > 10000000)
        return erg_error_set(err, ERG_EINVAL,
                             "stage %d %s: durations span %d..%d units; use a larger --unit-time",
                             s, erg_instr_kind_name(kind), sp->min_q, sp->max_q);
    double *x = erg__malloc(sizeof(double) * 2 * (size_t)nc);
    if (!x)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *y = x + nc;
    for (int i = 0; i < nc; i++) {
        x[i] = (double)sp->cand[i].q;
        y[i] = sp->cand[i].energy_j - ((o->blocking_power_w * sp->cand[i].q) * o->unit_s);
    }
    erg_status st = ERG_OK;
    if (o->fits && fit_idx >= 0) {
        memcpy(sp->abc, o->fits + (size_t)fit_idx * 3, sizeof(sp->abc));
    } else if (sp->min_q == sp->max_q) {
        /* One duration only: nothing to fit; its cost is the point itself. */
        sp->abc[0] = 0;
        sp->abc[1] = 0;
        sp->abc[2] = y[0];
    } else if ((abc_prev = same_fit(prev, nprev, x, y, nc, o))) {
        memcpy(sp->abc, abc_prev, sizeof(sp->abc));
        sp->fitted = 1;
    } else {
        erg_error ferr;
        st = erg__perseus_fit(x, y, nc, o->unit_s, sp->abc, &ferr);
        sp->fitted = !st;
        if (st)
            erg_error_set(err, st,
                          "stage %d %s: %s (%d clocks left after filtering; the profile needs "
                          "at least 4 Pareto-optimal clocks per instruction)",
                          s, erg_instr_kind_name(kind), ferr.msg, nc);
    }
    erg__free(x);
    if (st)
        return st;
    size_t range = (size_t)(sp->max_q - sp->min_q + 1);
    sp->cost = erg__malloc(sizeof(double) * range);
    sp->lb = erg__malloc(sizeof(int64_t) * range);
    sp->ub = erg__malloc(sizeof(int64_t) * range);
    sp->freq = erg__malloc(sizeof(int) * range);
    if (!sp->cost || !sp->lb || !sp->ub || !sp->freq)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (size_t i = 0; i < range; i++) {
        double d = (double)(sp->min_q + (int)i);
        sp->cost[i] = sp->abc[0] * exp(sp->abc[1] * d) + sp->abc[2];
    }
    int c = 0; /* candidate with the largest q <= d */
    for (int d = sp->max_q; d >= sp->min_q; d--) {
        while (c < nc - 1 && sp->cand[c].q > d)
            c++;
        sp->freq[d - sp->min_q] = sp->cand[c].freq_mhz;
    }
    int64_t inf = bound_units(ERG__PD_INF);
    for (int d = sp->min_q; d <= sp->max_q; d++) {
        size_t i = (size_t)(d - sp->min_q);
        double lb, ub;
        if (o->fits && fit_idx >= 0) {
            memcpy(sp->abc, o->fits + (size_t)fit_idx * 3, sizeof(sp->abc));
        } else if (sp->min_q == sp->max_q) {
            sp->lb[i] = 0;
            sp->ub[i] = inf;
            continue;
        }
        if (d == sp->min_q) {
            lb = fabs(sp->cost[i] - sp->cost[i + 1]);
            sp->lb[i] = bound_units(lb);
            sp->ub[i] = inf;
        } else if (d == sp->max_q) {
            ub = fabs(sp->cost[i - 1] - sp->cost[i]);
            sp->lb[i] = 0;
            sp->ub[i] = bound_units(ub);
        } else {
            lb = fabs(sp->cost[i] - sp->cost[i + 1]);
            ub = fabs(sp->cost[i - 1] - sp->cost[i]) + ERG__PD_TOL;
            sp->lb[i] = bound_units(lb);
            sp->ub[i] = bound_units(ub);
        }
    }
    return ERG_OK;
}

static void free_spec(op_spec *sp)
{
    erg__free(sp->cand);
    erg__free(sp->cost);
    erg__free(sp->lb);
    erg__free(sp->ub);
    erg__free(sp->freq);
}

/* ---- the crashing loop ---- */

/* Critical path method on integer durations: earliest starts es, latest
 * finishes lf, makespan T. Runs once per plan over every dependency, so
 * the arrays live in locals (no reloads through cs) and the common case of
 * no transfer time has its own loops. */
void erg__crash_cpm(crash_state *cs)
{
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n;
    const int *topo = g->topo, *pred_off = g->pred_off, *pred = g->pred;
    const int *succ_off = g->succ_off, *succ = g->succ, *stage = g->rank;
    const int *d = cs->d;
    long *es = cs->es, *lf = cs->lf;
    const long lag = cs->lag;
    long T = 0;
    for (int k = 0; k < n; k++) {
        int u = topo[k];
        long s = crash_es_of(pred_off, pred, es, d, stage, lag, u);
        es[u] = s;
        if (s + d[u] > T)
            T = s + d[u];
    }
    for (int k = n - 1; k >= 0; k--) {
        int u = topo[k];
        long f = T;
        if (lag == 0) {
            for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
                int v = succ[j];
                long ls = lf[v] - d[v];
                if (ls < f)
                    f = ls;
            }
        } else {
            for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
                int v = succ[j];
                long ls = lf[v] - d[v] - (stage[u] != stage[v] ? lag : 0);
                if (ls < f)
                    f = ls;
            }
        }
        lf[u] = f;
    }
    cs->T = T;
}

/* The cut of the lower-bounded problem.
 *
 * The reference finds a feasible flow (super source/sink and a sink->source
 * arc), maximises it, and takes the nodes reachable in the residual graph:
 * in exact arithmetic that is the source side of the unique minimal minimum
 * cut, whatever max-flow algorithm is used. We get the same set faster:
 *
 *  - WARM: start from the previous iteration's flow on the arcs that are
 *    still critical, clamped into the new [lb, ub]. Conservation then fails
 *    only by small imbalances around the few arcs that changed. An arc
 *    SRC->x for each node with surplus and x->SNK for each with a deficit,
 *    and one max flow SRC->SNK on the residual capacities, repairs them and
 *    maximises at once. If every repair arc is saturated, the result is a
 *    feasible maximum flow of the original problem (no SRC->SNK path is
 *    left), so its residual reachable set is the minimal minimum cut.
 *  - COLD: the same from flow = lb everywhere (the repair arcs are then
 *    the lower-bound excesses of each node).
 *  - TWO-PHASE: the reference's construction, only used to decide
 *    feasibility when neither of the above saturates its repair arcs; an
 *    infeasible flow ends the frontier as in the reference. */

/* The nodes reachable from src through residuals >= ERG__CUT_MIN_RES, right
 * after erg__flow_max(f, src, ...). With the exact cut (1 micro-joule) that
 * is what the max flow's last search reached: no second search needed. */
static void cut_side(erg__flow *f, int src, unsigned char *reach)
{
#if ERG__CUT_MIN_RES == 1
    (void)src;
    erg__flow_source_side(f, reach);
#else
    erg__flow_reachable(f, src, ERG__CUT_MIN_RES, reach);
#endif
}

int erg__crash_solve_cut(crash_state *cs, int mode)
{
    erg__flow *f = &cs->flow;
    int n = cs->n;
    int SRC = 2 * n, SNK = 2 * n + 1, SS = 2 * n + 2, TT = 2 * n + 3;
    erg__flow_reset(f, 2 * n + 4);
    int64_t *im = cs->im;
    memset(im, 0, sizeof(int64_t) * (size_t)(2 * n + 4));
    {
        /* erg__flow_add spelled out over local arrays: arc pair k is flow
         * arcs 2k, 2k+1, in the same order as adding them one by one. */
        const int narcs = cs->narcs;
        const int *arc_u = cs->arc_u, *arc_v = cs->arc_v, *arc_key = cs->arc_key;
        const int64_t *arc_lb = cs->arc_lb, *arc_ub = cs->arc_ub, *prev_flow = cs->prev_flow;
        int *to = f->to, *next = f->next, *head = f->head;
        int64_t *res = f->res;
        for (int k = 0; k < narcs; k++) {
            int64_t lb = arc_lb[k], ub = arc_ub[k];
            int64_t g = lb;
            if (mode == CUT_WARM) {
                int64_t pf = prev_flow[arc_key[k]];
                g = pf < lb ? lb : pf > ub ? ub : pf;
            }
            int u = arc_u[k], v = arc_v[k], a = 2 * k;
            to[a] = v;
            res[a] = ub - g;
            next[a] = head[u];
            head[u] = a;
            to[a + 1] = u;
            res[a + 1] = mode == CUT_TWO_PHASE ? 0 : g - lb;
            next[a + 1] = head[v];
            head[v] = a + 1;
            im[v] += g;
            im[u] -= g;
        }
        f->arcs = 2 * narcs;
    }
    /* Only the nodes of critical instructions carry arcs (a critical
     * dependency joins two critical instructions), so the repair arcs below
     * visit them in ascending node order, as a scan over all 2n nodes would. */
    const int *crit = cs->crit;
    const int ncrit = cs->ncrit;
    if (mode == CUT_TWO_PHASE) {
        /* arcs carry flow - lb = 0; excess of lower bounds goes via SS/TT */
        int first_special = f->arcs;
        erg__flow_add(f, SNK, SRC, ERG__BIG_CAP);
        int64_t need = 0;
        for (int i = 0; i < 2 * ncrit; i++) {
            int v = 2 * crit[i >> 1] + (i & 1);
            if (im[v] > 0) {
                erg__flow_add(f, SS, v, im[v]);
                need += im[v];
            } else if (im[v] < 0) {
                erg__flow_add(f, v, TT, -im[v]);
            }
        }
        if (need > 0 && need - erg__flow_max(f, SS, TT) > ERG__FEAS_MAX_DEFICIT)
            return 0;
        for (int a = first_special; a < f->arcs; a++)
            f->res[a] = 0;
        erg__flow_max(f, SRC, SNK);
        cut_side(f, SRC, cs->reach);
        return 1;
    }
    int first = f->arcs;
    for (int i = 0; i < 2 * ncrit; i++) {
        int v = 2 * crit[i >> 1] + (i & 1);
        if (im[v] > 0)
            erg__flow_add(f, SRC, v, im[v]);
        else if (im[v] < 0)
            erg__flow_add(f, v, SNK, -im[v]);
    }
    int last = f->arcs;
    erg__flow_max(f, SRC, SNK);
    for (int a = first; a < last; a += 2)
        if (f->res[a] > ERG__FEAS_MAX_DEFICIT)
            return 0;
    cut_side(f, SRC, cs->reach);
    return 1;
}

/* One crashing step. Returns 1 if the durations changed (a plan to emit),
 * 0 if the loop ends, and fills *cost_change.
 *
 * Runs once per plan over the whole DAG, so it works on local copies of
 * the arrays and visits only the critical instructions after the first
 * pass. The arcs, their order and the flow are those of adding them one at
 * a time (op arc of x, then x's critical dependencies, x ascending; then
 * the dummies), so every plan is the same as before. */
static int crash_step(crash_state *cs, double *cost_change)
{
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n;
    const int SRC = 2 * n, SNK = 2 * n + 1;
    const int E = g->num_edges;
    const int64_t inf = cs->inf;
    const long lag = cs->lag;
    const int *succ_off = g->succ_off, *succ = g->succ, *stage = g->rank;
    const long *es = cs->es, *lf = cs->lf;
    int *d = cs->d;
    const int *spec_of = cs->spec_of;
    const op_spec *specs = cs->specs;
    const unsigned char *ends = cs->ends;
    int *arc_u = cs->arc_u, *arc_v = cs->arc_v, *arc_key = cs->arc_key;
    int64_t *arc_lb = cs->arc_lb, *arc_ub = cs->arc_ub;
    int *crit = cs->crit;
    int narcs = 0, ncrit = 0;

    /* Critical sub-DAG with bounds; node in(x) = 2x, out(x) = 2x + 1. */
    for (int x = 0; x < n; x++) {
        long ef = es[x] + d[x];
        if (es[x] != lf[x] - d[x])
            continue;
        crit[ncrit++] = x;
        const op_spec *sp = &specs[spec_of[x]];
        size_t i = (size_t)(d[x] - sp->min_q);
        int64_t lb = sp->lb[i], ub = sp->ub[i];
        arc_u[narcs] = 2 * x;
        arc_v[narcs] = 2 * x + 1;
        arc_lb[narcs] = lb;
        arc_ub[narcs] = ub > lb ? ub : lb;
        arc_key[narcs] = x;
        narcs++;
        for (int j = succ_off[x]; j < succ_off[x + 1]; j++) {
            int y = succ[j];
            long l = lag && stage[x] != stage[y] ? lag : 0;
            /* written in any case, kept when critical (no branch) */
            arc_u[narcs] = 2 * x + 1;
            arc_v[narcs] = 2 * y;
            arc_lb[narcs] = 0;
            arc_ub[narcs] = inf;
            arc_key[narcs] = n + j;
            narcs += ef + l == lf[y] - d[y];
        }
    }
    /* Dummy source/sink arcs to every critical source/sink instruction (one
     * each for 1F1B; zero-bubble schedules end every rank with a W). */
    for (int c = 0; c < ncrit; c++) {
        int x = crit[c];
        if (!ends[x])
            continue;
        if (ends[x] & ERG__NO_PRED) {
            arc_u[narcs] = SRC;
            arc_v[narcs] = 2 * x;
            arc_lb[narcs] = 0;
            arc_ub[narcs] = inf;
            arc_key[narcs] = n + E + x;
            narcs++;
        }
        if ((ends[x] & ERG__NO_SUCC) && es[x] + d[x] == cs->T) {
            arc_u[narcs] = 2 * x + 1;
            arc_v[narcs] = SNK;
            arc_lb[narcs] = 0;
            arc_ub[narcs] = inf;
            arc_key[narcs] = n + E + n + x;
            narcs++;
        }
    }
    cs->narcs = narcs;
    cs->ncrit = ncrit;
    if (erg__crash_solve_cut(cs, CUT_WARM)) {
        cs->warm_ok++;
    } else {
        cs->warm_fail++;
        if (!erg__crash_solve_cut(cs, CUT_COLD) && !erg__crash_solve_cut(cs, CUT_TWO_PHASE))
            return 0;
    }
    /* Remember this flow (with lower bounds) for the next warm start, and
     * see whether the cut crosses an arc of infinite cost forward: a
     * critical dependency out(x) -> in(y), or a source/sink dummy. Then
     * there is no finite-cost cut and the frontier ends. */
    const unsigned char *reach = cs->reach;
    const int64_t *res = cs->flow.res;
    int64_t *prev_flow = cs->prev_flow;
    int infinite = 0;
    for (int k = 0; k < narcs; k++) {
        int key = arc_key[k], u = arc_u[k], v = arc_v[k];
        prev_flow[key] = arc_lb[k] + res[2 * k + 1];
        infinite |= (key >= n) & reach[u] & ((v == SNK) | (reach[v] ^ 1));
    }
    if (infinite)
        return 0;
    int ns = 0, nl = 0;
    int *shorten = cs->shorten, *lengthen = cs->lengthen;
    for (int c = 0; c < ncrit; c++) {
        int x = crit[c];
        int rin = reach[2 * x], rout = reach[2 * x + 1];
        shorten[ns] = x;
        ns += rin & (rout ^ 1);
        lengthen[nl] = x;
        nl += (rin ^ 1) & rout;
    }
    if (ns == 0)
        return 0;
    return erg__crash_apply(cs, ns, nl, cost_change);
}

int erg__crash_apply(crash_state *cs, int ns, int nl, double *cost_change)
{
    int *d = cs->d;
    const int *spec_of = cs->spec_of;
    const op_spec *specs = cs->specs;
    double cc = 0;
    for (int k = 0; k < ns; k++) {
        int x = cs->shorten[k];
        const op_spec *sp = &specs[spec_of[x]];
        if (d[x] <= sp->min_q)
            return 0;
        cc += fabs(spec_cost(sp, d[x] - 1) - spec_cost(sp, d[x]));
    }
    for (int k = 0; k < nl; k++) {
        int x = cs->lengthen[k];
        const op_spec *sp = &specs[spec_of[x]];
        if (d[x] >= sp->max_q)
            return 0;
        cc -= fabs(spec_cost(sp, d[x]) - spec_cost(sp, d[x] + 1));
    }
    if (!isfinite(cc) || fabs(cc) < ERG__PD_TOL)
        return 0;
    for (int k = 0; k < ns; k++) {
        int x = cs->shorten[k];
        d[x]--;
        cs->cval[x] = spec_cost(&specs[spec_of[x]], d[x]);
    }
    for (int k = 0; k < nl; k++) {
        int x = cs->lengthen[k];
        d[x]++;
        cs->cval[x] = spec_cost(&specs[spec_of[x]], d[x]);
    }
    *cost_change = cc;
    cs->nshorten = ns;
    cs->nlengthen = nl;
    return 1;
}

static void free_state(crash_state *cs, int nspecs)
{
    if (cs->specs)
        for (int i = 0; i < nspecs; i++)
            free_spec(&cs->specs[i]);
    erg__free(cs->specs);
    erg__free(cs->spec_of);
    erg__free(cs->d);
    erg__free(cs->es);
    erg__free(cs->lf);
    erg__free(cs->crit);
    erg__free(cs->ends);
    erg__free(cs->cval);
    erg__free(cs->im);
    erg__free(cs->arc_u);
    erg__free(cs->arc_v);
    erg__free(cs->arc_key);
    erg__free(cs->arc_lb);
    erg__free(cs->arc_ub);
    erg__free(cs->prev_flow);
    erg__free(cs->reach);
    erg__free(cs->shorten);
    erg__free(cs->lengthen);
    erg__flow_free(&cs->flow);
    erg__crash_incr_free(cs);
}

/* The full pass per plan instead of the incremental one: -1 = ERGON_PERSEUS_FULL_PASS decides. */
static int full_pass = -1;

void erg__perseus_set_full_pass(int on)
{
    full_pass = on;
}

static bool use_full_pass(void)
{
    if (full_pass >= 0)
        return full_pass;
    const char *e = getenv("ERGON_PERSEUS_FULL_PASS");
    return e && *e && strcmp(e, "0") != 0;
}

erg_status erg_plan_perseus(const erg_profile *prof, int S, int M, const erg_perseus_opts *opts,
                            erg_frontier **out, erg_error *err)
{
    *out = NULL;
    erg_perseus_opts o;
    if (opts)
        o = *opts;
    else
        erg_perseus_opts_init(&o);
    if (!prof)
        return erg_error_set(err, ERG_EINVAL, "no profile");
    if (!(o.unit_s > 0) || !isfinite(o.unit_s))
        return erg_error_set(err, ERG_EINVAL, "the time unit must be positive, got %g s", o.unit_s);
    if (!(o.blocking_power_w >= 0) || !isfinite(o.blocking_power_w))
        return erg_error_set(err, ERG_EINVAL,
                             "the blocking power must be a non-negative number of watts, got %g",
                             o.blocking_power_w);
    if (!(o.noise_factor > 0 && o.noise_factor <= 1))
        return erg_error_set(err, ERG_EINVAL, "the noise factor must be in (0, 1], got %g",
                             o.noise_factor);
    if (!(o.transfer_time_s >= 0) || !isfinite(o.transfer_time_s) ||
        o.transfer_time_s / o.unit_s > 1e9)
        return erg_error_set(err, ERG_EINVAL,
                             "the transfer time must be a non-negative number of seconds, got %g",
                             o.transfer_time_s);
    if (S < 1 || M < 1)
        return erg_error_set(err, ERG_EINVAL, "need at least 1 stage and 1 microbatch (S=%d, M=%d)",
                             S, M);
    if (erg_profile_num_stages(prof) < S)
        return erg_error_set(err, ERG_EINVAL, "the profile has %d stages but S=%d was asked for",
                             erg_profile_num_stages(prof), S);
    erg_dag *dag;
    erg_status st = erg_dag_new(&o.schedule, S, M, &dag, err);
    if (st)
        return st;
    crash_state cs;
    memset(&cs, 0, sizeof(cs));
    int n = erg_dag_num_instrs(dag), nspecs = 0;
    cs.dag = dag;
    erg_dag_get_arrays(dag, &cs.g);
    cs.n = n;
    cs.lag = lround((o.transfer_time_s > 0 ? o.transfer_time_s : o.schedule.p2p_time_s) / o.unit_s);
    cs.specs = erg__calloc((size_t)n, sizeof(op_spec));
    cs.spec_of = erg__malloc(sizeof(int) * (size_t)n);
    cs.d = erg__malloc(sizeof(int) * (size_t)n);
    cs.es = erg__malloc(sizeof(long) * (size_t)n);
    cs.lf = erg__malloc(sizeof(long) * (size_t)n);
    cs.crit = erg__malloc(sizeof(int) * (size_t)n);
    cs.ends = erg__malloc((size_t)n);
    cs.cval = erg__malloc(sizeof(double) * (size_t)n);
    cs.inf = bound_units(ERG__PD_INF);
    int max_arcs = n + cs.g.num_edges + 2 * n + 2;
    cs.im = erg__malloc(sizeof(int64_t) * (size_t)(2 * n + 4));
    cs.arc_u = erg__malloc(sizeof(int) * (size_t)max_arcs);
    cs.arc_v = erg__malloc(sizeof(int) * (size_t)max_arcs);
    cs.arc_key = erg__malloc(sizeof(int) * (size_t)max_arcs);
    cs.arc_lb = erg__malloc(sizeof(int64_t) * (size_t)max_arcs);
    cs.arc_ub = erg__malloc(sizeof(int64_t) * (size_t)max_arcs);
    cs.prev_flow = erg__calloc((size_t)max_arcs, sizeof(int64_t));
    cs.reach = erg__malloc((size_t)(2 * n + 4));
    cs.shorten = erg__malloc(sizeof(int) * (size_t)n);
    cs.lengthen = erg__malloc(sizeof(int) * (size_t)n);
    /* cost classes: key[5] per spec */
    int *keys = erg__malloc(sizeof(int) * 5 * (size_t)n);
    erg_frontier *fr = NULL;
    if (!cs.specs || !cs.spec_of || !cs.d || !cs.es || !cs.lf || !cs.crit || !cs.ends || !cs.cval ||
        !cs.im || !cs.arc_u || !cs.arc_v || !cs.arc_key || !cs.arc_lb || !cs.arc_ub ||
        !cs.prev_flow || !cs.reach || !cs.shorten || !cs.lengthen || !keys ||
        erg__flow_init(&cs.flow, 2 * n + 4, 2 * (n + cs.g.num_edges + 2 * n + 2 + 1 + 2 * n))) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    /* One spec per cost class: instructions of the same rank whose parts
     * read the same profile rows with the same kinds cost the same. For the
     * one-stage-per-rank F/B schedules these are the 2S (stage, kind) specs
     * of the reference planner, built from the profile rows in file order. */
    {
        int np = erg_profile_num_stages(prof);
        int NS = erg_dag_num_pipeline_stages(dag);
        int per_stage = np >= NS && NS > erg_dag_num_stages(dag);
        erg_profile_point *pts = NULL;
        for (int x = 0; x < n && !st; x++) {
            erg_instr in = cs.g.instr[x];
            int r = cs.g.rank[x];
            int key[5] = {r, (int)in.kind, in.kind == ERG_OVERLAP_F_B ? (int)in.kind2 : -1,
                          per_stage ? in.stage : r,
                          in.kind == ERG_OVERLAP_F_B ? (per_stage ? in.stage2 : r) : -1};
            int found = -1;
            for (int k = 0; k < nspecs && found < 0; k++)
                if (!memcmp(keys + 5 * k, key, sizeof key))
                    found = k;
            if (found < 0) {
                /* clocks: the rows of the first part's kind, in file order */
                erg_instr_kind rk = in.kind == ERG_FORWARD || in.kind == ERG_OVERLAP_F_B
                                        ? ERG_FORWARD
                                        : ERG_BACKWARD;
                if ((in.kind == ERG_BACKWARD_INPUT || in.kind == ERG_BACKWARD_WEIGHT) &&
                    erg_profile_num_points(prof, key[3], in.kind) > 0)
                    rk = in.kind;
                size_t npts = erg_profile_num_points(prof, key[3], rk);
                const erg_profile_point *rows = erg_profile_points(prof, key[3], rk);
                erg__free(pts);
                pts = erg__calloc(npts ? npts : 1, sizeof(*pts));
                if (!pts) {
                    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                    break;
                }
                size_t m = 0;
                for (size_t i = 0; i < npts; i++) {
                    erg_error e2;
                    erg_status cst =
                        erg_instr_cost_point(prof, dag, x, rows[i].freq_mhz, &pts[m], &e2);
                    if (cst == ERG_OK)
                        m++;
                    else if (cst != ERG_ENOTFOUND) {
                        *err = e2;
                        st = cst;
                        break;
                    }
                }
                if (st)
                    break;
                int simple = erg_dag_num_chunks(dag) == 1 &&
                             (in.kind == ERG_FORWARD || in.kind == ERG_BACKWARD);
                if (o.fits && !simple) {
                    st = erg_error_set(err, ERG_EINVAL,
                                       "fitted coefficients (--fits) exist only for the one-stage-"
                                       "per-rank F/B schedules, not for %s",
                                       erg_schedule_name(o.schedule.kind));
                    break;
                }
                st = build_spec(pts, m, r, in.kind == ERG_OVERLAP_F_B ? ERG_FORWARD : in.kind,
                                simple ? 2 * r + (int)in.kind : -1, &o, cs.specs, nspecs,
                                &cs.specs[nspecs], err);
                memcpy(keys + 5 * nspecs, key, sizeof key);
                found = nspecs++;
            }
            cs.spec_of[x] = found;
        }
        erg__free(pts);
    }
    if (st)
        goto done;
    for (int x = 0; x < n; x++)
        cs.ends[x] = (unsigned char)((cs.g.pred_off[x] == cs.g.pred_off[x + 1] ? ERG__NO_PRED : 0) |
                                     (cs.g.succ_off[x] == cs.g.succ_off[x + 1] ? ERG__NO_SUCC : 0));
    /* Expected number of plans: makespan at all-min minus at all-max. */
    for (int x = 0; x < n; x++)
        cs.d[x] = cs.specs[cs.spec_of[x]].min_q;
    erg__crash_cpm(&cs);
    long t_min = cs.T;
    for (int x = 0; x < n; x++)
        cs.d[x] = cs.specs[cs.spec_of[x]].max_q;
    erg__crash_cpm(&cs);
    long t_max = cs.T;
    uint64_t expected = (uint64_t)(t_max - t_min);
    if (o.max_plans && expected > o.max_plans) {
        st = erg_error_set(err, ERG_EINVAL,
                           "about %llu plans at a time unit of %g s (the iteration spans %.6g "
                           "to %.6g s), more than the limit of %llu plans",
                           (unsigned long long)expected, o.unit_s, (double)t_min * o.unit_s,
                           (double)t_max * o.unit_s, (unsigned long long)o.max_plans);
        goto done;
    }
    if (t_max <= 0) {
        /* Every duration quantises to 0 units: plans of 0 s, no frontier. */
        double longest = 0;
        for (int k = 0; k < nspecs; k++)
            longest = fmax(longest, cs.specs[k].cand[0].time_s);
        st = erg_error_set(err, ERG_EINVAL,
                           "the time unit of %g s is longer than every instruction (the longest "
                           "takes %g s), so every plan would take 0 units; use a smaller "
                           "--unit-time",
                           o.unit_s, longest);
        goto done;
    }

    bool full = use_full_pass();
    if (!full && erg__crash_incr_init(&cs)) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    st = erg__frontier_new(S, M, &o.schedule, o.unit_s, o.blocking_power_w, &fr, err);
    if (st)
        goto done;
    int *freq = erg__malloc(sizeof(int) * (size_t)n);
    if (!freq) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    for (int x = 0; x < n; x++) {
        const op_spec *sp = &cs.specs[cs.spec_of[x]];
        freq[x] = sp->freq[cs.d[x] - sp->min_q];
    }
    st = erg__frontier_set_initial(fr, freq, err);
    /* The initial (slowest, least-energy) state: plan 0 when no crashing step
     * is possible at all (a flat profile, a unit coarser than every clock
     * step), so the frontier is never empty. */
    erg_frontier_point slowest = {.quant_time = cs.T, .time_s = (double)cs.T * o.unit_s};
    for (int x = 0; x < n; x++) {
        cs.cval[x] = spec_cost(&cs.specs[cs.spec_of[x]], cs.d[x]);
        slowest.cost_j += cs.cval[x];
    }
    slowest.energy_j = slowest.cost_j + ((S * slowest.time_s) * o.blocking_power_w);
    /* csum[x]: the sum of cval[0..x] in that order (the plan's cost is csum[n - 1]); a step
     * changes cval only at the instructions it moved, so the sums are redone from the first
     * of them on, the same additions in the same order as a pass over all of them */
    double *csum = erg__malloc(sizeof(double) * (size_t)n);
    if (!csum)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    double sum0 = 0;
    for (int x = 0; x < n && csum; x++) {
        sum0 += cs.cval[x];
        csum[x] = sum0;
    }
    for (uint64_t iter = 0; !st; iter++) {
        double cc = 0;
        if (full) {
            if (!crash_step(&cs, &cc))
                break;
            erg__crash_cpm(&cs);
        } else {
            int r = erg__crash_incr_step(&cs, &cc); /* CPM included */
            if (r < 0)
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            if (r <= 0)
                break;
        }
        /* The same sum in the same order as over spec_cost(x, d[x]): the
         * cached costs change only for the instructions the step moved (both lists ascend). */
        int xm = n;
        if (cs.nshorten)
            xm = cs.shorten[0];
        if (cs.nlengthen && cs.lengthen[0] < xm)
            xm = cs.lengthen[0];
        double cost = xm > 0 ? csum[xm - 1] : 0;
        for (int x = xm; x < n; x++) {
            cost += cs.cval[x];
            csum[x] = cost;
        }
        erg_frontier_point pt;
        pt.quant_time = cs.T;
        pt.time_s = (double)cs.T * o.unit_s;
        pt.cost_j = cost;
        pt.cost_change_j = cc;
        pt.energy_j = cost + ((S * pt.time_s) * o.blocking_power_w);
        st = erg__frontier_begin_plan(fr, &pt, err);
        /* Only the shortened and lengthened instructions can change clock;
         * merge their two ascending lists so changes are stored by
         * instruction, as a scan over all of them would. */
        for (int a = 0, b = 0; (a < cs.nshorten || b < cs.nlengthen) && !st;) {
            int x;
            if (b >= cs.nlengthen || (a < cs.nshorten && cs.shorten[a] < cs.lengthen[b]))
                x = cs.shorten[a++];
            else
                x = cs.lengthen[b++];
            const op_spec *sp = &cs.specs[cs.spec_of[x]];
            int fq = sp->freq[cs.d[x] - sp->min_q];
            if (fq != freq[x]) {
                freq[x] = fq;
                st = erg__frontier_add_change(fr, x, fq, err);
            }
        }
        if (!st)
            st = erg__frontier_end_plan(fr, freq, err);
        if (!st && o.progress && o.progress(o.progress_user, iter + 1, expected))
            st = erg_error_set(err, ERG_ECANCELED, "canceled after %llu plans",
                               (unsigned long long)(iter + 1));
    }
    if (!st && erg_frontier_size(fr) == 0) {
        st = erg__frontier_begin_plan(fr, &slowest, err);
        if (!st)
            st = erg__frontier_end_plan(fr, freq, err);
    }
    erg__free(freq);
    erg__free(csum);
    if (!st && o.progress)
        o.progress(o.progress_user, erg_frontier_size(fr), erg_frontier_size(fr));
done:
    erg__free(keys);
    free_state(&cs, nspecs);
    erg_dag_free(dag);
    if (st) {
        erg_frontier_free(fr);
        return st;
    }
    *out = fr;
    return ERG_OK;
}

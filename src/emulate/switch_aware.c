/* switch_aware.c: a frontier that is honest at a clock-switch latency L.
 *
 * The Perseus planner (src/planner/perseus.c) knows nothing of clock changes:
 * its plans change a rank's clock wherever the crashing step found a cheaper
 * duration, often at every instruction of the 1F1B steady state. This pass
 * takes its frontier and, for every plan, makes a few variants that do not
 * change the clock where the change buys little ("merging" an instruction onto
 * its predecessor's clock on the same rank):
 *
 *  - down-merge(d): an instruction whose planned clock is slower than the
 *    clock the rank is already at keeps that faster clock when its profiled
 *    time there is within d of its planned time (the switch would save little
 *    energy, and the way back up costs time);
 *  - up-merge(d): an instruction whose planned clock is faster keeps the
 *    slower clock when that costs it at most d of its planned time;
 *  - repair(r): r rounds of: emulate at L, and give every critical instruction
 *    that starts with an up-switch (its first L at a clock where it is slower)
 *    its clock one instruction earlier, on its rank's predecessor, so the
 *    request lands before it starts. This is the switch cost put where it
 *    matters, on the critical path; it recovers plans near the all-max time.
 *
 * Every variant (and the plan itself) is evaluated with the emulator's switch
 * model at L (emulate_ex.c: asynchronous requests that land L later) and the
 * frontier keeps the Pareto-optimal ones, time and energy being those
 * emulated values. So a deadline chosen on it is met at L, by construction;
 * the variants only decide how much energy is left on the table. */
#include "core/internal.h"
#include "emulate/emulate_internal.h"
#include "ergon/emulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the variants: 0 = as planned, then down-merges, then up-merges */
static const double DOWN[] = {0.01, 0.02, 0.04, 0.08, 0.16};
static const double UP[] = {0.01, 0.02, 0.04};
#define NVAR (1 + (int)ERG__ARRAY_LEN(DOWN) + (int)ERG__ARRAY_LEN(UP))
#define NREPAIR 8 /* repair rounds: variants NVAR .. NVAR + NREPAIR - 1 */

#define ERG__SWITCH_AWARE_PLANS 4096

typedef struct table {
    int nclk;
    int *clk;      /* sorted distinct clocks of the profile */
    double *t, *e; /* [id * nclk + c], NAN where not profiled */
} table;

static int clk_index(const table *tb, int f)
{
    int lo = 0, hi = tb->nclk - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (tb->clk[mid] == f)
            return mid;
        if (tb->clk[mid] < f)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static bool lookup_table(void *user, int id, int f, double *t, double *e)
{
    const table *tb = user;
    int c = clk_index(tb, f);
    if (c < 0 || isnan(tb->t[(size_t)id * tb->nclk + c]))
        return false;
    *t = tb->t[(size_t)id * tb->nclk + c];
    *e = tb->e[(size_t)id * tb->nclk + c];
    return true;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static erg_status table_build(const erg_profile *prof, const erg_dag *dag, table *tb,
                              erg_error *err)
{
    memset(tb, 0, sizeof *tb);
    size_t cap = 0;
    for (int s = 0; s < erg_profile_num_stages(prof); s++)
        for (int k = 0; k < ERG_NUM_INSTR_KINDS; k++)
            cap += erg_profile_num_points(prof, s, (erg_instr_kind)k);
    tb->clk = erg__malloc(sizeof(int) * (cap ? cap : 1));
    if (!tb->clk)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int s = 0; s < erg_profile_num_stages(prof); s++)
        for (int k = 0; k < ERG_NUM_INSTR_KINDS; k++) {
            size_t np = erg_profile_num_points(prof, s, (erg_instr_kind)k);
            const erg_profile_point *p = erg_profile_points(prof, s, (erg_instr_kind)k);
            for (size_t i = 0; i < np; i++)
                tb->clk[tb->nclk++] = p[i].freq_mhz;
        }
    qsort(tb->clk, (size_t)tb->nclk, sizeof(int), cmp_int);
    int m = 0;
    for (int i = 0; i < tb->nclk; i++)
        if (!m || tb->clk[m - 1] != tb->clk[i])
            tb->clk[m++] = tb->clk[i];
    tb->nclk = m;
    size_t n = (size_t)erg_dag_num_instrs(dag);
    tb->t = erg__malloc(sizeof(double) * n * (size_t)(m ? m : 1));
    tb->e = erg__malloc(sizeof(double) * n * (size_t)(m ? m : 1));
    if (!tb->t || !tb->e)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (size_t id = 0; id < n; id++)
        for (int c = 0; c < m; c++) {
            erg_profile_point pt;
            erg_error e2;
            bool ok = !erg_instr_cost_point(prof, dag, (int)id, tb->clk[c], &pt, &e2);
            tb->t[id * (size_t)m + c] = ok ? pt.time_s : NAN;
            tb->e[id * (size_t)m + c] = ok ? pt.energy_j : NAN;
        }
    return ERG_OK;
}

static void table_free(table *tb)
{
    erg__free(tb->clk);
    erg__free(tb->t);
    erg__free(tb->e);
}

/* Variant v of a plan into `out`: `ci` are the plan's clock indices into the table (id order),
 * `oi` receives the variant's. */
static void make_variant(const erg_dag *dag, const table *tb, int v, const int *ci, int *oi)
{
    int S = erg_dag_num_stages(dag), n = erg_dag_num_instrs(dag), C = tb->nclk;
    memcpy(oi, ci, sizeof(int) * (size_t)n);
    if (v == 0)
        return;
    int nd = (int)ERG__ARRAY_LEN(DOWN);
    bool down = v <= nd;
    double d = down ? DOWN[v - 1] : UP[v - 1 - nd];
    for (int s = 0; s < S; s++) {
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        if (!len)
            continue;
        int c = ci[off + len - 1]; /* the clock the rank is at */
        for (int k = 0; k < len; k++) {
            int id = off + k, f = ci[id];
            if (f != c) {
                double tf = tb->t[(size_t)id * C + f], tc = tb->t[(size_t)id * C + c];
                bool keep =
                    down ? (tc < tf && tf <= (1 + d) * tc) : (tc > tf && tc <= (1 + d) * tf);
                if (keep) /* NAN (not profiled) compares false: no merge */
                    f = c;
            }
            oi[id] = f;
            c = f;
        }
    }
}

/* The asynchronous-switch pass (erg__async_pass) over the plan whose instruction i runs at
 * the table's clock oi[i]: fills var/tp/ep with its clocks, times and energies first. */
static void pass_variant(const erg_dag *dag, const table *tb, const int *oi, double L, double x,
                         int *var, double *tp, double *ep, double *dur, double *es, int *cur,
                         int *pend, double *pend_t, erg__async_result *r)
{
    int n = erg_dag_num_instrs(dag), C = tb->nclk;
    for (int i = 0; i < n; i++) {
        var[i] = tb->clk[oi[i]];
        tp[i] = tb->t[(size_t)i * C + oi[i]];
        ep[i] = tb->e[(size_t)i * C + oi[i]];
    }
    erg__async_pass(dag, var, tp, ep, lookup_table, (void *)tb, L, x, dur, es, cur, pend, pend_t,
                    r);
}

/* Repair rounds: emulate the plan (clock indices `oi`, id order) at L, find the critical
 * instructions that start with an up-switch (their rank's previous instruction ran at a clock
 * where they are slower: they spend their first L at it), and give that previous instruction
 * their clock, so the request is made one instruction earlier and lands before them. `rounds`
 * rounds; returns how many changed the plan. Scratch: sc (doubles, 3 n + S), si (ints, 2 S). */
static int repair(const erg_dag *dag, const table *tb, double L, double x, int rounds, int *oi,
                  int *var, double *sc, int *si)
{
    int S = erg_dag_num_stages(dag), n = erg_dag_num_instrs(dag), C = tb->nclk;
    double *tp = sc, *ep = sc + n, *dur = sc + 2 * n, *es = sc + 3 * n, *lf = sc + 4 * n,
           *pend_t = sc + 5 * n;
    const int *topo = erg_dag_topo_order(dag);
    int done = 0;
    for (int r = 0; r < rounds; r++) {
        erg__async_result res;
        pass_variant(dag, tb, oi, L, x, var, tp, ep, dur, es, si, si + S, pend_t, &res);
        double T = res.time_s, tol = 1e-9 * T;
        for (int k = n - 1; k >= 0; k--) {
            int u = topo[k], su;
            erg_dag_instr(dag, u, &su);
            double f = T;
            const int *succ;
            int ns = erg_dag_successors(dag, u, &succ);
            for (int j = 0; j < ns; j++) {
                int v = succ[j], sv;
                erg_dag_instr(dag, v, &sv);
                double t = lf[v] - dur[v] - (sv == su ? 0 : x);
                if (t < f)
                    f = t;
            }
            lf[u] = f;
        }
        int changed = 0;
        for (int s = 0; s < S; s++) {
            int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
            for (int k = 0; k < len; k++) {
                int u = off + k, p = off + (k ? k - 1 : len - 1);
                if (oi[u] == oi[p] || es[u] + dur[u] < lf[u] - tol)
                    continue; /* no switch, or not critical */
                double tf = tb->t[(size_t)u * C + oi[u]], tc = tb->t[(size_t)u * C + oi[p]];
                if (!(tc > tf))
                    continue; /* a down-switch costs no time */
                double tpn = tb->t[(size_t)p * C + oi[u]];
                if (isnan(tpn))
                    continue;
                oi[p] = oi[u];
                changed = 1;
            }
        }
        if (!changed)
            break;
        done++;
    }
    return done;
}

typedef struct cand {
    double time_s, energy_j;
    size_t plan;
    int variant;
} cand;

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->time_s != y->time_s)
        return x->time_s < y->time_s ? -1 : 1;
    if (x->energy_j != y->energy_j)
        return x->energy_j < y->energy_j ? -1 : 1;
    if (x->plan != y->plan)
        return x->plan < y->plan ? -1 : 1;
    return (x->variant > y->variant) - (x->variant < y->variant);
}

/* plan k's clocks in id order; `seq`: freq holds plan k-1's (a sequential walk) */
static erg_status plan_freqs(const erg_frontier *f, size_t k, bool seq, int *freq, erg_error *err)
{
    return erg_frontier_plan_clocks(f, k, seq, freq, err);
}

erg_status erg_frontier_switch_aware(const erg_profile *prof, const erg_frontier *in,
                                     const erg_emulate_opts *opts, double unit_s,
                                     erg_progress_fn progress, void *progress_user,
                                     erg_frontier **out, erg_switch_aware_stats *stats,
                                     erg_error *err)
{
    if (!prof || !in || !opts || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_switch_aware: NULL argument");
    *out = NULL;
    size_t np = erg_frontier_size(in);
    if (np == 0)
        return erg_error_set(err, ERG_EINVAL, "the frontier is empty");
    if (!(opts->switch_latency_s >= 0) || !isfinite(opts->switch_latency_s) ||
        !(opts->blocking_power_w >= 0) || !isfinite(opts->blocking_power_w))
        return erg_error_set(err, ERG_EINVAL,
                             "switch-aware planning: invalid switch latency %g s or blocking "
                             "power %g W",
                             opts->switch_latency_s, opts->blocking_power_w);
    erg_plan *p0 = NULL;
    erg_dag *dag = NULL;
    erg_status st = erg_frontier_plan(in, 0, &p0, err);
    if (st)
        return st;
    erg_schedule sched = erg_plan_schedule(p0);
    int S = erg_plan_num_stages(p0), M = erg_plan_num_microbatches(p0);
    st = erg_dag_new(&sched, S, M, &dag, err);
    if (st) {
        erg_plan_free(p0);
        return st;
    }
    int n = erg_dag_num_instrs(dag);
    table tb;
    cand *cands = NULL;
    erg_frontier *fr = NULL;
    int *base = erg__malloc(sizeof(int) * (size_t)n * 5 + sizeof(int) * 2 * (size_t)S);
    double *dbuf = erg__malloc(sizeof(double) * ((size_t)n * 4 + (size_t)S));
    double *rsc = erg__malloc(sizeof(double) * ((size_t)n * 5 + (size_t)S));
    st = table_build(prof, dag, &tb, err);
    if (!st && (!base || !dbuf || !rsc))
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    size_t ncand = (ERG__SWITCH_AWARE_PLANS + 1) * (NVAR + NREPAIR);
    if (!st && !(cands = erg__malloc(sizeof(cand) * ncand)))
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (st)
        goto done;
    int *var = base + n, *ci = base + 3 * n, *vi = base + 4 * n, *cur = base + 5 * n,
        *pend = cur + S;
    double *tp = dbuf, *ep = dbuf + n, *dur = dbuf + 2 * n, *es = dbuf + 3 * n,
           *pend_t = dbuf + 4 * n;
    double L = opts->switch_latency_s, x = erg_emulate_opts_transfer_s(opts);
    if (!(x > 0))
        x = sched.p2p_time_s;
    double p_w = opts->blocking_power_w;
    size_t nc = 0;
    /* Plans one time unit apart differ by a few clocks: past ERG__SWITCH_AWARE_PLANS plans,
     * every stride-th one (and the last) is enough to trace the frontier. */
    size_t stride = (np + ERG__SWITCH_AWARE_PLANS - 1) / ERG__SWITCH_AWARE_PLANS;
    for (size_t k = 0; k < np && !st; k++) {
        if ((st = plan_freqs(in, k, true, base, err)))
            break;
        if (k % stride && k + 1 != np)
            continue;
        for (int i = 0; i < n && !st; i++) {
            ci[i] = clk_index(&tb, base[i]);
            if (ci[i] < 0 || isnan(tb.t[(size_t)i * tb.nclk + ci[i]]))
                st = erg_error_set(err, ERG_ENOTFOUND,
                                   "plan %zu runs instruction %d at %d MHz, which the profile "
                                   "does not have",
                                   k, i, base[i]);
        }
        for (int v = 0; v < NVAR && !st; v++) {
            make_variant(dag, &tb, v, ci, vi);
            if (v && !memcmp(vi, ci, sizeof(int) * (size_t)n))
                continue; /* the plan itself: nothing new */
            erg__async_result r;
            pass_variant(dag, &tb, vi, L, x, var, tp, ep, dur, es, cur, pend, pend_t, &r);
            cands[nc++] = (cand){r.time_s, r.compute_energy_j + p_w * r.idle_s, k, v};
        }
        /* repair rounds from the plan itself, each one a candidate */
        memcpy(vi, ci, sizeof(int) * (size_t)n);
        for (int rr = 0; rr < NREPAIR && !st; rr++) {
            if (!repair(dag, &tb, L, x, 1, vi, var, rsc, cur))
                break;
            erg__async_result r;
            pass_variant(dag, &tb, vi, L, x, var, tp, ep, dur, es, cur, pend, pend_t, &r);
            cands[nc++] = (cand){r.time_s, r.compute_energy_j + p_w * r.idle_s, k, NVAR + rr};
        }
        if (!st && progress && progress(progress_user, k + 1, np))
            st = erg_error_set(err, ERG_ECANCELED, "canceled after %zu plans", k + 1);
    }
    if (st)
        goto done;
    /* Pareto: fastest first, keep a point only when it uses less energy than
     * every faster one; then slowest first, as frontiers are stored. */
    qsort(cands, nc, sizeof(cand), cmp_cand);
    size_t nk = 0;
    double emin = INFINITY;
    for (size_t i = 0; i < nc; i++)
        if (cands[i].energy_j < emin) {
            emin = cands[i].energy_j;
            cands[nk++] = cands[i];
        }
    if ((st = erg_frontier_new(S, M, &sched, unit_s, p_w, &fr, err)))
        goto done;
    for (size_t j = 0; j < nk && !st; j++) {
        const cand *c = &cands[nk - 1 - j];
        if ((st = plan_freqs(in, c->plan, false, base, err)))
            break;
        for (int i = 0; i < n; i++)
            ci[i] = clk_index(&tb, base[i]);
        if (c->variant < NVAR) {
            make_variant(dag, &tb, c->variant, ci, vi);
        } else {
            memcpy(vi, ci, sizeof(int) * (size_t)n);
            repair(dag, &tb, L, x, c->variant - NVAR + 1, vi, var, rsc, cur);
        }
        for (int i = 0; i < n; i++)
            var[i] = tb.clk[vi[i]];
        erg_frontier_point pt;
        pt.time_s = c->time_s;
        pt.energy_j = c->energy_j;
        pt.cost_j = c->energy_j - (S * c->time_s) * p_w;
        pt.cost_change_j = 0;
        pt.quant_time = (long)ceil(c->time_s / unit_s - 1e-9);
        if (j) {
            erg_frontier_point prev;
            erg_frontier_get(fr, j - 1, &prev, NULL);
            pt.cost_change_j = pt.cost_j - prev.cost_j;
        }
        st = erg_frontier_push(fr, &pt, var, err);
    }
    if (!st && stats) {
        stats->plans_merged = 0;
        for (size_t j = 0; j < nk; j++)
            stats->plans_merged += cands[j].variant != 0;
        stats->plans_in = np;
        stats->plans_evaluated = (np + stride - 1) / stride + ((np - 1) % stride != 0);
        stats->candidates = nc;
        stats->plans_out = nk;
    }
done:
    erg__free(cands);
    table_free(&tb);
    erg__free(base);
    erg__free(dbuf);
    erg__free(rsc);
    erg_dag_free(dag);
    erg_plan_free(p0);
    if (st) {
        erg_frontier_free(fr);
        return st;
    }
    *out = fr;
    return ERG_OK;
}

/* envpipe_perseus.c: Perseus's emulation of EnvPipe, `ergon plan envpipe --variant
 * perseus-emulation` (docs/envpipe.md): the slowest Pareto clocks on quantised times, +15 MHz
 * steps on one critical path, the published comparisons' rules. */
#include "planner/envpipe_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Perseus's emulation of EnvPipe (docs/envpipe.md, --variant perseus-emulation) ----
 *
 * Every instruction starts at the slowest Pareto-optimal clock of its
 * (stage, kind) on quantised times; the outer envelope (last stage, F0 and
 * B_{M-1} of every stage) is pinned at the profile's max clock. Each pass
 * runs CPM on quantised durations, takes ONE critical path (from F(0,0), at
 * every step the critical successor discovered first by a BFS from the
 * source that visits same-stage successors before cross-stage ones), and
 * raises every path instruction at the path's lowest clock by 15 MHz. It
 * stops when the path lies in the envelope, or (unlike the reference, which
 * spins to 10,000 passes) as soon as a pass changes nothing: the final plan is
 * the same. A +15 MHz clock missing from the profile is an error (the
 * reference crashes with a KeyError). */

typedef struct cand {
    long q;
    double t, e;
    int f;
} cand;

static int cmp_cand_t_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return (x->t < y->t) - (x->t > y->t);
}

/* The slowest Pareto candidate's clock of (s, kind) (the frontier planner's candidates with
 * the hard filter): strict-dominance filter on raw (t, e), per quantised time
 * the option with the largest energy (ties: larger t first), then max q. */
static erg_status slowest_pareto(const erg_profile *p, int s, erg_instr_kind kind, double unit,
                                 int *freq, erg_error *err)
{
    size_t n = erg_profile_num_points(p, s, kind);
    const erg_profile_point *pt = erg_profile_points(p, s, kind);
    cand *v = erg__calloc(n ? n : 1, sizeof *v);
    if (!v)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool dom = false;
        for (size_t j = 0; j < n && !dom; j++)
            dom = pt[j].time_s < pt[i].time_s && pt[j].energy_j < pt[i].energy_j;
        if (dom)
            continue;
        /* A long holds the quantised time only below 2^53 units: past that the
         * cast is undefined (a 1e308 s time) and the units mean nothing. */
        double q = erg__floordiv_py(pt[i].time_s, unit);
        if (!(q >= 0 && q <= 9007199254740992.0)) {
            erg__free(v);
            return erg_error_set(err, ERG_EINVAL,
                                 "stage %d %s at %d MHz: time %g s is %g units of %g s, more "
                                 "than the planner can count (2^53)",
                                 s, erg_instr_kind_name(kind), pt[i].freq_mhz, pt[i].time_s, q,
                                 unit);
        }
        v[m++] = (cand){(long)q, pt[i].time_s, pt[i].energy_j, pt[i].freq_mhz};
    }
    /* order by t descending, then a stable sort by e descending (insertion) */
    for (size_t i = 1; i < m; i++) { /* stable: t descending */
        cand x = v[i];
        size_t j = i;
        while (j > 0 && cmp_cand_t_desc(&v[j - 1], &x) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    for (size_t i = 1; i < m; i++) {
        cand x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1].e < x.e) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    /* first seen per q wins; keep the one with the largest q */
    long bestq = -1;
    int bestf = 0;
    for (size_t i = 0; i < m; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = v[j].q == v[i].q;
        if (!seen && v[i].q > bestq) {
            bestq = v[i].q;
            bestf = v[i].f;
        }
    }
    erg__free(v);
    if (bestq < 0)
        return erg_error_set(err, ERG_EINVAL, "stage %d has no %s points", s,
                             erg_instr_kind_name(kind));
    *freq = bestf;
    return ERG_OK;
}

erg_status erg__envpipe_perseus_emulation(const erg_profile *profile, int S, int M,
                                          const erg_envpipe_opts *o, erg_plan **out,
                                          erg_envpipe_info *info, erg_error *err)
{
    if (!(o->unit_s > 0) || !isfinite(o->unit_s))
        return erg_error_set(err, ERG_EINVAL, "the time unit must be positive (got %g s)",
                             o->unit_s);
    int step = o->reconfig_step_mhz > 0 ? o->reconfig_step_mhz : 15;
    erg__ctab *c = NULL;
    erg_dag *dag = NULL;
    erg_plan *plan = NULL;
    int n = 2 * S * M;
    double *qd = NULL, *es = NULL, *lf = NULL;
    int *disc = NULL, *queue = NULL, *path = NULL;
    erg_schedule sched = {.kind = o->schedule};
    sched.max_inflight = o->max_inflight;
    erg_status st = erg__ctab_new(profile, S, &c, err);
    if (!st)
        st = erg_dag_new(&sched, S, M, &dag, err);
    if (!st)
        st = erg_plan_new(&sched, S, M, &plan, err);
    if (st)
        goto done;
    qd = erg__calloc((size_t)n * 3, sizeof(double));
    disc = erg__calloc((size_t)n * 3, sizeof(int));
    if (!qd || !disc) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    es = qd + n;
    lf = es + n;
    queue = disc + n;
    path = queue + n;
    /* the max clock of the profile (over the stages used) */
    int fmax = 0;
    for (int s = 0; s < S; s++)
        for (int k = 0; k < 2; k++) {
            const erg__ckind *ck = &c->k[s * 2 + k];
            if (ck->freq[ck->n - 1] > fmax)
                fmax = ck->freq[ck->n - 1];
        }
    int start[ERG_SCHED_MAX_STAGES][2];
    for (int s = 0; s < S && !st; s++)
        for (int k = 0; k < 2 && !st; k++) {
            st = slowest_pareto(profile, s, (erg_instr_kind)k, o->unit_s, &start[s][k], err);
            if (!st && erg__ctab_find(c, s, (erg_instr_kind)k, fmax) < 0)
                st = erg_error_set(err, ERG_ENOTFOUND,
                                   "stage %d has no %s point at the max clock %d MHz, where the "
                                   "outer envelope runs",
                                   s, erg_instr_kind_name((erg_instr_kind)k), fmax);
        }
    if (st)
        goto done;
    for (int id = 0; id < n; id++) {
        int s;
        erg_instr in = erg_dag_instr(dag, id, &s);
        erg_plan_stage_freqs(plan, s)[id % (2 * M)] =
            erg__envpipe_in_envelope(S, M, s, in) ? fmax : start[s][in.kind];
    }
    /* BFS discovery order from the source (F(0,0) is its only successor). */
    for (int i = 0; i < n; i++)
        disc[i] = -1;
    int head = 0, tail = 0, next = 0;
    disc[0] = next++;
    queue[tail++] = 0;
    while (head < tail) {
        int u = queue[head++];
        const int *sc;
        int ns = erg_dag_successors(dag, u, &sc);
        for (int j = 0; j < ns; j++)
            if (disc[sc[j]] < 0) {
                disc[sc[j]] = next++;
                queue[tail++] = sc[j];
            }
    }
    int maxit = o->max_iterations > 0 ? o->max_iterations : ERG_ENVPIPE_DEFAULT_MAX_ITERS;
    int it = 0;
    bool stuck = false;
    for (; it < maxit; it++) {
        for (int id = 0; id < n; id++) {
            int s;
            erg_instr in = erg_dag_instr(dag, id, &s);
            int f = erg_plan_stage_freqs_const(plan, s)[id % (2 * M)];
            int i = erg__ctab_find(c, s, in.kind, f);
            qd[id] = erg__floordiv_py(c->k[s * 2 + in.kind].t[i], o->unit_s);
        }
        double T;
        st = erg_dag_cpm(dag, qd, es, lf, &T, err);
        if (st)
            goto done;
        int len = 0, u = 0;
        for (;;) {
            path[len++] = u;
            const int *sc;
            int ns = erg_dag_successors(dag, u, &sc);
            int best = -1;
            for (int j = 0; j < ns; j++) {
                int v = sc[j];
                if (es[u] + qd[u] == lf[v] - qd[v] && (best < 0 || disc[v] < disc[best]))
                    best = v;
            }
            if (best < 0 || len >= n)
                break;
            u = best;
        }
        int fmin = fmax;
        bool all_env = true;
        for (int i = 0; i < len; i++) {
            int s;
            erg_instr in = erg_dag_instr(dag, path[i], &s);
            int f = erg_plan_stage_freqs_const(plan, s)[path[i] % (2 * M)];
            if (f < fmin)
                fmin = f;
            if (!erg__envpipe_in_envelope(S, M, s, in))
                all_env = false;
        }
        bool changed = false;
        for (int i = 0; i < len && fmin + step <= fmax; i++) {
            int s;
            erg_instr in = erg_dag_instr(dag, path[i], &s);
            int *f = erg_plan_stage_freqs(plan, s) + path[i] % (2 * M);
            if (*f != fmin)
                continue;
            if (erg__ctab_find(c, s, in.kind, fmin + step) < 0) {
                st = erg_error_set(err, ERG_ENOTFOUND,
                                   "stage %d %s has no point at %d MHz (EnvPipe's emulation "
                                   "raises clocks in %d MHz steps from %d MHz)",
                                   s, erg_instr_kind_name(in.kind), fmin + step, step, fmin);
                goto done;
            }
            *f = fmin + step;
            changed = true;
        }
        if (o->on_iteration) {
            char *grid = NULL;
            for (int i = 0; i < n; i++)
                qd[i] *= o->unit_s; /* reuse: durations in seconds for the waits */
            erg__envpipe_emulated_waits(dag, es, qd, lf);
            for (int i = 0; i < n; i++)
                lf[i] *= o->unit_s;
            st = erg_envpipe_format_grid(plan, lf, path, len, &grid, err);
            if (st)
                goto done;
            int stop = o->on_iteration(o->user, it + 1, plan, grid);
            erg__free(grid);
            if (stop) {
                st = erg_error_set(err, ERG_ECANCELED, "canceled");
                goto done;
            }
        }
        if (all_env)
            break;
        if (!changed) {
            stuck = true;
            break;
        }
    }
    if (info) {
        info->iterations = it + 1;
        info->stuck = stuck;
        for (int s = 0; s < S; s++) {
            info->max_mhz[s] = fmax;
            info->optimal_mhz[s] = 0;
            info->extra_warmup[s] = 0;
        }
    }
    st = erg__envpipe_finish_plan(c, dag, plan, o->blocking_power_w, "envpipe-perseus-emulation",
                                  err);
done:
    erg__free(qd);
    erg__free(disc);
    erg_dag_free(dag);
    erg__ctab_free(c);
    if (st)
        erg_plan_free(plan);
    else
        *out = plan;
    return st;
}

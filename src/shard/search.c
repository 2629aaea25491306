/* search.c: plan search: CFP's DP over segments with a memory dimension and Alpa's ILP over
 * blocks (GLPK), both on the costs of erg_shard_profile (cfp-spec §5). */
#include "shard/shard_internal.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * DP. Segments in order; each offers its kept combinations c (time T[s][c], memory M[s][c]).
 * Memory is quantised into NB buckets of budget/NB (rounded up, so the DP never exceeds the
 * budget). f[s][c][m] = least time of segments 0..s with s using c and m buckets used:
 *   f[s][c][m] = T[s][c] + min_{c'} ( Rcross(s-1, c', s, c) + f[s-1][c'][m - q(M[s][c])] )
 * Rcross sums the resharding edges between blocks of adjacent segments. Edges that skip a
 * segment are invisible to the DP; the returned plan is re-evaluated on the whole graph, and
 * the difference is reported as the gap to the ILP.
 *
 * ILP (Alpa, §5.2): binary s[b][k]; for every block pair with a resharding matrix,
 * continuous e[a,b][ka][kb] >= 0 whose row sums equal s[a] and column sums equal s[b] (with
 * one-hot s this forces e to the product); minimise sum s*time + sum e*cost subject to
 * sum s*memory <= budget.
 */

#define NB 128

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void decode(const erg_shard *s, const segment *g, long c, size_t *k)
{
    for (int i = g->n - 1; i >= 0; i--) {
        int K = s->pbs[s->order[g->first + i]].K;
        k[g->first + i] = (size_t)(c % K);
        c /= K;
    }
}

static erg_status plan_new(const erg_shard *s, int method, erg_shard_plan **out)
{
    erg_shard_plan *p = erg__calloc(1, sizeof *p);
    if (!p)
        return ERG_ENOMEM;
    p->n = s->norder;
    p->k = erg__calloc((size_t)s->norder, sizeof(size_t));
    if (!p->k) {
        erg__free(p);
        return ERG_ENOMEM;
    }
    p->method = method;
    *out = p;
    return ERG_OK;
}

static void plan_finish(const erg_shard *s, erg_shard_plan *p)
{
    double f;
    shard_eval(s, p->k, &p->time_s, &p->mem_bytes, &f);
    p->tflops = p->time_s > 0 ? f / p->time_s / 1e12 : 0;
}

static erg_status search_dp(erg_shard *s, erg_shard_plan *p, erg_error *err)
{
    int S = s->nseg;
    double avail = s->mem_budget - s->const_mem_bytes;
    if (avail < 0)
        return erg_error_set(err, ERG_ENOTFOUND,
                             "replicated values alone need %.3f GB per device, above the "
                             "budget of %.3f GB",
                             s->const_mem_bytes / 1e9, s->mem_budget / 1e9);
    /* When even the largest kept combinations fit together, memory cannot bind: one bucket. */
    double worst = 0;
    for (int i = 0; i < S; i++) {
        double w = 0;
        for (int c = 0; c < s->segs[i].nkeep; c++)
            w = ERG__MAX(w, s->segs[i].keep_mem[c]);
        worst += w;
    }
    int nb = worst <= avail ? 0 : NB;
    double unit = nb ? avail / nb : INFINITY;
    if (unit <= 0)
        unit = 1;
    int maxk = 1;
    for (int i = 0; i < S; i++)
        maxk = ERG__MAX(maxk, s->segs[i].nkeep);
    size_t layer = (size_t)maxk * (size_t)(nb + 1);
    double *f = erg__malloc((size_t)S * layer * sizeof(double));
    int *arg = erg__malloc((size_t)S * layer * sizeof(int));
    size_t *ka = erg__calloc((size_t)s->norder, sizeof(size_t));
    size_t *kb = erg__calloc((size_t)s->norder, sizeof(size_t));
    double *cross = erg__malloc((size_t)maxk * (size_t)maxk * sizeof(double));
    int *rel = erg__malloc((size_t)(s->nedges + 1) * sizeof(int));
    erg_status st = ERG_OK;
    if (!f || !arg || !ka || !kb || !cross || !rel) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < (size_t)S * layer; i++) {
        f[i] = INFINITY;
        arg[i] = -1;
    }
    for (int si = 0; si < S; si++) {
        const segment *g = &s->segs[si];
        const segment *h = si ? &s->segs[si - 1] : NULL;
        int nrel = 0;
        for (int e = 0; h && e < s->nedges; e++) {
            const pedge *E = &s->edges[e];
            bool fwd = E->a >= h->first && E->a < h->first + h->n && E->b >= g->first &&
                       E->b < g->first + g->n;
            bool bwd = E->b >= h->first && E->b < h->first + h->n && E->a >= g->first &&
                       E->a < g->first + g->n;
            if (fwd || bwd)
                rel[nrel++] = e;
        }
        if (h) {
            for (int a = 0; a < h->nkeep; a++) {
                decode(s, h, h->keep[a], ka);
                for (int c = 0; c < g->nkeep; c++) {
                    decode(s, g, g->keep[c], ka);
                    double r = 0;
                    for (int x = 0; x < nrel; x++) {
                        const pedge *E = &s->edges[rel[x]];
                        r += E->cost_s[ka[E->a] * (size_t)s->pbs[s->order[E->b]].K + ka[E->b]];
                    }
                    cross[a * maxk + c] = r;
                }
            }
        }
        for (int c = 0; c < g->nkeep; c++) {
            double q = nb ? ceil(g->keep_mem[c] / unit - 1e-9) : 0;
            if (q > nb)
                continue;
            int qm = (int)q;
            for (int m = qm; m <= nb; m++) {
                double best = INFINITY;
                int barg = -1;
                if (!h) {
                    if (m == qm)
                        best = 0;
                } else {
                    for (int a = 0; a < h->nkeep; a++) {
                        double v = f[(size_t)(si - 1) * layer + (size_t)a * (nb + 1) + (m - qm)];
                        if (!isfinite(v))
                            continue;
                        v += cross[a * maxk + c];
                        if (v < best) {
                            best = v;
                            barg = a;
                        }
                    }
                }
                if (isfinite(best)) {
                    f[(size_t)si * layer + (size_t)c * (nb + 1) + m] = best + g->keep_time[c];
                    arg[(size_t)si * layer + (size_t)c * (nb + 1) + m] = barg;
                }
            }
        }
    }
    double best = INFINITY;
    int bc = -1, bm = -1;
    const segment *last = &s->segs[S - 1];
    for (int c = 0; c < last->nkeep; c++)
        for (int m = 0; m <= nb; m++) {
            double v = f[(size_t)(S - 1) * layer + (size_t)c * (nb + 1) + m];
            if (v < best) {
                best = v;
                bc = c;
                bm = m;
            }
        }
    if (bc < 0) {
        st = erg_error_set(err, ERG_ENOTFOUND,
                           "no plan fits the memory budget of %.3f GB per device",
                           s->mem_budget / 1e9);
        goto out;
    }
    p->objective_s = best + s->const_time_s;
    for (int si = S - 1; si >= 0; si--) {
        const segment *g = &s->segs[si];
        decode(s, g, g->keep[bc], p->k);
        int prev = arg[(size_t)si * layer + (size_t)bc * (nb + 1) + bm];
        int qm = nb ? (int)ceil(g->keep_mem[bc] / unit - 1e-9) : 0;
        bm -= qm;
        bc = prev;
        if (si > 0 && bc < 0) {
            st = erg_error_set(err, ERG_EINTERNAL, "DP back-pointer missing");
            goto out;
        }
    }
out:
    erg__free(f);
    erg__free(arg);
    erg__free(ka);
    erg__free(kb);
    erg__free(cross);
    erg__free(rel);
    return st;
}

static erg_status search_ilp(erg_shard *s, erg_shard_plan *p, double limit_s, erg_error *err)
{
    glp_prob *lp = glp_create_prob();
    int nb = s->norder;
    int *base = erg__malloc((size_t)(nb + 1) * sizeof(int));
    int *ebase = erg__malloc((size_t)(s->nedges + 1) * sizeof(int));
    int *ia = NULL, *ja = NULL;
    double *ar = NULL;
    erg_status st = ERG_OK;
    if (!base || !ebase) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    glp_set_obj_dir(lp, GLP_MIN);
    int ncol = 0;
    for (int b = 0; b < nb; b++) {
        base[b] = ncol + 1;
        ncol += s->pbs[s->order[b]].K;
    }
    int nedge_used = 0;
    for (int e = 0; e < s->nedges; e++) {
        ebase[e] = ncol + 1;
        const pedge *E = &s->edges[e];
        int Ka = s->pbs[s->order[E->a]].K, Kb = s->pbs[s->order[E->b]].K;
        bool any = false;
        for (int x = 0; x < Ka * Kb; x++)
            any |= E->cost_s[x] > 0;
        if (!any) {
            ebase[e] = 0;
            continue;
        }
        nedge_used++;
        ncol += Ka * Kb;
    }
    glp_add_cols(lp, ncol);
    long nnz_cap = 16;
    for (int b = 0; b < nb; b++)
        nnz_cap += 2L * s->pbs[s->order[b]].K;
    for (int e = 0; e < s->nedges; e++)
        if (ebase[e]) {
            const pedge *E = &s->edges[e];
            nnz_cap += 2L * s->pbs[s->order[E->a]].K * s->pbs[s->order[E->b]].K +
                       s->pbs[s->order[E->a]].K + s->pbs[s->order[E->b]].K;
        }
    ia = erg__malloc((size_t)(nnz_cap + 1) * sizeof(int));
    ja = erg__malloc((size_t)(nnz_cap + 1) * sizeof(int));
    ar = erg__malloc((size_t)(nnz_cap + 1) * sizeof(double));
    if (!ia || !ja || !ar) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    int nnz = 0, row = 0;
    /* one-hot rows + memory row */
    glp_add_rows(lp, nb + 1);
    for (int b = 0; b < nb; b++) {
        const pblock *P = &s->pbs[s->order[b]];
        row++;
        glp_set_row_bnds(lp, row, GLP_FX, 1, 1);
        for (int k = 0; k < P->K; k++) {
            int col = base[b] + k;
            glp_set_col_kind(lp, col, GLP_BV);
            glp_set_obj_coef(lp, col, P->time_s[k] * 1e6);
            ++nnz;
            ia[nnz] = row, ja[nnz] = col, ar[nnz] = 1;
        }
    }
    row++;
    double avail = s->mem_budget - s->const_mem_bytes;
    glp_set_row_bnds(lp, row, GLP_UP, 0, avail / 1e9);
    for (int b = 0; b < nb; b++) {
        const pblock *P = &s->pbs[s->order[b]];
        for (int k = 0; k < P->K; k++) {
            ++nnz;
            ia[nnz] = row, ja[nnz] = base[b] + k, ar[nnz] = P->mem_bytes[k] / 1e9;
        }
    }
    for (int e = 0; e < s->nedges; e++) {
        if (!ebase[e])
            continue;
        const pedge *E = &s->edges[e];
        int Ka = s->pbs[s->order[E->a]].K, Kb = s->pbs[s->order[E->b]].K;
        for (int x = 0; x < Ka * Kb; x++) {
            glp_set_col_bnds(lp, ebase[e] + x, GLP_LO, 0, 0);
            glp_set_obj_coef(lp, ebase[e] + x, E->cost_s[x] * 1e6);
        }
        int r0 = glp_add_rows(lp, Ka + Kb);
        for (int ka = 0; ka < Ka; ka++) {
            int r = r0 + ka;
            glp_set_row_bnds(lp, r, GLP_FX, 0, 0);
            for (int kb = 0; kb < Kb; kb++) {
                ++nnz;
                ia[nnz] = r, ja[nnz] = ebase[e] + ka * Kb + kb, ar[nnz] = 1;
            }
            ++nnz;
            ia[nnz] = r, ja[nnz] = base[E->a] + ka, ar[nnz] = -1;
        }
        for (int kb = 0; kb < Kb; kb++) {
            int r = r0 + Ka + kb;
            glp_set_row_bnds(lp, r, GLP_FX, 0, 0);
            for (int ka = 0; ka < Ka; ka++) {
                ++nnz;
                ia[nnz] = r, ja[nnz] = ebase[e] + ka * Kb + kb, ar[nnz] = 1;
            }
            ++nnz;
            ia[nnz] = r, ja[nnz] = base[E->b] + kb, ar[nnz] = -1;
        }
    }
    glp_load_matrix(lp, nnz, ia, ja, ar);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = (int)(limit_s * 1000);
    int rc = glp_intopt(lp, &parm);
    int status = glp_mip_status(lp);
    if (rc == GLP_ETMLIM || rc == GLP_EMIPGAP)
        p->timed_out = true;
    if (status == GLP_NOFEAS || (rc == GLP_ENOPFS)) {
        st = erg_error_set(err, ERG_ENOTFOUND,
                           "no plan fits the memory budget of %.3f GB per device",
                           s->mem_budget / 1e9);
        goto out;
    }
    if (status != GLP_OPT && status != GLP_FEAS) {
        st = erg_error_set(err, ERG_ENUMERIC, "GLPK failed (glp_intopt code %d, status %d)", rc,
                           status);
        goto out;
    }
    for (int b = 0; b < nb; b++) {
        const pblock *P = &s->pbs[s->order[b]];
        for (int k = 0; k < P->K; k++)
            if (glp_mip_col_val(lp, base[b] + k) > 0.5)
                p->k[b] = (size_t)k;
    }
    p->objective_s = glp_mip_obj_val(lp) * 1e-6 + s->const_time_s;
    (void)nedge_used;
out:
    glp_delete_prob(lp);
    erg__free(base);
    erg__free(ebase);
    erg__free(ia);
    erg__free(ja);
    erg__free(ar);
    return st;
}

/* Second pass after the DP (spec §5.1, "both ends known"): the DP cannot see resharding
 * edges between non-adjacent segments. Starting from its plan, change one block at a time to
 * the strategy that lowers the whole-graph time (within the memory budget) until no single
 * change helps. Returns the number of changes. */
static int refine(const erg_shard *s, erg_shard_plan *p)
{
    int changes = 0;
    double best, mem;
    shard_eval(s, p->k, &best, &mem, NULL);
    for (int sweep = 0; sweep < 50; sweep++) {
        bool improved = false;
        for (int b = 0; b < s->norder; b++) {
            size_t keep = p->k[b];
            for (int k = 0; k < s->pbs[s->order[b]].K; k++) {
                if ((size_t)k == keep)
                    continue;
                p->k[b] = (size_t)k;
                double t, m;
                shard_eval(s, p->k, &t, &m, NULL);
                if (t < best - 1e-15 && m <= s->mem_budget) {
                    best = t;
                    keep = (size_t)k;
                    improved = true;
                    changes++;
                }
            }
            p->k[b] = keep;
        }
        if (!improved)
            break;
    }
    return changes;
}

erg_status erg_shard_search(erg_shard *s, erg_shard_method method, double time_limit_s,
                            erg_shard_plan **out, erg_error *err)
{
    if (!s || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_search: NULL argument");
    *out = NULL;
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "erg_shard_search: run erg_shard_profile first");
    if (method != ERG_SHARD_DP && method != ERG_SHARD_ILP)
        return erg_error_set(err, ERG_EINVAL, "unknown search method %d", (int)method);
    if (time_limit_s <= 0)
        time_limit_s = 600;
    erg_shard_plan *p;
    if (plan_new(s, method, &p))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double t0 = now_s();
    erg_status st = method == ERG_SHARD_DP ? search_dp(s, p, err)
                                           : search_ilp(s, p, time_limit_s, err);
    if (!st && method == ERG_SHARD_DP)
        p->refined = refine(s, p);
    p->search_s = now_s() - t0;
    if (st) {
        erg_shard_plan_free(p);
        return st;
    }
    plan_finish(s, p);
    *out = p;
    return ERG_OK;
}

/*
 * Alpa's ILP at operator granularity (cfp-spec §5.2), on the same cost model: every block
 * member is its own decision node choosing one of its block's K plan rows (its output spec,
 * operand specs and collectives under that row) independently of the other members; every
 * operand edge between two members carries the resharding matrix between their rows. Block
 * plans are the special case where all members of a block agree, so this optimum is at most
 * the block optimum; how often blocks stay uniform in its solution tests CFP's premise.
 */
erg_status erg_shard_search_ops_ilp(erg_shard *s, double time_limit_s, double *objective_s,
                                    double *search_s, bool *timed_out, double *uniform_blocks,
                                    size_t *num_variables, erg_error *err)
{
    if (!s || !objective_s || !search_s || !timed_out || !uniform_blocks)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_search_ops_ilp: NULL argument");
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "run erg_shard_profile first");
    if (time_limit_s <= 0)
        time_limit_s = 600;
    double t0 = now_s();
    *timed_out = false;
    *objective_s = INFINITY;
    *uniform_blocks = 0;
    glp_prob *lp = glp_create_prob();
    int *base = erg__calloc((size_t)s->n, sizeof(int));
    int *ia = NULL, *ja = NULL;
    double *ar = NULL;
    long nnz = 0, cap = 0;
    erg_status st = ERG_OK;
    if (!base) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    glp_set_obj_dir(lp, GLP_MIN);
#define PUSH(r, c, v)                                                                              \
    do {                                                                                           \
        if (nnz + 1 >= cap) {                                                                      \
            long nc = cap ? cap * 2 : 1 << 16;                                                     \
            int *ni = erg__reallocarray(ia, (size_t)nc, sizeof(int));                              \
            if (ni)                                                                                \
                ia = ni;                                                                           \
            int *nj = erg__reallocarray(ja, (size_t)nc, sizeof(int));                              \
            if (nj)                                                                                \
                ja = nj;                                                                           \
            double *na = erg__reallocarray(ar, (size_t)nc, sizeof(double));                        \
            if (na)                                                                                \
                ar = na;                                                                           \
            if (!ni || !nj || !na) {                                                               \
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");                              \
                goto out;                                                                          \
            }                                                                                      \
            cap = nc;                                                                              \
        }                                                                                          \
        ++nnz;                                                                                     \
        ia[nnz] = (r), ja[nnz] = (c), ar[nnz] = (v);                                               \
    } while (0)
    int memrow = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, memrow, GLP_UP, 0, (s->mem_budget - s->const_mem_bytes) / 1e9);
    for (int v = 0; v < s->n; v++) {
        const node *nd = &s->nodes[v];
        if (nd->pb < 0 || s->pos_of[nd->pb] < 0)
            continue;
        const pblock *P = &s->pbs[nd->pb];
        const member *m = &P->mem[nd->slot];
        int c0 = glp_add_cols(lp, P->K);
        base[v] = c0;
        int r = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
        for (int k = 0; k < P->K; k++) {
            glp_set_col_kind(lp, c0 + k, GLP_BV);
            glp_set_obj_coef(lp, c0 + k, m->cost_s[k] * 1e6);
            PUSH(r, c0 + k, 1.0);
            if (m->mem_b[k] > 0)
                PUSH(memrow, c0 + k, m->mem_b[k] / 1e9);
        }
    }
    for (int v = 0; v < s->n; v++) {
        if (!base[v])
            continue;
        const hlo_instr *in = &s->c->ins[v];
        const pblock *P = &s->pbs[s->nodes[v].pb];
        const member *mv = &P->mem[s->nodes[v].slot];
        for (int j = 0; j < in->nops; j++) {
            int u = in->ops[j];
            if (!base[u])
                continue;
            const pblock *Q = &s->pbs[s->nodes[u].pb];
            const member *mu = &Q->mem[s->nodes[u].slot];
            int Ku = Q->K, Kv = P->K;
            double cost[64 * 64];
            bool any = false;
            if (Ku > 64 || Kv > 64)
                continue;
            for (int ku = 0; ku < Ku; ku++)
                for (int kv = 0; kv < Kv; kv++) {
                    double bytes;
                    cost[ku * Kv + kv] = shard_reshard(s, &s->c->ins[u].shape, &mu->out[ku],
                                                       &mv->req[j * Kv + kv], &bytes) *
                                         (double)s->trips;
                    any |= cost[ku * Kv + kv] > 0;
                }
            if (!any)
                continue;
            int e0 = glp_add_cols(lp, Ku * Kv);
            for (int x = 0; x < Ku * Kv; x++) {
                glp_set_col_bnds(lp, e0 + x, GLP_LO, 0, 0);
                glp_set_obj_coef(lp, e0 + x, cost[x] * 1e6);
            }
            int r0 = glp_add_rows(lp, Ku + Kv);
            for (int ku = 0; ku < Ku; ku++) {
                glp_set_row_bnds(lp, r0 + ku, GLP_FX, 0, 0);
                for (int kv = 0; kv < Kv; kv++)
                    PUSH(r0 + ku, e0 + ku * Kv + kv, 1.0);
                PUSH(r0 + ku, base[u] + ku, -1.0);
            }
            for (int kv = 0; kv < Kv; kv++) {
                glp_set_row_bnds(lp, r0 + Ku + kv, GLP_FX, 0, 0);
                for (int ku = 0; ku < Ku; ku++)
                    PUSH(r0 + Ku + kv, e0 + ku * Kv + kv, 1.0);
                PUSH(r0 + Ku + kv, base[v] + kv, -1.0);
            }
        }
    }
#undef PUSH
    if (num_variables)
        *num_variables = (size_t)glp_get_num_cols(lp);
    glp_load_matrix(lp, (int)nnz, ia, ja, ar);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = (int)ERG__MIN(time_limit_s * 1000, 2e9);
    int rc = glp_intopt(lp, &parm);
    int status = glp_mip_status(lp);
    if (rc == GLP_ETMLIM || rc == GLP_EMIPGAP)
        *timed_out = true;
    if (status == GLP_NOFEAS || rc == GLP_ENOPFS) {
        st = erg_error_set(err, ERG_ENOTFOUND, "no operator plan fits the memory budget");
        goto out;
    }
    if (status == GLP_OPT || status == GLP_FEAS) {
        *objective_s = glp_mip_obj_val(lp) * 1e-6 + s->const_time_s;
        int uniform = 0;
        for (int oi = 0; oi < s->norder; oi++) {
            const pblock *P = &s->pbs[s->order[oi]];
            int first = -1;
            bool same = true;
            for (int mi = 0; mi < P->nmem && same; mi++) {
                int v = P->mem[mi].ins, kk = 0;
                for (int k = 0; k < P->K; k++)
                    if (glp_mip_col_val(lp, base[v] + k) > 0.5)
                        kk = k;
                /* Members whose rows are all alike do not count as a choice. */
                bool alike = true;
                for (int k = 1; k < P->K && alike; k++)
                    alike = !memcmp(&P->mem[mi].out[k], &P->mem[mi].out[0], sizeof(spec)) &&
                            P->mem[mi].cost_s[k] == P->mem[mi].cost_s[0];
                if (alike)
                    continue;
                if (first < 0)
                    first = kk;
                else if (kk != first)
                    same = false;
            }
            uniform += same;
        }
        *uniform_blocks = s->norder ? (double)uniform / s->norder : 1;
    } else if (!*timed_out) {
        st = erg_error_set(err, ERG_ENUMERIC, "GLPK failed (glp_intopt code %d, status %d)", rc,
                           status);
    }
out:
    *search_s = now_s() - t0;
    glp_delete_prob(lp);
    erg__free(base);
    erg__free(ia);
    erg__free(ja);
    erg__free(ar);
    return st;
}

void erg_shard_plan_free(erg_shard_plan *p)
{
    if (!p)
        return;
    erg__free(p->k);
    erg__free(p);
}

size_t erg_shard_plan_strategy(const erg_shard_plan *p, size_t b)
{
    return p && b < (size_t)p->n ? p->k[b] : 0;
}
double erg_shard_plan_time_s(const erg_shard_plan *p) { return p ? p->time_s : 0; }
double erg_shard_plan_objective_s(const erg_shard_plan *p) { return p ? p->objective_s : 0; }
double erg_shard_plan_memory_bytes(const erg_shard_plan *p) { return p ? p->mem_bytes : 0; }
double erg_shard_plan_search_s(const erg_shard_plan *p) { return p ? p->search_s : 0; }
double erg_shard_plan_tflops(const erg_shard_plan *p) { return p ? p->tflops : 0; }
bool erg_shard_plan_timed_out(const erg_shard_plan *p) { return p && p->timed_out; }

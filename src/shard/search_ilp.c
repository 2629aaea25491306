/* search_ilp.c: the integer programs of the plan search (GLPK), on the costs of
 * erg_shard_profile (docs/shard.md, Search): Alpa's block ILP, the DP's second pass (refine),
 * the Lagrangian fallback under a binding budget, and Alpa's ILP at operator granularity.
 *
 * ILP (Alpa's): binary s[b][k]; for every block pair with a resharding matrix,
 * continuous e[a,b][ka][kb] >= 0 whose row sums equal s[a] and column sums equal s[b] (with
 * one-hot s this forces e to the product); minimise sum s*time + sum e*cost subject to
 * sum s*memory <= budget.
 */
#include "shard/shard_internal.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GLPK is loaded by the first integer program (core/lazylib.c) */
/* clang-format off */
#define GLPK_FUNCS(X) \
    X(glp_add_cols) X(glp_add_rows) X(glp_create_prob) X(glp_delete_prob) X(glp_get_num_cols) \
    X(glp_init_iocp) X(glp_intopt) X(glp_load_matrix) X(glp_mip_col_val) X(glp_mip_obj_val) \
    X(glp_mip_status) X(glp_set_col_bnds) X(glp_set_col_kind) X(glp_set_obj_coef) \
    X(glp_set_obj_dir) X(glp_set_row_bnds)
/* clang-format on */
ERG__LAZY_LIB(glpk_lib, ERG_SONAME_GLPK, "the ILP search (GLPK)", GLPK_FUNCS)
#define glp_add_cols (*lz_glp_add_cols)
#define glp_add_rows (*lz_glp_add_rows)
#define glp_create_prob (*lz_glp_create_prob)
#define glp_delete_prob (*lz_glp_delete_prob)
#define glp_get_num_cols (*lz_glp_get_num_cols)
#define glp_init_iocp (*lz_glp_init_iocp)
#define glp_intopt (*lz_glp_intopt)
#define glp_load_matrix (*lz_glp_load_matrix)
#define glp_mip_col_val (*lz_glp_mip_col_val)
#define glp_mip_obj_val (*lz_glp_mip_obj_val)
#define glp_mip_status (*lz_glp_mip_status)
#define glp_set_col_bnds (*lz_glp_set_col_bnds)
#define glp_set_col_kind (*lz_glp_set_col_kind)
#define glp_set_obj_coef (*lz_glp_set_obj_coef)
#define glp_set_obj_dir (*lz_glp_set_obj_dir)
#define glp_set_row_bnds (*lz_glp_set_row_bnds)

erg_status erg__shard_search_ilp(erg_shard *s, erg_shard_plan *p, double limit_s, erg_error *err)
{
    erg_status lst = erg__lazylib_load(&glpk_lib, err);
    if (lst != ERG_OK)
        return lst;
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
        if (p->timed_out)
            st = erg_error_set(err, ERG_ETIMEOUT,
                               "the ILP found no plan within its time limit of %g s (raise "
                               "--time-limit, or use --method dp)",
                               limit_s);
        else
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

/* Second pass after the DP ("both ends known"): the DP cannot see resharding
 * edges between non-adjacent segments. Starting from its plan, change one block at a time to
 * the strategy that lowers the whole-graph time (within the memory budget) until no single
 * change helps, on the DP's own figures (imported rows included: erg__shard_eval_used). Returns the
 * number of changes. */
int erg__shard_refine(const erg_shard *s, erg_shard_plan *p)
{
    int changes = 0;
    double best, mem;
    erg__shard_eval_used(s, p->k, &best, &mem);
    for (int sweep = 0; sweep < 50; sweep++) {
        bool improved = false;
        for (int b = 0; b < s->norder; b++) {
            size_t keep = p->k[b];
            for (int k = 0; k < s->pbs[s->order[b]].K; k++) {
                if ((size_t)k == keep)
                    continue;
                p->k[b] = (size_t)k;
                double t, m;
                erg__shard_eval_used(s, p->k, &t, &m);
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

/*
 * Fallback under a binding budget when the segment frontier is too large (BERT-base 1x8 with
 * a tight budget): elimination has no memory dimension, but it minimises
 *     L(lambda) = min over plans of  time + lambda * memory,
 * and for every lambda >= 0, L(lambda) - lambda * budget is a lower bound on the best time
 * within the budget (Lagrangian relaxation). Doubling lambda until the plan fits, then
 * bisecting, gives feasible plans (each improved by the second pass) and the bound. The best
 * of these and of the chain DP's plan is kept; when it meets the bound it is optimal.
 */
erg_status erg__shard_lagrange(erg_shard *s, erg_shard_plan *p, erg_error *err)
{
    size_t *k = erg__calloc((size_t)s->norder + 1, sizeof(size_t));
    erg_shard_plan tmp = *p;
    if (!k)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    tmp.k = k;
    double avail = s->mem_budget - s->const_mem_bytes;
    double best_t = INFINITY, best_m = 0, lb = -INFINITY;
    if (p->time_s > 0) {
        erg__shard_eval(s, p->k, &best_t, &best_m, NULL);
        if (best_m > s->mem_budget * (1 + 1e-12))
            best_t = INFINITY;
    }
    double lo = 0, hi = 0, t, m, blk_m;
    /* lambda in s/byte: start where memory weighs like time. */
    double lam = 1e-3 / ERG__MAX(avail, 1.0);
    for (int it = 0; it < 100; it++) {
        if (it > 0 && hi == 0)
            lam *= 4; /* still infeasible: weigh memory more */
        else if (it > 0)
            lam = 0.5 * (lo + hi);
        if (hi > 0 && hi - lo <= 1e-6 * hi)
            break;
        erg__shard_ve_set_lambda(s, lam);
        double v = erg__shard_ve_search(s, k);
        erg__shard_eval(s, k, &t, &m, NULL);
        blk_m = m - s->const_mem_bytes;
        /* v = the least time + lam * block memory over all plans */
        lb = ERG__MAX(lb, v + s->const_time_s - lam * avail);
        if (blk_m <= avail * (1 + 1e-12)) {
            hi = lam;
            memcpy(tmp.k, k, (size_t)s->norder * sizeof(size_t));
            erg__shard_refine(s, &tmp);
            double t2, m2;
            erg__shard_eval(s, tmp.k, &t2, &m2, NULL);
            if (m2 <= s->mem_budget * (1 + 1e-12) && t2 < best_t) {
                best_t = t2;
                memcpy(p->k, tmp.k, (size_t)s->norder * sizeof(size_t));
            }
        } else {
            lo = lam;
        }
        if (hi == 0 && lam > 1e12)
            break;
    }
    erg__shard_ve_set_lambda(s, 0);
    erg__free(k);
    p->lower_bound_s = isfinite(lb) ? lb : 0;
    if (!isfinite(best_t))
        return erg_error_set(err, ERG_ENOTFOUND,
                             "no plan fits the memory budget of %.3f GB per device",
                             s->mem_budget / 1e9);
    p->objective_s = best_t;
    p->exact = best_t <= lb + 1e-12 * best_t;
    return ERG_OK;
}

/*
 * Alpa's ILP at operator granularity (docs/shard.md, Search), on the same cost model: every block
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
    double t0 = erg__shard_now_s();
    *timed_out = false;
    *objective_s = INFINITY;
    *uniform_blocks = 0;
    erg_status lst = erg__lazylib_load(&glpk_lib, err);
    if (lst != ERG_OK)
        return lst;
    glp_prob *lp = glp_create_prob();
    int *base = erg__calloc((size_t)s->n, sizeof(int));
    int *ia = NULL, *ja = NULL;
    double *ar = NULL;
    long nnz = 0;
    size_t cap = 0;
    erg_status st = ERG_OK;
    if (!base) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    glp_set_obj_dir(lp, GLP_MIN);
#define PUSH(r, c, v)                                                                              \
    do {                                                                                           \
        if ((size_t)nnz + 1 >= cap) { /* three arrays, one capacity (1-based: nnz + 2) */          \
            size_t ci = cap, cj = cap, ca = cap;                                                   \
            bool grew = ERG__GROW(ia, ci, (size_t)nnz + 2, 1 << 16);                               \
            grew = ERG__GROW(ja, cj, (size_t)nnz + 2, 1 << 16) && grew;                            \
            grew = ERG__GROW(ar, ca, (size_t)nnz + 2, 1 << 16) && grew;                            \
            if (!grew) {                                                                           \
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");                              \
                goto out;                                                                          \
            }                                                                                      \
            cap = ci;                                                                              \
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
                    cost[ku * Kv + kv] = erg__shard_reshard(s, &s->c->ins[u].shape, &mu->out[ku],
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
    *search_s = erg__shard_now_s() - t0;
    glp_delete_prob(lp);
    erg__free(base);
    erg__free(ia);
    erg__free(ja);
    erg__free(ar);
    return st;
}

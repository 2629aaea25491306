/* search.c: plan search: CFP's DP over segments with a memory dimension (exact frontier DP,
 * chain DP fallback), on the costs of erg_shard_profile (docs/shard.md, Search), and the plan
 * object; erg_shard_search dispatches to the ILPs of search_ilp.c as well. One concept in
 * ~1,000 lines: the DP's three variants share its tables and frontier representation. */
#include "shard/shard_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * DP (CFP's). The main search is the exact frontier DP further down
 * (search_dp_exact_*); when its frontier is too large, ve.c eliminates blocks one by one
 * (additive costs, memory that cannot bind), and only when neither applies the chain DP
 * below runs. Chain DP: segments in order; each offers its kept combinations c (time
 * T[s][c], memory M[s][c]). Memory is quantised into NB buckets of budget/NB (rounded up, so
 * the DP never exceeds the budget). f[s][c][m] = least time of segments 0..s with s using c
 * and m buckets used:
 *   f[s][c][m] = T[s][c] + min_{c'} ( Rcross(s-1, c', s, c) + f[s-1][c'][m - q(M[s][c])] )
 * Rcross sums the resharding edges between blocks of adjacent segments. Edges that skip a
 * segment are invisible to it; a second pass (refine, search_ilp.c) then changes one block
 * at a time. The block ILP, the Lagrangian fallback and the operator-level ILP are in
 * search_ilp.c.
 */

#define NB 128

static void decode(const erg_shard *s, const segment *g, long c, size_t *k)
{
    for (int i = g->n - 1; i >= 0; i--) {
        int K = s->pbs[s->order[g->first + i]].K;
        k[g->first + i] = (size_t)(c % K);
        c /= K;
    }
}

/* The block ILP's time budget when it backs up the inexact chain DP (seconds). */
#define DP_ILP_BUDGET_S 10.0

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

/* Time and TFLOP/s modelled on the whole graph; memory as the method counted it: the ILP's
 * modelled, the DP's (and a given plan's) with the imported rows of --profiles. */
static void plan_finish(const erg_shard *s, erg_shard_plan *p)
{
    double f, t;
    erg__shard_eval(s, p->k, &p->time_s, &p->mem_bytes, &f);
    if (p->method != ERG_SHARD_ILP)
        erg__shard_eval_used(s, p->k, &t, &p->mem_bytes);
    p->tflops = p->time_s > 0 ? f / p->time_s / 1e12 : 0;
}

/* The adjacent-segment DP over the kept combinations with memory buckets: the fallback when
 * the frontier of the exact DP would be too large (see above). */
static erg_status search_dp_chain(erg_shard *s, erg_shard_plan *p, erg_error *err)
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

/*
 * Exact DP over the segment sequence (docs/shard.md, Search; with the "carry the state" fix for
 * edges that skip segments).
 *
 * Segment s offers combinations c with time T[s][c] (blocks + intra-segment resharding, or
 * an imported profile) and memory M[s][c]. A resharding edge between blocks of two segments
 * couples them. The DP walks the segments in order and carries, as its state, the strategies
 * of the *frontier*: the blocks of the segments done so far that still have an edge to a
 * later segment. Adjacent-segment edges make the frontier the previous segment's exit
 * blocks (CFP's chain); an edge that skips segments keeps its first block in the frontier
 * until its other end is reached, so its cost is charged exactly, at the step of its later
 * end. Every edge is charged once, so the DP value is the whole-graph time of its plan.
 *
 * Two reductions make this cheap, and both are exact:
 *  - Interface keys. Within a segment only the blocks with an edge to another segment
 *    ("interface") matter to the rest of the graph. Combinations with the same interface
 *    assignment (key) compete only on (time, memory): per key only the Pareto front is kept,
 *    and when memory cannot bind (the largest combinations of all segments fit together)
 *    only the fastest. A 4-block BERT layer without outside edges has one key.
 *  - Transition tables. For the step into segment s, the resharding between each frontier
 *    state x and key y (cross[x][y]) and the index of the next state are computed once when
 *    the costs are built, so a search is additions and comparisons over precomputed arrays
 *    with no allocation (when memory cannot bind). Repeated segments (12 identical BERT
 *    layers) reduce to the same small key tables.
 * Memory: the state is (frontier assignment, Pareto front of (time, memory)); a candidate
 * whose memory exceeds the budget is dropped and a dominated one (no less memory, no less
 * time) is pruned, so the answer is the exact optimum under the exact budget (no buckets).
 * When a frontier would exceed DP_MAX_STATES states or DP_MAX_WORK transitions per step,
 * the tables are not built: with additive costs and memory that cannot bind, ve.c eliminates
 * blocks instead (exact); otherwise, and when a binding-memory step would hold more than
 * DP_MAX_CANDIDATES entries, the search falls back to the adjacent-segment DP plus a second
 * pass (search_dp_chain, not guaranteed optimal).
 */

#define DP_MAX_STATES (1L << 16)
#define DP_MAX_WORK (1L << 22)
#define DP_MAX_CANDIDATES (1L << 21)

void erg__shard_dp_free(erg_shard *s)
{
    erg__shard_ve_free(s);
    for (int i = 0; s->segs && i < s->nseg; i++) {
        segment *g = &s->segs[i];
        erg__free(g->ifc);
        if (!g->shared_keys) {
            erg__free(g->koff);
            erg__free(g->ent);
        }
        erg__free(g->fr);
        if (!g->shared_trans) {
            erg__free(g->xpart);
            erg__free(g->ypart);
            erg__free(g->cross);
        }
        g->shared_keys = g->shared_trans = false;
        erg__free(g->val);
        erg__free(g->argx);
        erg__free(g->argy);
        g->ifc = g->fr = NULL;
        g->koff = g->xpart = g->ypart = g->argx = g->argy = NULL;
        g->ent = NULL;
        g->cross = g->val = NULL;
        g->nifc = g->nfr = 0;
        g->nkeys = g->nstate = g->nprev = 0;
    }
    s->dp_ready = false;
}

static int cmp_entry(const void *a, const void *b)
{
    const dp_entry *x = a, *y = b;
    if (x->m != y->m)
        return x->m < y->m ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

/* Strategy of digit i of mixed-radix index x over blocks list (first most significant). */
static void digits(const erg_shard *s, const int *blocks, int n, long x, int *out)
{
    for (int i = n - 1; i >= 0; i--) {
        int K = s->pbs[s->order[blocks[i]]].K;
        out[i] = (int)(x % K);
        x /= K;
    }
}

static long radix_size(const erg_shard *s, const int *blocks, int n)
{
    long r = 1;
    for (int i = 0; i < n; i++) {
        r *= s->pbs[s->order[blocks[i]]].K;
        if (r > DP_MAX_STATES)
            return -1;
    }
    return r;
}

/* Edges between segment si and earlier segments, in edge order, into out; their count.
 * eoff/elist: the edges bucketed by their later segment (erg__shard_dp_prepare), so that the
 * tables cost O(segments + edges), not O(segments x edges). */
static int cross_edges(const int *eoff, const int *elist, int si, int *out)
{
    int ns = 0;
    for (int k = eoff[si]; k < eoff[si + 1]; k++)
        out[ns++] = elist[k];
    return ns;
}

/* Whether the transition into segment si equals the one into tu (an earlier repeat of the
 * same unique segment whose tables are built): the same frontier before and after and the
 * same interface, relative to the segment's first block, and edges at the same relative
 * places with equal costs. Then xpart, ypart and cross are equal too. */
static bool same_transition(const erg_shard *s, const int *eoff, const int *elist, int si, int tu,
                            const int *prev, int nprevb, int *scratch)
{
    const segment *g = &s->segs[si], *u = &s->segs[tu];
    const segment *up = &s->segs[tu - 1];
    int dg = g->first, du = u->first;
    if (u->nifc != g->nifc || u->nfr != g->nfr || up->nfr != nprevb || u->nkeys != g->nkeys ||
        u->nstate != g->nstate || u->nprev != g->nprev || !u->cross)
        return false;
    for (int i = 0; i < g->nifc; i++)
        if (g->ifc[i] - dg != u->ifc[i] - du)
            return false;
    for (int i = 0; i < g->nfr; i++)
        if (g->fr[i] - dg != u->fr[i] - du)
            return false;
    for (int i = 0; i < nprevb; i++)
        if (prev[i] - dg != up->fr[i] - du)
            return false;
    int ng = cross_edges(eoff, elist, si, scratch);
    int *eu = scratch + ng;
    int nu = cross_edges(eoff, elist, tu, eu);
    if (ng != nu)
        return false;
    for (int i = 0; i < ng; i++) {
        const pedge *A = &s->edges[scratch[i]], *B = &s->edges[eu[i]];
        if (A->a - dg != B->a - du || A->b - dg != B->b - du)
            return false;
        size_t n = (size_t)s->pbs[s->order[A->a]].K * (size_t)s->pbs[s->order[A->b]].K;
        if (memcmp(A->cost_s, B->cost_s, n * sizeof(double)))
            return false;
    }
    return true;
}

erg_status erg__shard_dp_prepare(erg_shard *s, double *const *tv, double *const *mv,
                                 const int *same_as, erg_error *err)
{
    double t0 = erg__shard_now_s();
    erg__shard_dp_free(s);
    int N = s->norder, S = s->nseg;
    erg_status st = ERG_OK;
    int *segof = erg__malloc((size_t)(N + 1) * sizeof(int));
    int *lastseg = erg__malloc((size_t)(N + 1) * sizeof(int));
    bool *outside = erg__calloc((size_t)N + 1, sizeof(bool));
    int *dg = erg__malloc((size_t)(N + 1) * sizeof(int));
    int *dx = erg__malloc((size_t)(N + 1) * sizeof(int));
    int *where = erg__malloc((size_t)(N + 1) * sizeof(int)); /* block -> index in fr/ifc */
    size_t *kv = erg__calloc((size_t)N + 1, sizeof(size_t));
    int *sedge = erg__malloc((size_t)(2 * s->nedges + 1) * sizeof(int));
    int *eoff = erg__calloc((size_t)S + 2, sizeof(int));
    int *elist = erg__malloc((size_t)(s->nedges + 1) * sizeof(int));
    double *dlog = erg__calloc((size_t)S + 2, sizeof(double));
    if (!segof || !lastseg || !outside || !dg || !dx || !where || !kv || !sedge || !eoff ||
        !elist || !dlog)
        goto oom;
    for (int b = 0; b < N; b++)
        where[b] = -1; /* kept all -1 between uses: entries are reset after each use */
    for (int i = 0; i < S; i++)
        for (int b = 0; b < s->segs[i].n; b++)
            segof[s->segs[i].first + b] = i;
    /* Edges between segments, bucketed by their later segment, in edge order. */
    for (int e = 0; e < s->nedges; e++) {
        int x = segof[s->edges[e].a], y = segof[s->edges[e].b];
        if (x != y)
            eoff[ERG__MAX(x, y) + 1]++;
    }
    for (int i = 0; i < S; i++)
        eoff[i + 1] += eoff[i];
    {
        int *fill = erg__calloc((size_t)S + 1, sizeof(int));
        if (!fill)
            goto oom;
        for (int e = 0; e < s->nedges; e++) {
            int x = segof[s->edges[e].a], y = segof[s->edges[e].b];
            if (x != y) {
                int t = ERG__MAX(x, y);
                elist[eoff[t] + fill[t]++] = e;
            }
        }
        erg__free(fill);
    }
    for (int b = 0; b < N; b++)
        lastseg[b] = segof[b];
    for (int e = 0; e < s->nedges; e++) {
        int a = s->edges[e].a, b = s->edges[e].b;
        if (segof[a] == segof[b])
            continue;
        outside[a] = outside[b] = true;
        lastseg[a] = ERG__MAX(lastseg[a], segof[b]);
        lastseg[b] = ERG__MAX(lastseg[b], segof[a]);
    }
    /* Memory binds unless the largest combinations of all segments fit together. */
    double worst = s->const_mem_bytes;
    for (int i = 0; i < S; i++) {
        double w = 0;
        for (long c = 0; c < s->segs[i].ncombo; c++)
            w = ERG__MAX(w, mv[i][c]);
        worst += w;
    }
    s->dp_membind = worst > s->mem_budget;
    double avail = s->mem_budget - s->const_mem_bytes;
    /* Sizes first (cheap): give up before building any table when a frontier or a step
     * would exceed the limits. */
    {
        /* The frontier after segment si holds the blocks b with segof[b] <= si < lastseg[b]:
         * its size is a running product (sums of logs over a difference array). */
        for (int b = 0; b < N; b++)
            if (lastseg[b] > segof[b]) {
                double l = log2((double)s->pbs[s->order[b]].K);
                dlog[segof[b]] += l;
                dlog[lastseg[b]] -= l;
            }
        double nprev_d = 1, run = 0;
        for (int si = 0; si < S; si++) {
            const segment *g = &s->segs[si];
            double keys = 1;
            for (int b = g->first; b < g->first + g->n; b++)
                if (outside[b])
                    keys *= s->pbs[s->order[b]].K;
            run += dlog[si];
            double states = exp2(run);
            if (keys > DP_MAX_STATES || states > DP_MAX_STATES * (1 + 1e-9) ||
                nprev_d * keys > DP_MAX_WORK)
                goto toobig;
            nprev_d = states;
        }
    }
    double work = 0;
    const int *prev = NULL;
    int nprevb = 0;
    long nprev = 1;
    for (int si = 0; si < S; si++) {
        segment *g = &s->segs[si];
        /* Interface blocks and key tables. */
        g->ifc = erg__malloc((size_t)(g->n + 1) * sizeof(int));
        if (!g->ifc)
            goto oom;
        g->nifc = 0;
        for (int b = g->first; b < g->first + g->n; b++)
            if (outside[b])
                g->ifc[g->nifc++] = b;
        g->nkeys = radix_size(s, g->ifc, g->nifc);
        if (g->nkeys < 0)
            goto toobig;
        long nc = g->ncombo;
        int from = same_as ? same_as[si] : -1;
        if (from >= 0 && from < si && s->segs[from].nifc == g->nifc &&
            s->segs[from].nkeys == g->nkeys) {
            const segment *u = &s->segs[from];
            bool same = true;
            for (int i = 0; i < g->nifc && same; i++)
                same = g->ifc[i] - g->first == u->ifc[i] - u->first;
            if (same) {
                /* Same combination table and interface as an earlier occurrence (a repeated
                 * layer): its key table is this one's (shared, read-only). */
                g->koff = u->koff;
                g->ent = u->ent;
                g->shared_keys = true;
                goto frontier;
            }
        }
        g->koff = erg__calloc((size_t)g->nkeys + 1, sizeof(long));
        g->ent = erg__malloc((size_t)(nc + 1) * sizeof(dp_entry));
        long *keyof = erg__malloc((size_t)(nc + 1) * sizeof(long));
        long *fill = erg__calloc((size_t)g->nkeys + 1, sizeof(long));
        if (!g->koff || !g->ent || !keyof || !fill) {
            erg__free(keyof);
            erg__free(fill);
            goto oom;
        }
        for (long c = 0; c < nc; c++) {
            long cc = c;
            for (int i = g->n - 1; i >= 0; i--) {
                int K = s->pbs[s->order[g->first + i]].K;
                kv[g->first + i] = (size_t)(cc % K);
                cc /= K;
            }
            long y = 0;
            for (int i = 0; i < g->nifc; i++)
                y = y * s->pbs[s->order[g->ifc[i]]].K + (long)kv[g->ifc[i]];
            keyof[c] = y;
            g->koff[y + 1]++;
        }
        for (long y = 0; y < g->nkeys; y++)
            g->koff[y + 1] += g->koff[y];
        for (long c = 0; c < nc; c++) {
            long y = keyof[c];
            g->ent[g->koff[y] + fill[y]++] = (dp_entry){tv[si][c], mv[si][c], c};
        }
        erg__free(keyof);
        erg__free(fill);
        /* Per key: drop what exceeds the budget, keep the Pareto front (or the fastest). */
        long w = 0;
        for (long y = 0; y < g->nkeys; y++) {
            dp_entry *E = g->ent + g->koff[y];
            long n = g->koff[y + 1] - g->koff[y];
            g->koff[y] = w;
            if (!s->dp_membind) {
                long best = -1;
                for (long i = 0; i < n; i++)
                    if (best < 0 || E[i].t < E[best].t ||
                        (E[i].t == E[best].t && E[i].m < E[best].m))
                        best = i;
                if (best >= 0)
                    g->ent[w++] = E[best];
                continue;
            }
            qsort(E, (size_t)n, sizeof *E, cmp_entry);
            double tbest = INFINITY;
            for (long i = 0; i < n; i++)
                if (E[i].m <= avail * (1 + 1e-12) && E[i].t < tbest) {
                    tbest = E[i].t;
                    g->ent[w++] = E[i];
                }
        }
        g->koff[g->nkeys] = w;
    frontier:
        /* Frontier after this segment and the transition tables. */
        g->fr = erg__malloc((size_t)(nprevb + g->nifc + 1) * sizeof(int));
        if (!g->fr)
            goto oom;
        g->nfr = 0;
        for (int i = 0; i < nprevb; i++)
            if (lastseg[prev[i]] > si)
                g->fr[g->nfr++] = prev[i];
        for (int i = 0; i < g->nifc; i++)
            if (lastseg[g->ifc[i]] > si)
                g->fr[g->nfr++] = g->ifc[i];
        g->nstate = radix_size(s, g->fr, g->nfr);
        g->nprev = nprev;
        work += (double)nprev * (double)g->nkeys;
        if (g->nstate < 0 || (double)nprev * (double)g->nkeys > DP_MAX_WORK)
            goto toobig;
        g->val = erg__malloc((size_t)g->nstate * sizeof(double));
        g->argx = erg__malloc((size_t)g->nstate * sizeof(long));
        g->argy = erg__malloc((size_t)g->nstate * sizeof(long));
        if (!g->val || !g->argx || !g->argy)
            goto oom;
        {
            /* A repeated layer enters the same way as the previous repeat: share its
             * transition. */
            int tu = -1;
            for (int j = si - 1; j >= 1 && tu < 0; j--)
                if (s->segs[j].unique == g->unique && s->segs[j].koff == g->koff)
                    tu = j;
            if (tu >= 1 && same_transition(s, eoff, elist, si, tu, prev, nprevb, sedge)) {
                const segment *u = &s->segs[tu];
                g->xpart = u->xpart;
                g->ypart = u->ypart;
                g->cross = u->cross;
                g->shared_trans = true;
                prev = g->fr;
                nprevb = g->nfr;
                nprev = g->nstate;
                continue;
            }
        }
        g->xpart = erg__calloc((size_t)nprev, sizeof(long));
        g->ypart = erg__calloc((size_t)g->nkeys, sizeof(long));
        g->cross = erg__calloc((size_t)(nprev * g->nkeys), sizeof(double));
        if (!g->xpart || !g->ypart || !g->cross)
            goto oom;
        /* Stride of each frontier block in the new state index. */
        long *frs = erg__malloc((size_t)(g->nfr + 1) * sizeof(long));
        if (!frs)
            goto oom;
        long stride = 1;
        for (int i = g->nfr - 1; i >= 0; i--) {
            where[g->fr[i]] = i;
            frs[i] = stride;
            stride *= s->pbs[s->order[g->fr[i]]].K;
        }
        for (long x = 0; x < nprev; x++) {
            digits(s, prev, nprevb, x, dx);
            long v = 0;
            for (int i = 0; i < nprevb; i++)
                if (where[prev[i]] >= 0)
                    v += frs[where[prev[i]]] * dx[i];
            g->xpart[x] = v;
        }
        for (long y = 0; y < g->nkeys; y++) {
            digits(s, g->ifc, g->nifc, y, dg);
            long v = 0;
            for (int i = 0; i < g->nifc; i++)
                if (where[g->ifc[i]] >= 0)
                    v += frs[where[g->ifc[i]]] * dg[i];
            g->ypart[y] = v;
        }
        erg__free(frs);
        for (int i = 0; i < g->nfr; i++)
            where[g->fr[i]] = -1;
        /* Edges between the previous frontier and this segment. */
        int ns = cross_edges(eoff, elist, si, sedge);
        if (ns) {
            for (int i = 0; i < nprevb; i++)
                where[prev[i]] = i;
            for (int i = 0; i < g->nifc; i++)
                where[g->ifc[i]] = i;
            for (long x = 0; x < nprev; x++) {
                digits(s, prev, nprevb, x, dx);
                for (long y = 0; y < g->nkeys; y++) {
                    digits(s, g->ifc, g->nifc, y, dg);
                    double r = 0;
                    for (int q = 0; q < ns; q++) {
                        const pedge *E = &s->edges[sedge[q]];
                        int Kb = s->pbs[s->order[E->b]].K;
                        int ka = segof[E->a] == si ? dg[where[E->a]] : dx[where[E->a]];
                        int kb = segof[E->b] == si ? dg[where[E->b]] : dx[where[E->b]];
                        r += E->cost_s[(size_t)ka * Kb + kb];
                    }
                    g->cross[x * g->nkeys + y] = r;
                }
            }
            for (int i = 0; i < nprevb; i++)
                where[prev[i]] = -1;
            for (int i = 0; i < g->nifc; i++)
                where[g->ifc[i]] = -1;
        }
        prev = g->fr;
        nprevb = g->nfr;
        nprev = g->nstate;
    }
    s->dp_work = work;
    s->dp_ready = true;
    goto out;
toobig:
    /* Too large a frontier: with additive costs, eliminate blocks instead (ve.c; exact when
     * its plan fits the budget); otherwise the search uses the chain DP and a second pass. */
    erg__shard_dp_free(s);
    bool additive = true;
    for (int i = 0; i < S; i++)
        additive &= !s->segs[i].imported;
    if (additive)
        st = erg__shard_ve_prepare(s, err);
    goto out;
oom:
    erg__shard_dp_free(s);
    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
out:
    erg__free(segof);
    erg__free(lastseg);
    erg__free(outside);
    erg__free(dg);
    erg__free(dx);
    erg__free(where);
    erg__free(kv);
    erg__free(sedge);
    erg__free(eoff);
    erg__free(elist);
    erg__free(dlog);
    s->dp_prepare_s = erg__shard_now_s() - t0;
    return st;
}

/* The search over the tables of erg__shard_dp_prepare when memory cannot bind: one value per
 * frontier state, precomputed transitions, no allocation. */
static erg_status search_dp_exact_fast(erg_shard *s, erg_shard_plan *p, erg_error *err)
{
    int S = s->nseg;
    const double *pv = NULL;
    for (int si = 0; si < S; si++) {
        segment *g = &s->segs[si];
        double *val = g->val;
        long *ax = g->argx, *ay = g->argy;
        for (long n = 0; n < g->nstate; n++)
            val[n] = INFINITY;
        long nk = g->nkeys;
        const long *koff = g->koff, *yp = g->ypart;
        const dp_entry *ent = g->ent;
        bool fastest = s->dp_membind;
        for (long x = 0; x < g->nprev; x++) {
            double vx = pv ? pv[x] : 0;
            if (vx == INFINITY)
                continue;
            const double *cr = g->cross + x * nk;
            long xp = g->xpart[x];
            for (long y = 0; y < nk; y++) {
                if (koff[y] == koff[y + 1])
                    continue;
                /* the fastest entry of the key: the only one, or the last of a Pareto
                 * front sorted by memory (time decreasing) */
                double v = vx + cr[y] + ent[fastest ? koff[y + 1] - 1 : koff[y]].t;
                long n = xp + yp[y];
                if (v < val[n]) {
                    val[n] = v;
                    ax[n] = x;
                    ay[n] = y;
                }
            }
        }
        pv = val;
    }
    double best = S ? pv[0] : 0;
    if (!(best < INFINITY))
        return erg_error_set(err, ERG_ENOTFOUND,
                             "no plan fits the memory budget of %.3f GB per device",
                             s->mem_budget / 1e9);
    p->objective_s = best + s->const_time_s;
    long n = 0;
    for (int si = S - 1; si >= 0; si--) {
        const segment *g = &s->segs[si];
        long y = g->argy[n];
        decode(s, g, g->ent[s->dp_membind ? g->koff[y + 1] - 1 : g->koff[y]].c, p->k);
        n = g->argx[n];
    }
    return ERG_OK;
}

/* One Pareto entry of a DP state: time, memory, and where it came from. */
typedef struct dp_cand {
    long n; /* state index (candidates only) */
    double t, m;
    long ex; /* entry index in the previous step's pool, -1 at the start */
    long ey; /* index into the segment's ent[] */
} dp_cand;

static int cmp_cand(const void *a, const void *b)
{
    const dp_cand *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    if (x->m != y->m)
        return x->m < y->m ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->ey > y->ey) - (x->ey < y->ey);
}

/* The same DP when memory can bind: each state keeps the Pareto front of (time, memory). */
static erg_status search_dp_exact_mem(erg_shard *s, erg_shard_plan *p, bool *too_big,
                                      erg_error *err)
{
    int S = s->nseg;
    double avail = (s->mem_budget - s->const_mem_bytes) * (1 + 1e-12);
    dp_cand **pool = erg__calloc((size_t)S + 1, sizeof(dp_cand *));
    long **soff = erg__calloc((size_t)S + 1, sizeof(long *));
    dp_cand *cand = NULL;
    erg_status st = ERG_OK;
    *too_big = false;
    if (!pool || !soff)
        goto oom;
    static const dp_cand start = {0, 0, 0, -1, -1};
    const dp_cand *ppool = &start;
    long start_off[2] = {0, 1};
    const long *poff = start_off;
    for (int si = 0; si < S; si++) {
        const segment *g = &s->segs[si];
        long ncand = 0;
        for (long x = 0; x < g->nprev; x++)
            ncand += (poff[x + 1] - poff[x]) * g->koff[g->nkeys];
        if (ncand > (s->dp_max_candidates > 0 ? s->dp_max_candidates : DP_MAX_CANDIDATES)) {
            *too_big = true;
            goto out;
        }
        erg__free(cand);
        cand = erg__malloc((size_t)(ncand + 1) * sizeof(dp_cand));
        if (!cand)
            goto oom;
        long nc = 0;
        for (long x = 0; x < g->nprev; x++)
            for (long ex = poff[x]; ex < poff[x + 1]; ex++)
                for (long y = 0; y < g->nkeys; y++)
                    for (long ey = g->koff[y]; ey < g->koff[y + 1]; ey++) {
                        double m = ppool[ex].m + g->ent[ey].m;
                        if (m > avail)
                            continue;
                        cand[nc++] = (dp_cand){
                            g->xpart[x] + g->ypart[y],
                            ppool[ex].t + g->cross[x * g->nkeys + y] + g->ent[ey].t, m, ex, ey};
                    }
        qsort(cand, (size_t)nc, sizeof *cand, cmp_cand);
        pool[si] = erg__malloc((size_t)(nc + 1) * sizeof(dp_cand));
        soff[si] = erg__calloc((size_t)g->nstate + 1, sizeof(long));
        if (!pool[si] || !soff[si])
            goto oom;
        long w = 0;
        for (long i = 0; i < nc;) {
            long n = cand[i].n;
            double tbest = INFINITY;
            for (; i < nc && cand[i].n == n; i++)
                if (cand[i].t < tbest) {
                    tbest = cand[i].t;
                    pool[si][w++] = cand[i];
                }
            soff[si][n + 1] = w;
        }
        for (long n = 0; n < g->nstate; n++)
            if (soff[si][n + 1] < soff[si][n])
                soff[si][n + 1] = soff[si][n];
        ppool = pool[si];
        poff = soff[si];
    }
    long bi = -1;
    for (long e = poff[0]; e < poff[1]; e++)
        if (bi < 0 || ppool[e].t < ppool[bi].t)
            bi = e;
    if (bi < 0) {
        st = erg_error_set(err, ERG_ENOTFOUND,
                           "no plan fits the memory budget of %.3f GB per device",
                           s->mem_budget / 1e9);
        goto out;
    }
    p->objective_s = ppool[bi].t + s->const_time_s;
    for (int si = S - 1; si >= 0; si--) {
        const dp_cand *c = &pool[si][bi];
        decode(s, &s->segs[si], s->segs[si].ent[c->ey].c, p->k);
        bi = c->ex;
    }
    goto out;
oom:
    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
out:
    for (int si = 0; pool && si < S; si++)
        erg__free(pool[si]);
    for (int si = 0; soff && si < S; si++)
        erg__free(soff[si]);
    erg__free(pool);
    erg__free(soff);
    erg__free(cand);
    return st;
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
    double t0 = erg__shard_now_s();
    erg_status st;
    if (method == ERG_SHARD_ILP) {
        st = erg__shard_search_ilp(s, p, time_limit_s, err);
    } else {
        bool too_big = !s->dp_ready && !s->ve;
        if (!s->dp_ready && s->ve) {
            /* Elimination ignores memory. Its plan is the unconstrained optimum, so when it
             * fits the budget it is also the optimum under the budget; when it does not, the
             * chain DP (which has a memory dimension) and the second pass take over. */
            p->objective_s = erg__shard_ve_search(s, p->k) + s->const_time_s;
            double t, m;
            erg__shard_eval(s, p->k, &t, &m, NULL);
            p->ve = m <= s->mem_budget * (1 + 1e-12);
            too_big = !p->ve;
            st = ERG_OK;
        } else if (s->dp_ready && !s->dp_membind)
            st = search_dp_exact_fast(s, p, err);
        else if (s->dp_ready) {
            /* The budget binds some combinations. First the unconstrained optimum over the
             * entries that fit on their own (the fastest of each key): when the whole plan
             * fits, no plan under the budget is faster, so it is exact without the Pareto
             * fronts (which may be too large). Additive costs only: with imported profiles
             * the plan's memory is the profiles'. */
            bool fits = false, additive = true;
            for (int i = 0; i < s->nseg; i++)
                additive &= !s->segs[i].imported;
            if (additive && search_dp_exact_fast(s, p, err) == ERG_OK) {
                double t, m;
                erg__shard_eval(s, p->k, &t, &m, NULL);
                fits = m <= s->mem_budget * (1 + 1e-12);
            }
            st = fits ? ERG_OK : search_dp_exact_mem(s, p, &too_big, err);
        }
        if (too_big) {
            st = search_dp_chain(s, p, err);
            if (!st)
                p->refined = erg__shard_refine(s, p);
            if (s->ve && (st == ERG_OK || st == ERG_ENOTFOUND)) {
                if (st == ERG_ENOTFOUND)
                    memset(p->k, 0, (size_t)s->norder * sizeof(size_t));
                p->time_s = st ? 0 : 1; /* lagrange: whether p->k holds a plan */
                st = erg__shard_lagrange(s, p, err);
            }
            /* Not guaranteed optimal: also run the block ILP within a time budget and keep
             * the better plan. */
            if (st == ERG_OK || st == ERG_ENOTFOUND) {
                erg_shard_plan *q = NULL;
                erg_error e2;
                if (plan_new(s, ERG_SHARD_ILP, &q) == ERG_OK &&
                    erg__shard_search_ilp(s, q, ERG__MIN(time_limit_s, DP_ILP_BUDGET_S), &e2) ==
                        ERG_OK) {
                    double tq, mq, tp = INFINITY, mp;
                    erg__shard_eval_used(s, q->k, &tq, &mq);
                    if (st == ERG_OK)
                        erg__shard_eval_used(s, p->k, &tp, &mp);
                    if (mq <= s->mem_budget * (1 + 1e-12) && tq < tp) {
                        memcpy(p->k, q->k, (size_t)s->norder * sizeof(size_t));
                        p->objective_s = tq;
                        p->ilp_polished = true;
                        p->exact = !q->timed_out;
                        st = ERG_OK;
                    }
                }
                erg_shard_plan_free(q);
            }
        } else {
            p->exact = true;
        }
    }
    p->search_s = erg__shard_now_s() - t0;
    if (st == ERG_ENOTFOUND && !strncmp(err ? err->msg : "", "no plan fits", 12)) {
        /* Say what the least memory-hungry plan needs (every block at its smallest
         * strategy; with imported profiles, every segment at its smallest row). */
        double need = s->const_mem_bytes;
        for (int si = 0; si < s->nseg; si++) {
            const segment *g = &s->segs[si];
            double mn = INFINITY;
            if (g->imported)
                for (int c = 0; c < g->nkeep; c++)
                    mn = ERG__MIN(mn, g->keep_mem[c]);
            if (!g->imported || !(mn < INFINITY)) {
                mn = 0;
                for (int i = 0; i < g->n; i++) {
                    const pblock *P = &s->pbs[s->order[g->first + i]];
                    double b = INFINITY;
                    for (int k = 0; k < P->K; k++)
                        b = ERG__MIN(b, P->mem_bytes[k]);
                    mn += b;
                }
            }
            need += mn;
        }
        st = erg_error_set(err, ERG_ENOTFOUND,
                           "no plan fits the memory budget of %.3f GB per device: the smallest "
                           "plan needs %.3f GB per device (%.3f GB of it replicated values); "
                           "raise --mem-gb to at least %.3f or use a larger mesh",
                           s->mem_budget / 1e9, need / 1e9, s->const_mem_bytes / 1e9,
                           ceil(need / 1e6) / 1e3);
    }
    if (st) {
        erg_shard_plan_free(p);
        return st;
    }
    plan_finish(s, p);
    *out = p;
    return ERG_OK;
}

erg_status erg_shard_plan_given(erg_shard *s, const size_t *strategies, size_t n,
                                erg_shard_plan **out, erg_error *err)
{
    if (!s || !strategies || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_plan_given: NULL argument");
    *out = NULL;
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "erg_shard_plan_given: run erg_shard_profile first");
    if (n != (size_t)s->norder)
        return erg_error_set(err, ERG_EINVAL, "%zu strategies given for %d blocks", n, s->norder);
    for (size_t i = 0; i < n; i++)
        if (strategies[i] >= (size_t)s->pbs[s->order[i]].K)
            return erg_error_set(err, ERG_EINVAL,
                                 "block %zu (anchor %s): strategy %zu given, it has 0 to %d", i,
                                 s->c->ins[s->pbs[s->order[i]].anchor].name, strategies[i],
                                 s->pbs[s->order[i]].K - 1);
    erg_shard_plan *p;
    if (plan_new(s, ERG_SHARD_GIVEN, &p))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(p->k, strategies, n * sizeof *strategies);
    plan_finish(s, p);
    p->objective_s = p->time_s;
    *out = p;
    return ERG_OK;
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
double erg_shard_plan_time_s(const erg_shard_plan *p)
{
    return p ? p->time_s : 0;
}
double erg_shard_plan_objective_s(const erg_shard_plan *p)
{
    return p ? p->objective_s : 0;
}
double erg_shard_plan_memory_bytes(const erg_shard_plan *p)
{
    return p ? p->mem_bytes : 0;
}
double erg_shard_plan_search_s(const erg_shard_plan *p)
{
    return p ? p->search_s : 0;
}
double erg_shard_plan_tflops(const erg_shard_plan *p)
{
    return p ? p->tflops : 0;
}
bool erg_shard_plan_timed_out(const erg_shard_plan *p)
{
    return p && p->timed_out;
}

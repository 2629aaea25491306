/* perseus_incr.c: the incremental crashing step of the Perseus planner (docs/planner.md,
 * "Incremental crashing").
 *
 * WHAT IT DOES: the same steps as crash_step in perseus.c -- the same cuts, the same flows,
 * the same plans, bit for bit -- without rebuilding CPM, the critical sub-DAG and the flow
 * network for every plan. A step moves a few instructions; this file updates what they move.
 *
 * HOW IT WORKS:
 *  - CPM is kept as earliest starts es and tails (the longest path from an instruction's end
 *    to the iteration's end; lf = T - tail, which does not depend on T). After a step only the
 *    successors of the instructions whose duration or es changed are recomputed (in
 *    topological order, while values change), likewise the tails backwards.
 *  - Every instruction is in a bucket by the length L = es + d + tail of the longest path
 *    through it; T is the highest non-empty bucket and the critical instructions are those
 *    with L = T. Only the instructions whose L changed, and those entering or leaving the
 *    bucket T when T moves, change criticality; only their arcs are checked again.
 *  - The flow network persists. Every possible arc has a fixed ordinal -- the position at
 *    which crash_step would add it (op arc of x, then x's dependencies, x ascending; then the
 *    source/sink dummies) -- and each node's arc list is kept in descending ordinal, which is
 *    the order erg__flow_add's head insertion gives crash_step's lists. Dinic's algorithm
 *    then sees the same lists and the same residual capacities and pushes the same flows.
 *    An arc that stays critical with the same bounds keeps its flow, which is what the warm
 *    start would give it (its flow from the last solve, already within its bounds); arcs
 *    that enter, leave or change bounds are patched and the node imbalances updated, so the
 *    repair arcs are those of crash_step, added in ascending node order.
 *  - A warm start that fails (a repair arc left unsaturated) falls back to crash_step's cold
 *    and two-phase solves on arc lists written from the persistent arcs, then rebuilds the
 *    network from the resulting flow.
 * The full pass (crash_step) stays selectable (ERGON_PERSEUS_FULL_PASS=1) and
 * tests/unit/test_perseus_incr.c compares the two. */
#include "planner/perseus_crash.h"
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct erg__crash_inc {
    int nord;          /* n + E + 2n possible arcs */
    int *au, *av;      /* [nord] endpoints (flow nodes) of each possible arc */
    int *akey;         /* [nord] key into prev_flow */
    unsigned char *active; /* [nord] in the network now */
    int64_t *alb, *aub;    /* [nord] bounds of the active arcs */
    int *edge_src;     /* [E] tail instruction of dependency j */
    int *pred_edge;    /* [E] dependency index of predecessor entry k */
    int *pos;          /* [n] position in the topological order */
    long *tail;        /* [n] longest path from the end of x to the iteration's end */
    long *L;           /* [n] es + d + tail */
    int nb;            /* buckets 0 .. nb - 1 */
    int *bhead, *bnext, *bprev; /* buckets of instructions by L */
    unsigned char *crit;   /* [n] L == T */
    int64_t *im;       /* [2n + 4] imbalance of the real arcs' flow */
    int *touched;      /* nodes whose imbalance may be non-zero */
    unsigned char *tflag;
    int ntouched;
    int *chg;          /* instructions whose arcs are checked again */
    unsigned char *cflag;
    int nchg;
    unsigned char *fdirty, *bdirty; /* [n] by topological position */
} erg__crash_inc;

static long dep_lag(const crash_state *cs, int x, int y)
{
    return cs->lag && cs->g.rank[x] != cs->g.rank[y] ? cs->lag : 0;
}

/* ---- the persistent network ---- */

static void touch(erg__crash_inc *in, int v)
{
    if (!in->tflag[v]) {
        in->tflag[v] = 1;
        in->touched[in->ntouched++] = v;
    }
}

/* Link arc index a (ordinal a >> 1) into node u's list, which is in descending ordinal. */
static void link_arc(erg__flow *f, int u, int a)
{
    int *head = f->head, *next = f->next;
    int p = head[u], o = a >> 1;
    if (p < 0 || (p >> 1) < o) {
        next[a] = p;
        head[u] = a;
        return;
    }
    while (next[p] >= 0 && (next[p] >> 1) > o)
        p = next[p];
    next[a] = next[p];
    next[p] = a;
}

static void unlink_arc(erg__flow *f, int u, int a)
{
    int *head = f->head, *next = f->next;
    if (head[u] == a) {
        head[u] = next[a];
        return;
    }
    int p = head[u];
    while (next[p] != a)
        p = next[p];
    next[p] = next[a];
}

/* Flow g on arc o; adds it to the imbalances. */
static void set_flow(crash_state *cs, int o, int64_t g)
{
    erg__crash_inc *in = cs->inc;
    int a = 2 * o, u = in->au[o], v = in->av[o];
    cs->flow.res[a] = in->aub[o] - g;
    cs->flow.res[a + 1] = g - in->alb[o];
    in->im[v] += g;
    in->im[u] -= g;
    touch(in, u);
    touch(in, v);
}

static int64_t clamp_flow(int64_t pf, int64_t lb, int64_t ub)
{
    return pf < lb ? lb : pf > ub ? ub : pf;
}

static void arc_insert(crash_state *cs, int o, int64_t lb, int64_t ub)
{
    erg__crash_inc *in = cs->inc;
    int a = 2 * o;
    in->active[o] = 1;
    in->alb[o] = lb;
    in->aub[o] = ub;
    cs->flow.to[a] = in->av[o];
    cs->flow.to[a + 1] = in->au[o];
    set_flow(cs, o, clamp_flow(cs->prev_flow[in->akey[o]], lb, ub));
    link_arc(&cs->flow, in->au[o], a);
    link_arc(&cs->flow, in->av[o], a + 1);
}

/* The flow of an active arc now (it is what crash_step would store in prev_flow). */
static int64_t arc_flow(const crash_state *cs, int o)
{
    return cs->inc->alb[o] + cs->flow.res[2 * o + 1];
}

static void arc_remove(crash_state *cs, int o)
{
    erg__crash_inc *in = cs->inc;
    int64_t g = arc_flow(cs, o);
    cs->prev_flow[in->akey[o]] = g;
    set_flow(cs, o, -g); /* subtracts g from the imbalances; residuals are dead now */
    in->active[o] = 0;
    unlink_arc(&cs->flow, in->au[o], 2 * o);
    unlink_arc(&cs->flow, in->av[o], 2 * o + 1);
}

/* Arc o should be in the network (with bounds lb, ub) iff want. */
static void arc_want(crash_state *cs, int o, int want, int64_t lb, int64_t ub)
{
    erg__crash_inc *in = cs->inc;
    if (!in->active[o]) {
        if (want)
            arc_insert(cs, o, lb, ub);
        return;
    }
    if (!want) {
        arc_remove(cs, o);
        return;
    }
    if (in->alb[o] != lb || in->aub[o] != ub) {
        int64_t g0 = arc_flow(cs, o);
        cs->prev_flow[in->akey[o]] = g0;
        set_flow(cs, o, -g0);
        in->alb[o] = lb;
        in->aub[o] = ub;
        set_flow(cs, o, clamp_flow(g0, lb, ub));
    }
}

/* Re-check every arc that touches instruction x: its op arc, its dependencies both ways,
 * its source/sink dummies (the conditions of crash_step). */
static void check_arcs(crash_state *cs, int x)
{
    erg__crash_inc *in = cs->inc;
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n, E = g->num_edges;
    const long T = cs->T;
    const long *es = cs->es, *tail = in->tail;
    const int *d = cs->d;
    const unsigned char *crit = in->crit;
    int cx = crit[x];
    {
        const op_spec *sp = &cs->specs[cs->spec_of[x]];
        size_t i = (size_t)(d[x] - sp->min_q);
        int64_t lb = sp->lb[i], ub = sp->ub[i];
        arc_want(cs, x + g->succ_off[x], cx, lb, ub > lb ? ub : lb);
    }
    for (int j = g->succ_off[x]; j < g->succ_off[x + 1]; j++) {
        int y = g->succ[j];
        int want = cx && es[x] + d[x] + dep_lag(cs, x, y) + d[y] + tail[y] == T;
        arc_want(cs, x + 1 + j, want, 0, cs->inf);
    }
    for (int k = g->pred_off[x]; k < g->pred_off[x + 1]; k++) {
        int p = g->pred[k], j = in->pred_edge[k];
        int want = crit[p] && es[p] + d[p] + dep_lag(cs, p, x) + d[x] + tail[x] == T;
        arc_want(cs, p + 1 + j, want, 0, cs->inf);
    }
    int ne = n + E;
    if (cs->ends[x] & ERG__NO_PRED)
        arc_want(cs, ne + 2 * x, cx, 0, cs->inf);
    if (cs->ends[x] & ERG__NO_SUCC)
        arc_want(cs, ne + 2 * x + 1, cx && es[x] + d[x] == T, 0, cs->inf);
}

/* The network from scratch: every active arc with the flow prev_flow (clamped). */
static void rebuild_network(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    const int n = cs->n;
    erg__flow_reset(&cs->flow, 2 * n + 4);
    memset(in->im, 0, sizeof(int64_t) * (size_t)(2 * n + 4));
    for (int i = 0; i < in->ntouched; i++)
        in->tflag[in->touched[i]] = 0;
    in->ntouched = 0;
    for (int o = 0; o < in->nord; o++)
        if (in->active[o])
            arc_insert(cs, o, in->alb[o], in->aub[o]);
    cs->flow.arcs = 2 * in->nord;
}

/* ---- CPM and criticality ---- */

static void bucket_put(erg__crash_inc *in, int x, long l)
{
    int b = (int)l;
    in->L[x] = l;
    in->bprev[x] = -1;
    in->bnext[x] = in->bhead[b];
    if (in->bhead[b] >= 0)
        in->bprev[in->bhead[b]] = x;
    in->bhead[b] = x;
}

static void bucket_take(erg__crash_inc *in, int x)
{
    int b = (int)in->L[x];
    if (in->bprev[x] >= 0)
        in->bnext[in->bprev[x]] = in->bnext[x];
    else
        in->bhead[b] = in->bnext[x];
    if (in->bnext[x] >= 0)
        in->bprev[in->bnext[x]] = in->bprev[x];
}

static void mark_chg(erg__crash_inc *in, int x)
{
    if (!in->cflag[x]) {
        in->cflag[x] = 1;
        in->chg[in->nchg++] = x;
    }
}

void erg__crash_incr_free(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    if (!in)
        return;
    erg__free(in->au);
    erg__free(in->av);
    erg__free(in->akey);
    erg__free(in->active);
    erg__free(in->alb);
    erg__free(in->aub);
    erg__free(in->edge_src);
    erg__free(in->pred_edge);
    erg__free(in->pos);
    erg__free(in->tail);
    erg__free(in->L);
    erg__free(in->bhead);
    erg__free(in->bnext);
    erg__free(in->bprev);
    erg__free(in->crit);
    erg__free(in->im);
    erg__free(in->touched);
    erg__free(in->tflag);
    erg__free(in->chg);
    erg__free(in->cflag);
    erg__free(in->fdirty);
    erg__free(in->bdirty);
    erg__free(in);
    cs->inc = NULL;
}

int erg__crash_incr_init(crash_state *cs, long t_max)
{
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n, E = g->num_edges, nn = 2 * n + 4;
    erg__crash_inc *in = erg__calloc(1, sizeof(*in));
    cs->inc = in;
    if (!in || t_max < 0 || t_max > 100000000)
        return -1;
    in->nord = n + E + 2 * n;
    in->nb = (int)t_max + 1;
    size_t no = (size_t)in->nord, un = (size_t)n, ue = (size_t)(E ? E : 1);
    in->au = erg__malloc(sizeof(int) * no);
    in->av = erg__malloc(sizeof(int) * no);
    in->akey = erg__malloc(sizeof(int) * no);
    in->active = erg__calloc(no, 1);
    in->alb = erg__calloc(no, sizeof(int64_t));
    in->aub = erg__calloc(no, sizeof(int64_t));
    in->edge_src = erg__malloc(sizeof(int) * ue);
    in->pred_edge = erg__malloc(sizeof(int) * ue);
    in->pos = erg__malloc(sizeof(int) * un);
    in->tail = erg__malloc(sizeof(long) * un);
    in->L = erg__malloc(sizeof(long) * un);
    in->bhead = erg__malloc(sizeof(int) * (size_t)in->nb);
    in->bnext = erg__malloc(sizeof(int) * un);
    in->bprev = erg__malloc(sizeof(int) * un);
    in->crit = erg__calloc(un, 1);
    in->im = erg__calloc((size_t)nn, sizeof(int64_t));
    in->touched = erg__malloc(sizeof(int) * (size_t)nn);
    in->tflag = erg__calloc((size_t)nn, 1);
    in->chg = erg__malloc(sizeof(int) * un);
    in->cflag = erg__calloc(un, 1);
    in->fdirty = erg__calloc(un, 1);
    in->bdirty = erg__calloc(un, 1);
    if (!in->au || !in->av || !in->akey || !in->active || !in->alb || !in->aub ||
        !in->edge_src || !in->pred_edge || !in->pos || !in->tail || !in->L || !in->bhead ||
        !in->bnext || !in->bprev || !in->crit || !in->im || !in->touched || !in->tflag ||
        !in->chg || !in->cflag || !in->fdirty || !in->bdirty)
        return -1;
    const int SRC = 2 * n, SNK = 2 * n + 1, ne = n + E;
    for (int x = 0; x < n; x++) {
        int o = x + g->succ_off[x];
        in->au[o] = 2 * x;
        in->av[o] = 2 * x + 1;
        in->akey[o] = x;
        for (int j = g->succ_off[x]; j < g->succ_off[x + 1]; j++) {
            in->edge_src[j] = x;
            in->au[x + 1 + j] = 2 * x + 1;
            in->av[x + 1 + j] = 2 * g->succ[j];
            in->akey[x + 1 + j] = n + j;
        }
        in->au[ne + 2 * x] = SRC;
        in->av[ne + 2 * x] = 2 * x;
        in->akey[ne + 2 * x] = n + E + x;
        in->au[ne + 2 * x + 1] = 2 * x + 1;
        in->av[ne + 2 * x + 1] = SNK;
        in->akey[ne + 2 * x + 1] = n + E + n + x;
    }
    /* predecessor entry k of y -> the dependency j (p -> y); parallel edges in order */
    for (int y = 0; y < n; y++)
        for (int k = g->pred_off[y]; k < g->pred_off[y + 1]; k++) {
            int p = g->pred[k], j = g->succ_off[p];
            while (j < g->succ_off[p + 1] &&
                   (g->succ[j] != y ||
                    (k > g->pred_off[y] && g->pred[k - 1] == p && j <= in->pred_edge[k - 1])))
                j++;
            if (j == g->succ_off[p + 1])
                return -1;
            in->pred_edge[k] = j;
        }
    for (int k = 0; k < n; k++)
        in->pos[g->topo[k]] = k;
    for (int b = 0; b < in->nb; b++)
        in->bhead[b] = -1;
    for (int x = 0; x < n; x++) {
        in->tail[x] = cs->T - cs->lf[x];
        long l = cs->es[x] + cs->d[x] + in->tail[x];
        if (l < 0 || l >= in->nb)
            return -1;
        bucket_put(in, x, l);
        in->crit[x] = l == cs->T;
    }
    erg__flow_reset(&cs->flow, 2 * n + 4);
    for (int x = 0; x < n; x++)
        check_arcs(cs, x);
    rebuild_network(cs);
    return 0;
}

/* After the durations of the moved instructions changed: es and tails, buckets, T,
 * criticality and the arcs of every instruction concerned. */
static void propagate(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n;
    const int *topo = g->topo, *pos = in->pos;
    const int *succ_off = g->succ_off, *succ = g->succ, *pred_off = g->pred_off, *pred = g->pred;
    const int *d = cs->d;
    long *es = cs->es, *tail = in->tail;
    unsigned char *fd = in->fdirty, *bd = in->bdirty;
    int flo = n, fhi = -1, blo = n, bhi = -1;
    for (int s = 0; s < 2; s++) {
        const int *lst = s ? cs->lengthen : cs->shorten;
        int cnt = s ? cs->nlengthen : cs->nshorten;
        for (int i = 0; i < cnt; i++) {
            int x = lst[i];
            mark_chg(in, x);
            for (int j = succ_off[x]; j < succ_off[x + 1]; j++) {
                int p = pos[succ[j]];
                fd[p] = 1;
                flo = p < flo ? p : flo;
                fhi = p > fhi ? p : fhi;
            }
            for (int k = pred_off[x]; k < pred_off[x + 1]; k++) {
                int p = pos[pred[k]];
                bd[p] = 1;
                blo = p < blo ? p : blo;
                bhi = p > bhi ? p : bhi;
            }
        }
    }
    for (int p = flo; p <= fhi; p++) {
        if (!fd[p])
            continue;
        fd[p] = 0;
        int u = topo[p];
        long s = 0;
        for (int k = pred_off[u]; k < pred_off[u + 1]; k++) {
            int q = pred[k];
            long f = es[q] + d[q] + dep_lag(cs, q, u);
            s = f > s ? f : s;
        }
        if (s == es[u])
            continue;
        es[u] = s;
        mark_chg(in, u);
        for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
            int q = pos[succ[j]];
            fd[q] = 1;
            fhi = q > fhi ? q : fhi;
        }
    }
    for (int p = bhi; p >= blo; p--) {
        if (!bd[p])
            continue;
        bd[p] = 0;
        int u = topo[p];
        long t = 0;
        for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
            int v = succ[j];
            long f = d[v] + dep_lag(cs, u, v) + tail[v];
            t = f > t ? f : t;
        }
        if (t == tail[u])
            continue;
        tail[u] = t;
        mark_chg(in, u);
        for (int k = pred_off[u]; k < pred_off[u + 1]; k++) {
            int q = pos[pred[k]];
            bd[q] = 1;
            blo = q < blo ? q : blo;
        }
    }
    /* buckets and T */
    const long T0 = cs->T;
    long top = T0;
    int nc0 = in->nchg;
    for (int i = 0; i < nc0; i++) {
        int x = in->chg[i];
        long l = es[x] + d[x] + tail[x];
        if (l != in->L[x]) {
            bucket_take(in, x);
            bucket_put(in, x, l);
        }
        top = l > top ? l : top;
    }
    while (top > 0 && in->bhead[top] < 0)
        top--;
    cs->T = top;
    if (top != T0) {
        for (int x = in->bhead[top]; x >= 0; x = in->bnext[x])
            mark_chg(in, x);
        if (top > T0)
            for (int x = in->bhead[T0]; x >= 0; x = in->bnext[x])
                mark_chg(in, x);
    }
    for (int i = 0; i < in->nchg; i++) {
        int x = in->chg[i];
        in->crit[x] = in->L[x] == top;
    }
    for (int i = 0; i < in->nchg; i++) {
        int x = in->chg[i];
        check_arcs(cs, x);
        in->cflag[x] = 0;
    }
    in->nchg = 0;
    /* cs->lf is not kept: nothing reads it on this path */
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void sort_ints(int *v, int k)
{
    if (k > 24) {
        qsort(v, (size_t)k, sizeof(int), cmp_int);
        return;
    }
    for (int i = 1; i < k; i++) {
        int c = v[i], j = i - 1;
        while (j >= 0 && v[j] > c) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = c;
    }
}

/* crash_step's fallback: the cold and two-phase solves on arc lists written from the
 * active arcs (in ordinal order, which is crash_step's), then its cut reading. Returns
 * the number of instructions to shorten (lists in cs) or -1 when the loop ends. */
static int fallback_cut(crash_state *cs, int *nl_out)
{
    erg__crash_inc *in = cs->inc;
    const int n = cs->n, SNK = 2 * n + 1;
    int narcs = 0, ncrit = 0;
    for (int x = 0; x < n; x++)
        if (in->crit[x])
            cs->crit[ncrit++] = x;
    for (int o = 0; o < in->nord; o++)
        if (in->active[o]) {
            cs->arc_u[narcs] = in->au[o];
            cs->arc_v[narcs] = in->av[o];
            cs->arc_key[narcs] = in->akey[o];
            cs->arc_lb[narcs] = in->alb[o];
            cs->arc_ub[narcs] = in->aub[o];
            narcs++;
        }
    cs->narcs = narcs;
    cs->ncrit = ncrit;
    if (!erg__crash_solve_cut(cs, CUT_COLD) && !erg__crash_solve_cut(cs, CUT_TWO_PHASE))
        return -1;
    const unsigned char *reach = cs->reach;
    int infinite = 0;
    for (int k = 0; k < narcs; k++) {
        int key = cs->arc_key[k], u = cs->arc_u[k], v = cs->arc_v[k];
        cs->prev_flow[key] = cs->arc_lb[k] + cs->flow.res[2 * k + 1];
        infinite |= (key >= n) & reach[u] & ((v == SNK) | (reach[v] ^ 1));
    }
    if (infinite)
        return -1;
    int ns = 0, nl = 0;
    for (int c = 0; c < ncrit; c++) {
        int x = cs->crit[c];
        int rin = reach[2 * x], rout = reach[2 * x + 1];
        cs->shorten[ns] = x;
        ns += rin & (rout ^ 1);
        cs->lengthen[nl] = x;
        nl += (rin ^ 1) & rout;
    }
    /* the persistent network from this flow, for the next steps */
    rebuild_network(cs);
    for (int v = 0; v < 2 * n; v++)
        if (in->im[v])
            touch(in, v);
    *nl_out = nl;
    return ns;
}

int erg__crash_incr_step(crash_state *cs, double *cost_change)
{
    erg__crash_inc *in = cs->inc;
    erg__flow *f = &cs->flow;
    const int n = cs->n, SRC = 2 * n, SNK = 2 * n + 1;
    /* repair arcs at the nodes out of balance, ascending */
    sort_ints(in->touched, in->ntouched);
    f->arcs = 2 * in->nord;
    const int first = f->arcs;
    for (int i = 0; i < in->ntouched; i++) {
        int v = in->touched[i];
        in->tflag[v] = 0;
        if (v >= 2 * n)
            continue;
        if (in->im[v] > 0)
            erg__flow_add(f, SRC, v, in->im[v]);
        else if (in->im[v] < 0)
            erg__flow_add(f, v, SNK, -in->im[v]);
    }
    in->ntouched = 0;
    const int last = f->arcs;
    erg__flow_max(f, SRC, SNK);
    int ok = 1;
    for (int a = first; a < last; a += 2)
        ok &= f->res[a] <= 1; /* ERG__FEAS_MAX_DEFICIT */
    int ns, nl = 0;
    if (ok) {
        cs->warm_ok++;
        /* take the repair arcs out (last added first); what they left unsaturated is the
         * real arcs' imbalance now */
        for (int a = last - 2; a >= first; a -= 2) {
            int u = f->to[a + 1], v = f->to[a];
            f->head[v] = f->next[a + 1];
            f->head[u] = f->next[a];
            int x = u == SRC ? v : u;
            in->im[x] = u == SRC ? f->res[a] : -f->res[a];
            if (in->im[x])
                touch(in, x);
        }
        f->arcs = first;
        /* the cut: the nodes the max flow's last search reached */
        const int *level = f->level, *q = f->queue, *head = f->head, *next = f->next,
                  *to = f->to;
        const int nq = f->nreach, lim = 2 * in->nord;
        int infinite = 0;
        ns = 0;
        for (int i = 0; i < nq; i++) {
            int u = q[i];
            for (int a = head[u]; a >= 0; a = next[a]) {
                if ((a & 1) || a >= lim || in->akey[a >> 1] < n)
                    continue;
                int v = to[a];
                infinite |= (v == SNK) | (level[v] < 0);
            }
            if (u < 2 * n) {
                int x = u >> 1;
                if (!(u & 1) && level[u + 1] < 0)
                    cs->shorten[ns++] = x;
                else if ((u & 1) && level[u - 1] < 0)
                    cs->lengthen[nl++] = x;
            }
        }
        if (infinite)
            return 0;
        sort_ints(cs->shorten, ns);
        sort_ints(cs->lengthen, nl);
    } else {
        cs->warm_fail++;
        ns = fallback_cut(cs, &nl);
        if (ns < 0)
            return 0;
    }
    if (ns == 0)
        return 0;
    if (!erg__crash_apply(cs, ns, nl, cost_change))
        return 0;
    propagate(cs);
    return 1;
}

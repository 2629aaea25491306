/* perseus_incr.c: the crashing step of the Perseus planner on a persistent flow network
 * (docs/planner.md, "Incremental crashing").
 *
 * WHAT IT DOES: the same steps as crash_step in perseus.c -- the same cuts, the same plans,
 * bit for bit -- without rebuilding the flow network for every plan: a step moves a few
 * instructions, and only the arcs whose criticality or bounds changed are patched.
 *
 * HOW IT WORKS:
 *  - The flow network persists. Every possible arc has a fixed ordinal -- the position at
 *    which crash_step would add it (op arc of x, then x's dependencies, x ascending; then the
 *    source/sink dummies) -- and each node's arc list is kept in descending ordinal, which is
 *    the order erg__flow_add's head insertion gives crash_step's lists. Dinic's algorithm
 *    then sees the same lists and the same residual capacities and pushes the same flows.
 *    An arc that stays critical with the same bounds keeps its flow, which is what the warm
 *    start would give it (its flow from the last solve, already within its bounds); arcs
 *    that enter, leave or change bounds are patched and the node imbalances updated, so the
 *    repair arcs are those of crash_step, added in ascending node order.
 *  - The cut is read off the max flow's last search: the nodes it reached (not a pass over
 *    every node), and the infinite arcs crossing it are among their saturated arcs.
 *  - The cut is kept across steps (extend_cut): when the patches since the last max flow left
 *    the flow balanced and only opened residual arcs out of the reached set (no residual out
 *    of a reached node lost), the new reached set is the old one plus what a search from the
 *    opened arcs reaches. If that search misses the sink, the flow is still maximum (Dinic's
 *    algorithm would push nothing) and no max flow runs; if it hits the sink, one augmenting
 *    path (the search's parents, then down the kept levels) is pushed and Dinic's algorithm
 *    finishes. That path makes the flow differ from crash_step's; the cut does not: capacities
 *    are integers and the flow is balanced, so the nodes reachable after any maximum flow are
 *    the source side of the unique minimal minimum cut. The next warm start then starts from
 *    another flow; its cut is again that unique set whenever the repair arcs end saturated
 *    (docs/planner.md, "Incremental crashing", says what is and is not proven).
 *  - CPM after a step recomputes only what the step can have moved (perseus_incr_cpm.c), and
 *    marks the instructions whose arcs may change: the arc scan visits only those (exact tests,
 *    not a guess: about 26 of 1,536 per step on gpt3-175b M = 96).
 *  - A warm start that fails (a repair arc left unsaturated) falls back to crash_step's cold
 *    and two-phase solves on arc lists written from the persistent arcs, then rebuilds the
 *    network from the resulting flow.
 * The full pass (crash_step) stays selectable (ERGON_PERSEUS_FULL_PASS=1) and
 * tests/unit/test_perseus_incr.c compares the two. */
#include "planner/perseus_incr.h"
#include "core/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

/* erg__perseus_incr_cut_stats (a test hook); atomic: plans may run in several threads at once */
static atomic_long stat_kept, stat_pushed, stat_probed_hit, stat_probed_kept, stat_replayed;

/* In the residual graph the max flow's last search reached (the cut kept), node v. */
static int in_cut(const crash_state *cs, int v)
{
    return cs->flow.level[v] >= 0;
}

/* Whether residuals ra (u -> v) and rb (v -> u) of an arc that had ra0, rb0 may change the
 * set reached from the source: a residual out of a reached node lost, or one that leads
 * from a reached node to an unreached one. */
static void add_front(erg__crash_inc *in, int a)
{
    if (in->nfront < in->nfront_max)
        in->front[in->nfront] = a;
    in->nfront++;
}

static int moves_cut(const crash_state *cs, int o, int64_t ra0, int64_t rb0, int64_t ra, int64_t rb)
{
    erg__crash_inc *in = cs->inc;
    int u = in->au[o], v = in->av[o];
    int su = in_cut(cs, u), sv = in_cut(cs, v);
    if (su && ra > 0 && !sv)
        add_front(in, 2 * o);
    if (sv && rb > 0 && !su)
        add_front(in, 2 * o + 1);
    return (su && ra0 > 0 && ra == 0) || (sv && rb0 > 0 && rb == 0);
}

/* The kept cut after patches that only opened residual arcs out of it (cut_valid, !moved,
 * no repair arc): the nodes reachable from the front through unreached nodes join it (level
 * 0, appended to the flow's queue, as a search from the source would reach them). Returns 0
 * when the sink is among them (an augmenting path: the max flow must run) or the front
 * overflowed; the level marks are then stale and erg__flow_max rewrites them. */
static int extend_cut(crash_state *cs, int snk)
{
    erg__crash_inc *in = cs->inc;
    erg__flow *f = &cs->flow;
    if (in->nfront > in->nfront_max)
        return 0;
    int *level = f->level, *queue = f->queue, *par = f->iter;
    const int *head = f->head, *next = f->next, *to = f->to;
    int64_t *res = f->res;
    unsigned char *inr = in->inr;
    const int q0 = f->nreach;
    int qh = q0, qt = q0, hit = -1;
    for (int i = 0; i < in->nfront && hit < 0; i++) {
        int a = in->front[i], v = to[a];
        if (level[v] < 0) {
            level[v] = level[to[a ^ 1]] + 1;
            par[v] = a;
            inr[v] = 1;
            queue[qt++] = v;
            if (v == snk)
                hit = v;
        }
    }
    while (qh < qt && hit < 0) {
        int u = queue[qh++];
        for (int a = head[u]; a >= 0; a = next[a]) {
            int v = to[a];
            if (res[a] > 0 && level[v] < 0) {
                level[v] = level[u] + 1;
                par[v] = a;
                inr[v] = 1;
                queue[qt++] = v;
                if (v == snk) {
                    hit = v;
                    break;
                }
            }
        }
    }
    if (hit >= 0) {
        /* the path: parent arcs through the new nodes, then down the levels of the kept
         * cut (every residual in it is still there) to the source */
        int *path = f->stack, np = 0, v = hit;
        while (inr[v]) {
            int a = par[v];
            path[np++] = a;
            v = to[a ^ 1];
        }
        while (level[v] > 0) {
            int a = head[v];
            for (; a >= 0; a = next[a]) /* a: v -> w; its reverse w -> v */
                if (res[a ^ 1] > 0 && level[to[a]] == level[v] - 1)
                    break;
            if (a < 0) { /* cannot happen (no residual in the cut was lost); push nothing */
                np = 0;
                break;
            }
            path[np++] = a ^ 1;
            v = to[a];
        }
        int64_t push = np ? INT64_MAX : 0;
        for (int i = 0; i < np; i++)
            if (res[path[i]] < push)
                push = res[path[i]];
        for (int i = 0; i < np; i++) {
            res[path[i]] -= push;
            res[path[i] ^ 1] += push;
        }
    }
    for (int i = q0; i < qt; i++)
        inr[queue[i]] = 0;
    if (hit >= 0) {
        atomic_fetch_add_explicit(&stat_pushed, 1, memory_order_relaxed);
        return 0;
    }
    atomic_fetch_add_explicit(&stat_kept, 1, memory_order_relaxed);
    f->nreach = qt;
    return 1;
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
    in->moved |= moves_cut(cs, o, 0, 0, cs->flow.res[a], cs->flow.res[a + 1]);
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
    in->moved |= moves_cut(cs, o, cs->flow.res[2 * o], cs->flow.res[2 * o + 1], 0, 0);
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
        int64_t ra0 = cs->flow.res[2 * o], rb0 = cs->flow.res[2 * o + 1];
        cs->prev_flow[in->akey[o]] = g0;
        set_flow(cs, o, -g0);
        in->alb[o] = lb;
        in->aub[o] = ub;
        set_flow(cs, o, clamp_flow(g0, lb, ub));
        in->moved |= moves_cut(cs, o, ra0, rb0, cs->flow.res[2 * o], cs->flow.res[2 * o + 1]);
    }
}

/* The op arc of x in the network iff want, with the bounds of x's duration. */
static void op_arc(crash_state *cs, int x, int want)
{
    const op_spec *sp = &cs->specs[cs->spec_of[x]];
    size_t i = (size_t)(cs->d[x] - sp->min_q);
    int64_t lb = sp->lb[i], ub = sp->ub[i];
    arc_want(cs, x + cs->g.succ_off[x], want, lb, ub > lb ? ub : lb);
}

/* Every arc wanted or not by this plan's CPM (the conditions of crash_step), patched where
 * the network differs. x is critical iff es + td = T (crash_step's es = lf - d with
 * lf = T - td + d), a dependency x -> y iff also es[x] + d[x] + lag + td[y] = T.
 * An instruction neither critical now nor in the network (its op arc inactive) is skipped:
 * its dependency and source/sink arcs were wanted only with the op arc, so none is active
 * and none is wanted. */
static inline void scan_arcs_in(crash_state *cs, int all, const int flat)
{
    erg__crash_inc *in = cs->inc;
    unsigned char *dirty = in->dirty;
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n, E = g->num_edges;
    const long T = cs->T, lag = cs->lag;
    const long *es = cs->es, *td = in->td;
    const int *d = cs->d, *rank = g->rank, *succ_off = g->succ_off, *succ = g->succ;
    const unsigned char *active = in->active, *ends = cs->ends;
    const int64_t inf = cs->inf;
    for (int x = 0; x < n; x++) {
        if (!all) {
            /* a few marks among hundreds: skip 8 unmarked at a time (padded to a multiple of 8) */
            if (!(x & 7)) {
                uint64_t w;
                memcpy(&w, dirty + x, sizeof w);
                if (!w) {
                    x += 7;
                    continue;
                }
            }
            if (!dirty[x])
                continue;
        }
        dirty[x] = 0;
        const long esx = flat ? es[x] : es_at(in, es, x), ef = esx + d[x];
        const int cx = esx + (flat ? td[x] : td_at(in, x)) == T;
        int o = x + succ_off[x];
        if (!cx && !active[o])
            continue;
        if (active[o] != cx)
            op_arc(cs, x, cx);
        if (lag == 0) {
            for (int j = succ_off[x]; j < succ_off[x + 1]; j++) {
                int y = succ[j];
                int want = cx & (ef + (flat ? td[y] : td_at(in, y)) == T);
                if (active[x + 1 + j] != want)
                    arc_want(cs, x + 1 + j, want, 0, inf);
            }
        } else {
            for (int j = succ_off[x]; j < succ_off[x + 1]; j++) {
                int y = succ[j];
                long l = rank[x] != rank[y] ? lag : 0;
                int want = cx & (ef + l + (flat ? td[y] : td_at(in, y)) == T);
                if (active[x + 1 + j] != want)
                    arc_want(cs, x + 1 + j, want, 0, inf);
            }
        }
        if (ends[x]) {
            int ne = n + E;
            if ((ends[x] & ERG__NO_PRED) && active[ne + 2 * x] != cx)
                arc_want(cs, ne + 2 * x, cx, 0, inf);
            int ws = cx && ef == T;
            if ((ends[x] & ERG__NO_SUCC) && active[ne + 2 * x + 1] != ws)
                arc_want(cs, ne + 2 * x + 1, ws, 0, inf);
        }
    }
}

/* es and td read directly where no offset is in use (the whole-span CPM), else through them. */
static void scan_arcs(crash_state *cs, int all)
{
    if (cs->inc->flat)
        scan_arcs_in(cs, all, 1);
    else
        scan_arcs_in(cs, all, 0);
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

void erg__crash_incr_free(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    if (!in)
        return;
    erg__free(in->active);
    erg__incr_cpm_free(in);
    erg__free(in->touched);
    erg__free(in->tflag);
    erg__free(in->front);
    erg__free(in->inr);
    erg__free(in);
    cs->inc = NULL;
}

int erg__crash_incr_init(crash_state *cs)
{
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n, E = g->num_edges, nn = 2 * n + 4;
    erg__crash_inc *in = erg__calloc(1, sizeof(*in));
    cs->inc = in;
    if (!in)
        return -1;
    in->nord = n + E + 2 * n;
    size_t no = (size_t)in->nord;
    in->au = cs->arc_u;
    in->av = cs->arc_v;
    in->akey = cs->arc_key;
    in->alb = cs->arc_lb;
    in->aub = cs->arc_ub;
    in->im = cs->im;
    memset(in->im, 0, sizeof(int64_t) * (size_t)nn);
    in->active = erg__calloc(no, 1);
    in->touched = erg__malloc(sizeof(int) * (size_t)nn);
    in->tflag = erg__calloc((size_t)nn, 1);
    in->nfront_max = nn;
    in->front = erg__malloc(sizeof(int) * (size_t)nn);
    in->inr = erg__calloc((size_t)nn, 1);
    if (!in->active || !in->front || !in->inr || !in->touched || !in->tflag ||
        erg__incr_cpm_init(cs))
        return -1;
    const int SRC = 2 * n, SNK = 2 * n + 1, ne = n + E;
    for (int x = 0; x < n; x++) {
        int o = x + g->succ_off[x];
        in->au[o] = 2 * x;
        in->av[o] = 2 * x + 1;
        in->akey[o] = x;
        for (int j = g->succ_off[x]; j < g->succ_off[x + 1]; j++) {
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
    /* the network of the initial CPM (cs->es, lf, T): prev_flow is all 0, so every arc
     * starts at its lower bound, as crash_step's first warm start */
    erg__flow_reset(&cs->flow, nn);
    scan_arcs(cs, 1);
    cs->flow.arcs = 2 * in->nord;
    return 0;
}

/* Tests: take the fallback (cold, then two-phase) at every k-th step as if the warm start
 * had failed (0 = never). */
static int force_fallback_every = 0;

void erg__perseus_incr_force_fallback(int every)
{
    force_fallback_every = every;
}

void erg__perseus_incr_cut_stats(long *kept, long *pushed, long *probed_hit, long *probed_kept,
                                 long *replayed)
{
    *kept = atomic_load_explicit(&stat_kept, memory_order_relaxed);
    *pushed = atomic_load_explicit(&stat_pushed, memory_order_relaxed);
    *probed_hit = atomic_load_explicit(&stat_probed_hit, memory_order_relaxed);
    *probed_kept = atomic_load_explicit(&stat_probed_kept, memory_order_relaxed);
    *replayed = atomic_load_explicit(&stat_replayed, memory_order_relaxed);
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
static int fallback_lists(crash_state *cs, int *nl_out)
{
    erg__crash_inc *in = cs->inc;
    const int n = cs->n, SNK = 2 * n + 1;
    int narcs = 0, ncrit = 0;
    erg__incr_flatten(cs);
    for (int x = 0; x < n; x++) /* the window CPM keeps td; lf for crash_step's code */
        cs->lf[x] = cs->T - in->td[x] + cs->d[x];
    for (int x = 0; x < n; x++)
        if (cs->es[x] == cs->lf[x] - cs->d[x])
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
    *nl_out = nl;
    return ns;
}

/* The fallback on arc lists of its own (the persistent arcs live in cs->arc_*), then the
 * persistent network rebuilt from the resulting flow. -2: out of memory. */
static int fallback_cut(crash_state *cs, int *nl_out)
{
    erg__crash_inc *in = cs->inc;
    size_t no = (size_t)in->nord;
    int *u = erg__malloc(sizeof(int) * no), *v = erg__malloc(sizeof(int) * no),
        *k = erg__malloc(sizeof(int) * no);
    int64_t *lb = erg__malloc(sizeof(int64_t) * no), *ub = erg__malloc(sizeof(int64_t) * no);
    int ns = -2;
    if (u && v && k && lb && ub) {
        cs->arc_u = u;
        cs->arc_v = v;
        cs->arc_key = k;
        cs->arc_lb = lb;
        cs->arc_ub = ub;
        ns = fallback_lists(cs, nl_out);
        cs->arc_u = in->au;
        cs->arc_v = in->av;
        cs->arc_key = in->akey;
        cs->arc_lb = in->alb;
        cs->arc_ub = in->aub;
    }
    erg__free(u);
    erg__free(v);
    erg__free(k);
    erg__free(lb);
    erg__free(ub);
    if (ns >= 0) {
        /* the persistent network from this flow (solve_cut used cs->im too), for the next
         * steps */
        rebuild_network(cs);
        for (int x = 0; x < 2 * cs->n; x++)
            if (in->im[x])
                touch(in, x);
    }
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
    /* The flow is balanced and no patch since the last max flow gave a reached node a new
     * residual to an unreached one or took one away: the reached set is the same, the sink
     * is not in it, so the flow is still maximum and Dinic's algorithm would stop at its
     * first search, pushing nothing. Keep the cut that search would find again. */
    /* Augmenting paths come in runs (gpt3-175b A40 M = 12: after a step that needed one, the
     * next needs one 79 % of the time). After such a step the max flow's own first search
     * (backward from the sink) looks for a path before the kept cut is extended: if there is
     * one it is that max flow's first phase, and the extension, which would have run into
     * the sink, is saved; if there is none the flow is maximum and the kept cut is extended
     * as below, the level marks untouched. Either way the same reached set, so the same cut. */
    const int may_keep = in->cut_valid && !in->moved && first == last;
    int keep = 0, flowed = 0;
    if (may_keep && in->last_hit && erg__flow_replay(f, SRC, SNK, in->active, 2 * in->nord) > 0) {
        /* The last max flow's augmenting paths that are still paths carry what they can
         * first: the capacity a step adds is mostly on the arcs the last paths crossed
         * (gpt3-175b A40 M = 12, with the record kept through max flows that find no path:
         * Dinic's phases 10,073 -> 8,220, its paths 27,370 -> 21,404). The flow changed, so
         * the max flow finishes from here. */
        erg__flow_max(f, SRC, SNK);
        flowed = 1;
        atomic_fetch_add_explicit(&stat_replayed, 1, memory_order_relaxed);
    } else if (may_keep && in->last_hit) {
        int64_t pushed = erg__flow_max_if_path(f, SRC, SNK);
        if (pushed < 0) {
            keep = extend_cut(cs, SNK); /* no path: cannot reach the sink; 0 = front overflow */
            atomic_fetch_add_explicit(&stat_probed_kept, 1, memory_order_relaxed);
        } else {
            flowed = 1;
            atomic_fetch_add_explicit(&stat_probed_hit, 1, memory_order_relaxed);
        }
    } else if (may_keep) {
        keep = extend_cut(cs, SNK);
    }
    if (may_keep)
        in->last_hit = !keep;
    in->moved = 0;
    in->nfront = 0;
    int ok = 1;
    if (!keep) {
        if (!flowed)
            erg__flow_max(f, SRC, SNK);
        in->cut_valid = 1;
        for (int a = first; a < last; a += 2) {
            ok &= f->res[a] <= 1;            /* ERG__FEAS_MAX_DEFICIT */
            in->cut_valid &= f->res[a] == 0; /* else reached through a repair arc */
        }
    }
    if (force_fallback_every > 0 && (cs->warm_ok + cs->warm_fail) % force_fallback_every == 0)
        ok = 0;
    int ns, nl = 0;
    if (ok) {
        cs->warm_ok++;
        /* take the repair arcs out (last added first); what they left unsaturated is the
         * real arcs' imbalance now */
        int64_t unbalanced = 0; /* sum of |im|: what the repair arcs left (<= 1 each) */
        for (int a = last - 2; a >= first; a -= 2) {
            int u = f->to[a + 1], v = f->to[a];
            f->head[v] = f->next[a + 1];
            f->head[u] = f->next[a];
            int x = u == SRC ? v : u;
            in->im[x] = u == SRC ? f->res[a] : -f->res[a];
            unbalanced += f->res[a];
            if (in->im[x])
                touch(in, x);
        }
        f->arcs = first;
        /* Whether an infinite arc can cross the cut saturated (the loop's end): its flow would
         * be cs->inf. The real arcs form a DAG, so the flow on an arc out of u is at most what
         * leaves u's ancestors: the source's outflow plus what the imbalances add. Below inf,
         * no infinite arc is saturated and the test over every reached node's arcs is skipped
         * (it would find nothing); otherwise it runs. */
        int64_t bound = unbalanced;
        for (int a = f->head[SRC]; a >= 0 && bound < cs->inf; a = f->next[a])
            bound += f->res[a ^ 1] + in->alb[a >> 1]; /* the flow on a source arc */
        const int may_be_infinite = bound >= cs->inf;
        /* the cut: the nodes the max flow's last search reached */
        const int *level = f->level, *q = f->queue, *head = f->head, *next = f->next, *to = f->to;
        const int nq = f->nreach, lim = 2 * in->nord;
        int infinite = 0;
        ns = 0;
        const int64_t *res = f->res;
        for (int i = 0; i < nq; i++) {
            int u = q[i];
            if (u < 2 * n) {
                int x = u >> 1;
                if (!(u & 1)) {
                    /* an in-node's only forward arc is its op arc */
                    if (level[u + 1] < 0)
                        cs->shorten[ns++] = x;
                    continue;
                }
                if (level[u - 1] < 0)
                    cs->lengthen[nl++] = x;
            }
            /* an infinite arc crossing the cut forward: saturated, to an unreached node */
            if (may_be_infinite)
                for (int a = head[u]; a >= 0; a = next[a])
                    if (!(a & 1) && res[a] == 0 && a < lim && in->akey[a >> 1] >= n) {
                        int v = to[a];
                        infinite |= (v == SNK) | (level[v] < 0);
                    }
        }
        if (infinite)
            return 0;
        sort_ints(cs->shorten, ns);
        sort_ints(cs->lengthen, nl);
    } else {
        cs->warm_fail++;
        in->cut_valid = 0;
        ns = fallback_cut(cs, &nl);
        if (ns < 0)
            return ns == -2 ? -1 : 0;
    }
    if (ns == 0)
        return 0;
    if (!erg__crash_apply(cs, ns, nl, cost_change))
        return 0;
    erg__incr_cpm(cs);
    scan_arcs(cs, in->all);
    /* an op arc's bounds change only with its duration: those of the moved instructions
     * still critical (scan_arcs inserts and removes op arcs with their current bounds) */
    for (int k = 0; k < cs->nshorten; k++)
        if (in->active[cs->shorten[k] + cs->g.succ_off[cs->shorten[k]]])
            op_arc(cs, cs->shorten[k], 1);
    for (int k = 0; k < cs->nlengthen; k++)
        if (in->active[cs->lengthen[k] + cs->g.succ_off[cs->lengthen[k]]])
            op_arc(cs, cs->lengthen[k], 1);
    return 1;
}

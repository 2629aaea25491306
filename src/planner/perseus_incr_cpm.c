/* perseus_incr_cpm.c: the critical path method of the incremental crashing step (docs/planner.md,
 * "Incremental crashing").
 *
 * WHAT IT DOES: after a step that moved a few instructions, the same earliest starts, tails
 * and makespan as erg__crash_cpm (perseus.c), exact in integers, and the marks of the
 * instructions whose arcs the scan (perseus_incr.c) must visit -- without a pass over every
 * instruction.
 *
 * HOW IT WORKS: the starts before the window of topological positions that the moved
 * instructions span, and the tails after it, do not change; a step shortens every critical
 * path by one unit, so about 95 % of the rest -- the starts after the window, the tails before
 * it -- move by the change of T. es and td are stored less an offset per block of 32 positions
 * (es_at, td_at): that common shift is an add per block; the window is recomputed, and of the
 * rest only the instructions next to it (found by segment trees over the smallest predecessor
 * and largest successor positions) and what follows from one that did not move with the
 * others (a bitmap of positions, in topological order). A window wider than a quarter of the
 * order (zero-bubble V schedules) is recomputed with everything after and before it instead,
 * without offsets (cpm_span). */
#include "planner/perseus_incr.h"
#include "core/internal.h"

#include <stdatomic.h>
#include <string.h>

int erg__incr_cpm_init(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n;
    in->pos = erg__malloc(sizeof(int) * (size_t)n);
    in->td = erg__malloc(sizeof(long) * (size_t)n);
    in->nblk = (n >> ERG__CPM_BLK) + 1;
    in->eoff = erg__calloc((size_t)in->nblk, sizeof(long));
    in->toff = erg__calloc((size_t)in->nblk, sizeof(long));
    in->dirty = erg__calloc((size_t)n + 8, 1); /* + 8: scan_arcs reads whole words */
    in->P = 1;
    while (in->P < n)
        in->P *= 2;
    in->mppt = erg__malloc(sizeof(int) * 2 * (size_t)in->P);
    in->mspt = erg__malloc(sizeof(int) * 2 * (size_t)in->P);
    in->pend = erg__calloc((size_t)(n >> 6) + 1, sizeof(uint64_t));
    in->sinks = erg__malloc(sizeof(int) * (size_t)n);
    in->des = erg__malloc(sizeof(long) * (size_t)n);
    in->dtd = erg__malloc(sizeof(long) * (size_t)n);
    in->flat = 1;
    if (!in->des || !in->dtd || !in->pos || !in->td || !in->eoff || !in->toff || !in->dirty ||
        !in->mppt || !in->mspt || !in->pend || !in->sinks)
        return -1;
    /* the window CPM's state from the full CPM's es, lf and T */
    for (int k = 0; k < n; k++) {
        int u = g->topo[k];
        in->pos[u] = k;
        in->td[u] = cs->T - cs->lf[u] + cs->d[u];
    }
    in->shift = -1;
    const int P = in->P;
    for (int k = 0; k < P; k++) {
        int mp = -1, mq = n;
        if (k < n) {
            int x = g->topo[k];
            for (int j = g->succ_off[x]; j < g->succ_off[x + 1]; j++)
                if (in->pos[g->succ[j]] > mp)
                    mp = in->pos[g->succ[j]];
            for (int j = g->pred_off[x]; j < g->pred_off[x + 1]; j++)
                if (in->pos[g->pred[j]] < mq)
                    mq = in->pos[g->pred[j]];
            /* a source's start (0) and a sink's tail (d) follow no shift: the trees list
             * them as crossing every window */
            if (g->pred_off[x] == g->pred_off[x + 1])
                mq = -1;
            if (g->succ_off[x] == g->succ_off[x + 1]) {
                mp = n;
                in->sinks[in->nsinks++] = x;
            }
        }
        in->mspt[P + k] = mp;
        in->mppt[P + k] = mq;
    }
    for (int i = P - 1; i >= 1; i--) {
        int a = in->mspt[2 * i], b = in->mspt[2 * i + 1];
        in->mspt[i] = a > b ? a : b;
        a = in->mppt[2 * i];
        b = in->mppt[2 * i + 1];
        in->mppt[i] = a < b ? a : b;
    }
    return 0;
}

void erg__incr_cpm_free(erg__crash_inc *in)
{
    erg__free(in->pos);
    erg__free(in->td);
    erg__free(in->eoff);
    erg__free(in->toff);
    erg__free(in->des);
    erg__free(in->dtd);
    erg__free(in->dirty);
    erg__free(in->mppt);
    erg__free(in->mspt);
    erg__free(in->pend);
    erg__free(in->sinks);
}

/* Every offset folded into es and td (flat). */
void erg__incr_flatten(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    if (in->flat)
        return;
    for (int x = 0; x < cs->n; x++) {
        cs->es[x] = es_at(in, cs->es, x);
        in->td[x] = td_at(in, x);
    }
    memset(in->eoff, 0, sizeof(long) * (size_t)in->nblk);
    memset(in->toff, 0, sizeof(long) * (size_t)in->nblk);
    in->flat = 1;
}

static inline void pend_set(uint64_t *pend, int k)
{
    pend[k >> 6] |= UINT64_C(1) << (k & 63);
}

/* Positions k in [lo, hi) whose key in the segment tree t (leaves at P + k) is <= lim (t of
 * minima, sign 1) or >= lim (t of maxima, sign -1), added to the pending set: a descent that
 * enters only the subtrees holding one. */
static void seg_pend(const int *t, int P, int lo, int hi, int lim, int sign, uint64_t *pend)
{
    int stack[3 * 31], sp = 0, node = 1, nlo = 0, nhi = P; /* 3 ints a level, P <= 2^30 */
    for (;;) {
        if (nlo < hi && lo < nhi && sign * t[node] <= sign * lim) {
            if (node >= P) {
                pend_set(pend, node - P);
            } else {
                int mid = (nlo + nhi) / 2;
                /* the right half waits on the stack: (node, its range) packed in three ints */
                stack[sp++] = 2 * node + 1;
                stack[sp++] = mid;
                stack[sp++] = nhi;
                node = 2 * node;
                nhi = mid;
                continue;
            }
        }
        if (!sp)
            break;
        nhi = stack[--sp];
        nlo = stack[--sp];
        node = stack[--sp];
    }
}

/* The earliest start of u from its predecessors' (plus the transfer time lag across stages). */
static inline long es_from_preds(const crash_state *cs, int u)
{
    const erg__crash_inc *in = cs->inc;
    const int *pred_off = cs->g.pred_off, *pred = cs->g.pred, *d = cs->d, *pos = in->pos;
    const long *es = cs->es, *eoff = in->eoff, lag = cs->lag;
    long s = 0;
    if (lag == 0) {
        for (int j = pred_off[u]; j < pred_off[u + 1]; j++) {
            int p = pred[j];
            long f = es[p] + eoff[pos[p] >> ERG__CPM_BLK] + d[p];
            s = f > s ? f : s;
        }
    } else {
        const int *stage = cs->g.rank;
        for (int j = pred_off[u]; j < pred_off[u + 1]; j++) {
            int p = pred[j];
            long f = es[p] + eoff[pos[p] >> ERG__CPM_BLK] + d[p] + (stage[p] != stage[u] ? lag : 0);
            s = f > s ? f : s;
        }
    }
    return s;
}

/* The tail of u from its successors': d[u] + max(0, td[v] + lag). */
static inline long td_from_succs(const crash_state *cs, int u)
{
    const erg__crash_inc *in = cs->inc;
    const int *succ_off = cs->g.succ_off, *succ = cs->g.succ, *pos = in->pos;
    const long *td = in->td, *toff = in->toff, lag = cs->lag;
    long t = 0;
    if (lag == 0) {
        for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
            int v = succ[j];
            long tv = td[v] + toff[pos[v] >> ERG__CPM_BLK];
            t = tv > t ? tv : t;
        }
    } else {
        const int *stage = cs->g.rank;
        for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
            int v = succ[j];
            long tv = td[v] + toff[pos[v] >> ERG__CPM_BLK] + (stage[u] != stage[v] ? lag : 0);
            t = tv > t ? tv : t;
        }
    }
    return t + cs->d[u];
}

/* The instructions the step moved: their durations changed, so their tests did. */
static void mark_moved(crash_state *cs)
{
    unsigned char *dirty = cs->inc->dirty;
    for (int i = 0; i < cs->nshorten; i++)
        dirty[cs->shorten[i]] = 1;
    for (int i = 0; i < cs->nlengthen; i++)
        dirty[cs->lengthen[i]] = 1;
}

/* Whether window instruction u (its start moved by des, its tail by b, T by dT; its duration
 * unchanged: the moved ones are marked apart) must be visited by the arc scan: its criticality
 * compares es + td with T, a dependency u -> v es + d + lag + td[v], its sink dummy es + d, so
 * with a = des - dT a test changed iff a + b, a + the change of a successor's td (dtd in the
 * window, 0 after it) or, for a sink, a is not 0. Most of a wide window moves as a block (its
 * starts with T, or its tails with T) and needs no visit. */
static inline int window_mark(const crash_state *cs, int u, long a, long b, int kmax)
{
    const erg__crash_inc *in = cs->inc;
    if (a + b != 0 || ((cs->ends[u] & ERG__NO_SUCC) && a != 0))
        return 1;
    const int *succ_off = cs->g.succ_off, *succ = cs->g.succ;
    for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
        int v = succ[j];
        if (a + (in->pos[v] <= kmax ? in->dtd[v] : 0) != 0)
            return 1;
    }
    return 0;
}

/* A window wider than n / SPAN_WHOLE positions is recomputed with everything after it (starts)
 * and before it (tails), without offsets: the passes are cheaper per instruction than the
 * window's recomputation and its offsets, and with windows that wide (zero-bubble V schedules:
 * 40 % of the order on average) they cover little more. */
#define SPAN_WHOLE 4

/* Tests: 0 = by the window's width, 1 = always the whole span, 2 = always the window; how
 * many steps took each (atomic: plans may run in several threads at once). */
static int cpm_mode = 0;
static atomic_long stat_window, stat_span;

void erg__perseus_incr_cpm_mode(int mode)
{
    cpm_mode = mode;
}

void erg__perseus_incr_cpm_stats(long *window, long *span)
{
    *window = atomic_load_explicit(&stat_window, memory_order_relaxed);
    *span = atomic_load_explicit(&stat_span, memory_order_relaxed);
}

/* cpm_window's recomputation over the whole span: starts from kmin to the end, tails from kmax
 * to the beginning, the same marks (flat afterwards). */
static void cpm_span(crash_state *cs, int kmin, int kmax)
{
    erg__crash_inc *in = cs->inc;
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n;
    const int *topo = g->topo, *pred_off = g->pred_off, *pred = g->pred;
    const int *succ_off = g->succ_off, *succ = g->succ, *stage = g->rank;
    const int *d = cs->d, *mspt = in->mspt + in->P;
    erg__incr_flatten(cs);
    long *es = cs->es, *td = in->td, *des = in->des;
    unsigned char *dirty = in->dirty;
    const long lag = cs->lag, T0 = cs->T;
    for (int k = kmin; k < n; k++) {
        int u = topo[k];
        long s = crash_es_of(pred_off, pred, es, d, stage, lag, u);
        des[u] = s - es[u];
        es[u] = s;
    }
    long T = 0;
    for (int i = 0; i < in->nsinks; i++) {
        int x = in->sinks[i];
        if (es[x] + d[x] > T)
            T = es[x] + d[x];
    }
    const long dT = T - T0;
    in->all = 0;
    in->shift = dT;
    for (int k = kmax + 1; k < n; k++) {
        int u = topo[k];
        dirty[u] = des[u] != dT;
    }
    for (int k = kmax; k >= 0; k--) {
        int u = topo[k];
        long t = 0;
        if (lag == 0) {
            for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
                long tv = td[succ[j]];
                if (tv > t)
                    t = tv;
            }
        } else {
            for (int j = succ_off[u]; j < succ_off[u + 1]; j++) {
                int v = succ[j];
                long tv = td[v] + (stage[u] != stage[v] ? lag : 0);
                if (tv > t)
                    t = tv;
            }
        }
        const long nt = t + d[u], b = nt - td[u];
        const int moved = b != dT;
        td[u] = nt;
        if (k >= kmin) {
            in->dtd[u] = b;
            dirty[u] = window_mark(cs, u, des[u] - dT, b, kmax);
        } else {
            dirty[u] |= moved | ((dT != 0) & (mspt[k] > kmax));
        }
        if (moved)
            for (int j = pred_off[u]; j < pred_off[u + 1]; j++)
                dirty[pred[j]] = 1;
    }
    mark_moved(cs);
    cs->T = T;
}

/* erg__crash_cpm after a step that moved only the instructions cs->shorten and cs->lengthen:
 * the same es, tails and T, exact in integers, and the marks of the instructions whose arcs
 * the scan must visit. With kmin..kmax the topological positions they span (the window), the
 * earliest starts before kmin depend only on durations before kmin and the tails (T - lf,
 * kept as td = tail + d: td[u] = d[u] + max(0, td[v] + lag) is erg__crash_cpm's
 * lf = min(T, lf[v] - d[v] - lag) with lf = T - td + d) after kmax only on durations after
 * kmax, so neither changed.
 *  - The window's starts, forward, and its tails, backward, are recomputed.
 *  - After the window every start is presumed to move by the same amount c (the last step's
 *    change of T: the step shortens every critical path by one unit, and what follows them
 *    moves with them), one add per block of offsets. Only the instructions with a
 *    predecessor at or before kmax (the segment tree of mpp finds them) and the successors of
 *    those whose start then differs from the presumed one are recomputed, in topological
 *    order (a bitmap of positions).
 *  - T is the latest end among the instructions without successors (durations and the
 *    transfer time are >= 0, so no end after them is later).
 *  - Before the window every tail is presumed to move by dT, the change of T; the
 *    instructions with a successor at or after kmin (the segment tree of msp), and the
 *    predecessors of those whose tail then differs, are recomputed, in reverse order.
 * The marks (the tests are exact, not a guess): an instruction's criticality, its
 * dependencies' and its dummies' tests compare es + td, es + d + lag + td of a successor,
 * es + d with T, so
 *  - after the window x is visited iff its start moved by other than dT (its tail and its
 *    successors' stayed); when c != dT every instruction is visited (it has not happened on
 *    the published profiles: a step changes T by exactly -1 unit);
 *  - in the window every instruction is visited;
 *  - before it (k < kmin) es and d are unchanged: x is visited when its tail moved by other
 *    than dT, when a successor's did (marked from the successor, through its predecessors),
 *    or when dT != 0 and a successor lies after the window (whose tail stayed).
 * On gpt3-175b A40 M = 96 this recomputes about 50 of 1,536 instructions per step (a window
 * of 34, 8 starts and 8 tails that do not follow dT) instead of about 1,550 (docs/benchmarks.md).
 */
void erg__incr_cpm(crash_state *cs)
{
    erg__crash_inc *in = cs->inc;
    const erg_dag_arrays *g = &cs->g;
    const int n = cs->n;
    const int *topo = g->topo, *pred_off = g->pred_off, *pred = g->pred;
    const int *succ_off = g->succ_off, *succ = g->succ, *pos = in->pos;
    const int *d = cs->d;
    long *es = cs->es, *td = in->td, *eoff = in->eoff, *toff = in->toff;
    uint64_t *pend = in->pend;
    unsigned char *dirty = in->dirty;
    int kmin = n, kmax = -1;
    for (int i = 0; i < cs->nshorten; i++) {
        int k = pos[cs->shorten[i]];
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
    }
    for (int i = 0; i < cs->nlengthen; i++) {
        int k = pos[cs->lengthen[i]];
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
    }
    const long T0 = cs->T, c = in->shift;
    if (cpm_mode == 1 || (cpm_mode == 0 && (long)(kmax - kmin + 1) * SPAN_WHOLE > n)) {
        atomic_fetch_add_explicit(&stat_span, 1, memory_order_relaxed);
        cpm_span(cs, kmin, kmax);
        return;
    }
    atomic_fetch_add_explicit(&stat_window, 1, memory_order_relaxed);
    in->flat = 0;
    /* the window's starts */
    long *des = in->des, *dtd = in->dtd;
    for (int k = kmin; k <= kmax; k++) {
        int u = topo[k];
        long sv = es_from_preds(cs, u);
        des[u] = sv - es_at(in, es, u);
        es[u] = sv - eoff[k >> ERG__CPM_BLK];
    }
    /* after it: every start moves by c (the partial block one by one, then whole blocks) */
    int k0 = kmax + 1;
    if (c != 0 && k0 < n) {
        int b = k0 >> ERG__CPM_BLK;
        if (k0 & ((1 << ERG__CPM_BLK) - 1)) {
            int end = (b + 1) << ERG__CPM_BLK;
            for (int k = k0; k < end && k < n; k++)
                es[topo[k]] += c;
            b++;
        }
        for (; b < in->nblk; b++)
            eoff[b] += c;
    }
    /* ... but those with a predecessor at or before kmax, and what follows one that did not */
    if (k0 < n) {
        seg_pend(in->mppt, in->P, k0, n, kmax, 1, pend);
        for (int w = k0 >> 6; w <= (n - 1) >> 6; w++)
            while (pend[w]) {
                int k = (w << 6) + __builtin_ctzll(pend[w]);
                pend[w] &= pend[w] - 1;
                int u = topo[k];
                long sv = es_from_preds(cs, u);
                if (sv != es_at(in, es, u)) {
                    es[u] = sv - eoff[k >> ERG__CPM_BLK];
                    dirty[u] = 1;
                    for (int j = succ_off[u]; j < succ_off[u + 1]; j++)
                        pend_set(pend, pos[succ[j]]);
                }
            }
    }
    long T = 0;
    for (int i = 0; i < in->nsinks; i++) {
        int x = in->sinks[i];
        long f = es_at(in, es, x) + d[x];
        if (f > T)
            T = f;
    }
    const long dT = T - T0;
    in->all = dT != c;
    in->shift = dT;
    /* the window's tails, backward */
    for (int k = kmax; k >= kmin; k--) {
        int u = topo[k];
        long nt = td_from_succs(cs, u), b = nt - td_at(in, u);
        const int moved = b != dT;
        td[u] = nt - toff[k >> ERG__CPM_BLK];
        dtd[u] = b;
        dirty[u] = window_mark(cs, u, des[u] - dT, b, kmax);
        if (moved)
            for (int j = pred_off[u]; j < pred_off[u + 1]; j++)
                dirty[pred[j]] = 1;
    }
    /* before it: every tail moves by dT (whole blocks, then the partial block) */
    if (dT != 0 && kmin > 0) {
        int b1 = kmin >> ERG__CPM_BLK;
        for (int b = 0; b < b1; b++)
            toff[b] += dT;
        for (int k = b1 << ERG__CPM_BLK; k < kmin; k++)
            td[topo[k]] += dT;
    }
    /* ... but those with a successor at or after kmin, and what precedes one that did not */
    if (kmin > 0) {
        seg_pend(in->mspt, in->P, 0, kmin, kmin, -1, pend);
        for (int w = (kmin - 1) >> 6; w >= 0; w--)
            while (pend[w]) {
                int bit = 63 - __builtin_clzll(pend[w]);
                pend[w] &= ~(UINT64_C(1) << bit);
                int k = (w << 6) + bit, u = topo[k];
                if (dT != 0 && in->mspt[in->P + k] > kmax)
                    dirty[u] = 1; /* a successor after the window: its tail stayed */
                long nt = td_from_succs(cs, u);
                if (nt != td_at(in, u)) {
                    td[u] = nt - toff[k >> ERG__CPM_BLK];
                    dirty[u] = 1;
                    for (int j = pred_off[u]; j < pred_off[u + 1]; j++) {
                        dirty[pred[j]] = 1;
                        pend_set(pend, pos[pred[j]]);
                    }
                }
            }
    }
    mark_moved(cs);
    cs->T = T; /* lf = T - td + d where needed (scan_arcs reads td) */
}

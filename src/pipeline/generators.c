/* generators.c: per-rank orders of PyTorch's multi-stage schedules
 * (torch/distributed/pipelining/schedules.py, reimplemented from its
 * description in docs/schedules.md) and of ergon's single-chunk ones. */
#include "core/internal.h"
#include "pipeline/order_internal.h"

#include <limits.h>
#include <string.h>

int erg__steps_push(erg__steps *s, erg_instr in)
{
    if (s->n == s->cap) {
        size_t nc = erg__grow_cap((size_t)s->cap, (size_t)s->n + 1, 64);
        if (nc > INT_MAX)
            return -1;
        erg_instr *v = erg__reallocarray(s->v, nc, sizeof(erg_instr));
        if (!v)
            return -1;
        s->v = v;
        s->cap = (int)nc;
    }
    s->v[s->n++] = in;
    return 0;
}

void erg__steps_free(erg__steps *s)
{
    erg__free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static erg_instr act(erg_instr_kind k, int stage, int mb)
{
    return (erg_instr){k, mb, stage, ERG_FORWARD, -1, -1};
}

#define PUSH(st, in)                                                                               \
    do {                                                                                           \
        if (erg__steps_push((st), (in)))                                                           \
            goto oom;                                                                              \
    } while (0)

/* ---- interleaved 1F1B and interleaved zero bubble (ZB1P) ---- */
typedef struct {
    int P, V, rank, warmup, mpr;
} ilv;

static int ilv_fwd_stage(const ilv *c, int step)
{
    return ((step / c->mpr) % c->V) * c->P + c->rank;
}

static int ilv_bwd_stage(const ilv *c, int step)
{
    return (c->V - 1 - ((step - c->warmup) / c->mpr) % c->V) * c->P + c->rank;
}

/* One rank of an interleaved schedule: `warmup` forwards, then pairs of a
 * forward and a backward (B, or I for zero bubble), then the remaining
 * backwards; zero bubble adds the W of an earlier I after each I once rank
 * pairs have run, and the remaining W at the end. Idle steps: rank at the
 * start, and a wait after the warm-up (interleaved 1F1B also idles once per
 * cooldown backward). */
static erg_status ilv_rank(const ilv *c, int M, int zb, erg__steps *out, erg_error *err)
{
    int S = c->P * c->V, V = c->V, P = c->P, rank = c->rank, w = c->warmup;
    int *fmi = erg__calloc((size_t)S * 3, sizeof(int));
    int mops = V * M, fb = mops - w, total = w + fb + w;
    int *bids = erg__calloc((size_t)total + 1, sizeof(int));
    if (!fmi || !bids)
        goto oom;
    int *bmi = fmi + S, *wmi = fmi + 2 * S;
    int post = zb ? P - rank - 1 : (V * P + 2 * (P - 1 - rank)) - (w + rank);
    erg_instr_kind bk = zb ? ERG_BACKWARD_INPUT : ERG_BACKWARD;
    int nb = 0, wc = 0;
    for (int i = 0; i < rank; i++)
        PUSH(out, ERG__IDLE);
    for (int op = 0; op < total; op++) {
        if (op < w) {
            int s = ilv_fwd_stage(c, op);
            PUSH(out, act(ERG_FORWARD, s, fmi[s]++));
            if (op == w - 1)
                for (int i = 0; i < post; i++)
                    PUSH(out, ERG__IDLE);
            continue;
        }
        if (op < w + fb) {
            int s = ilv_fwd_stage(c, op);
            PUSH(out, act(ERG_FORWARD, s, fmi[s]++));
        } else if (!zb) {
            PUSH(out, ERG__IDLE);
        }
        int s = ilv_bwd_stage(c, op);
        PUSH(out, act(bk, s, bmi[s]++));
        bids[nb++] = op;
        if (zb && op - w >= rank) {
            int ws = ilv_bwd_stage(c, bids[wc++]);
            PUSH(out, act(ERG_BACKWARD_WEIGHT, ws, wmi[ws]++));
        }
    }
    while (zb && wc < nb) {
        int ws = ilv_bwd_stage(c, bids[wc++]);
        PUSH(out, act(ERG_BACKWARD_WEIGHT, ws, wmi[ws]++));
    }
    erg__free(fmi);
    erg__free(bids);
    return ERG_OK;
oom:
    erg__free(fmi);
    erg__free(bids);
    return erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
}

/* PyTorch's _add_bubbles_to_actions for interleaved zero bubble: ranks advance
 * in lock-step; a forward whose previous stage's forward has not run in an
 * earlier step waits (an idle step is inserted). I and W never wait. */
static erg_status zb_bubbles(int P, int S, int M, erg__steps *steps, erg_error *err)
{
    erg__steps *res = erg__calloc((size_t)P, sizeof(erg__steps));
    int *nxt = erg__calloc((size_t)P, sizeof(int));
    unsigned char *seen = erg__calloc((size_t)S * M, 1); /* forwards that ran */
    int *tmp = erg__calloc((size_t)P, sizeof(int));
    erg_status st = ERG_OK;
    if (!res || !nxt || !seen || !tmp)
        goto oom;
    for (;;) {
        int running = 0, advanced = 0, nt = 0;
        for (int r = 0; r < P; r++) {
            int t = nxt[r];
            if (t >= steps[r].n)
                continue;
            running = 1;
            erg_instr a = steps[r].v[t];
            if (a.microbatch < 0) {
                nxt[r]++;
                advanced = 1;
                PUSH(&res[r], ERG__IDLE);
                continue;
            }
            int wait = a.kind == ERG_FORWARD && a.stage != 0 &&
                       !seen[(size_t)(a.stage - 1) * M + a.microbatch];
            if (wait) {
                PUSH(&res[r], ERG__IDLE);
            } else {
                PUSH(&res[r], a);
                if (a.kind == ERG_FORWARD)
                    tmp[nt++] = a.stage * M + a.microbatch;
                nxt[r]++;
                advanced = 1;
            }
        }
        for (int i = 0; i < nt; i++)
            seen[tmp[i]] = 1;
        if (!running)
            break;
        if (!advanced) {
            st = erg_error_set(err, ERG_EINVAL,
                               "interleaved-zb: the orders deadlock (no rank can advance)");
            goto done;
        }
    }
    for (int r = 0; r < P; r++) {
        erg__steps t = steps[r];
        steps[r] = res[r];
        res[r] = t;
    }
done:
    if (res)
        for (int r = 0; r < P; r++)
            erg__steps_free(&res[r]);
    erg__free(res);
    erg__free(nxt);
    erg__free(seen);
    erg__free(tmp);
    return st;
oom:
    st = erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
    goto done;
}

static erg_status gen_interleaved(int P, int V, int M, int zb, erg__steps *steps, erg_error *err)
{
    int rounds = M / P > 1 ? M / P : 1;
    if (M % rounds)
        return erg_error_set(err, ERG_EINVAL,
                             "%s requires the number of microbatches to be a multiple of the "
                             "number of rounds max(1, M/P) = %d, but got M=%d (PyTorch refuses "
                             "it too)",
                             zb ? "interleaved-zb" : "interleaved-1f1b", rounds, M);
    int mpr = M / rounds;
    for (int r = 0; r < P; r++) {
        long w = (long)(V - 1) * mpr + (long)(zb ? 1 : 2) * (P - 1 - r);
        if (w > (long)M * V)
            w = (long)M * V;
        ilv c = {P, V, r, (int)w, mpr};
        erg_status st = ilv_rank(&c, M, zb, &steps[r], err);
        if (st)
            return st;
    }
    return zb ? zb_bubbles(P, P * V, M, steps, err) : ERG_OK;
}

/* Looped BFS: each local stage's forwards for every microbatch, in stage
 * order; then a wait; then each local stage's backwards, last stage first,
 * microbatches in reverse. */
static erg_status gen_looped_bfs(int P, int V, int M, erg__steps *steps, erg_error *err)
{
    for (int r = 0; r < P; r++) {
        erg__steps *o = &steps[r];
        for (int i = 0; i < r; i++)
            PUSH(o, ERG__IDLE);
        for (int c = 0; c < V; c++)
            for (int m = 0; m < M; m++)
                PUSH(o, act(ERG_FORWARD, c * P + r, m));
        for (int i = 0; i < 2 * (P - 1 - r); i++)
            PUSH(o, ERG__IDLE);
        for (int c = V - 1; c >= 0; c--)
            for (int m = M - 1; m >= 0; m--)
                PUSH(o, act(ERG_BACKWARD, c * P + r, m));
    }
    return ERG_OK;
oom:
    return erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
}

/* ZB-V: V shape, chunk 0 = stage r, chunk 1 = stage 2P-1-r. It runs the
 * pipeline as if M were max(M, 2P-1) and blanks out (idles) the actions of
 * microbatches >= M. Phases: 2(P-r)-1 forwards of chunk 0; r pairs F1 F0;
 * P-r triples F1 I1 W1; then steady F0 I0 W0 F1 I1 W1 (F0 only while some
 * remain) until both chunks ran all forwards; cooldown r pairs I0 I1, P-r
 * pairs I0 W0, then the remaining W1, then the remaining W0. */
static erg_status gen_zbv(int P, int M, erg__steps *steps, erg_error *err)
{
    int S = 2 * P, n = M > 2 * P - 1 ? M : 2 * P - 1;
    for (int r = 0; r < P; r++) {
        erg__steps *o = &steps[r];
        int c0 = r, c1 = S - 1 - r, f0 = 0, f1 = 0, b0 = 0, b1 = 0;
#define Z(k, s, m) PUSH(o, (m) < M ? act((k), (s), (m)) : ERG__IDLE)
        for (int i = 0; i < r; i++)
            PUSH(o, ERG__IDLE);
        for (int i = 0; i < 2 * (P - r) - 1; i++, f0++)
            Z(ERG_FORWARD, c0, f0);
        for (int i = 0; i < r; i++) {
            Z(ERG_FORWARD, c1, f1);
            f1++;
            Z(ERG_FORWARD, c0, f0);
            f0++;
        }
        for (int i = 0; i < P - r; i++) {
            Z(ERG_FORWARD, c1, f1);
            f1++;
            Z(ERG_BACKWARD_INPUT, c1, b1);
            Z(ERG_BACKWARD_WEIGHT, c1, b1);
            b1++;
        }
        while (f1 < f0 || f0 < n) {
            if (f0 < n) {
                Z(ERG_FORWARD, c0, f0);
                f0++;
            }
            Z(ERG_BACKWARD_INPUT, c0, b0);
            Z(ERG_BACKWARD_WEIGHT, c0, b0);
            b0++;
            Z(ERG_FORWARD, c1, f1);
            f1++;
            Z(ERG_BACKWARD_INPUT, c1, b1);
            Z(ERG_BACKWARD_WEIGHT, c1, b1);
            b1++;
        }
        int w0 = b0, w1 = b1;
        for (int i = 0; i < r; i++) {
            Z(ERG_BACKWARD_INPUT, c0, b0);
            b0++;
            Z(ERG_BACKWARD_INPUT, c1, b1);
            b1++;
        }
        for (int i = 0; i < P - r; i++) {
            Z(ERG_BACKWARD_INPUT, c0, b0);
            b0++;
            Z(ERG_BACKWARD_WEIGHT, c0, w0);
            w0++;
        }
        for (; w1 < b1; w1++)
            Z(ERG_BACKWARD_WEIGHT, c1, w1);
        for (; w0 < b0; w0++)
            Z(ERG_BACKWARD_WEIGHT, c0, w0);
#undef Z
        if (!(w0 == b0 && b0 == f0 && w1 == b1 && b1 == f1))
            return erg_error_set(err, ERG_EINTERNAL, "zbv: unbalanced counts on rank %d", r);
    }
    return ERG_OK;
oom:
    return erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
}

/* DualPipeV (DeepSeek's, as PyTorch writes it): see docs/schedules.md for the
 * eight steps. Counters per (chunk, kind); an I queues its W, taken oldest
 * first; an OVERLAP_F_B pairs the next forward of one chunk with the next full
 * backward of the other. */
typedef struct {
    int stage[2];
    int cnt[2][4]; /* [chunk][F, -, I, W]; a B counts as I and W */
    int *qs, *qm, qh, qt;
    erg__steps *o;
} dpv;

static int dpv_add(dpv *d, int c, erg_instr_kind k)
{
    int key = k == ERG_BACKWARD ? ERG_BACKWARD_INPUT : k;
    int mb = d->cnt[c][key];
    if (erg__steps_push(d->o, act(k, d->stage[c], mb)))
        return -1;
    if (k == ERG_BACKWARD) {
        d->cnt[c][ERG_BACKWARD_INPUT]++;
        d->cnt[c][ERG_BACKWARD_WEIGHT]++;
    } else {
        if (k == ERG_BACKWARD_INPUT) {
            d->qs[d->qt] = c;
            d->qm[d->qt++] = mb;
        }
        d->cnt[c][key] = mb + 1;
    }
    return 0;
}

static int dpv_weight(dpv *d)
{
    if (d->qh == d->qt)
        return 0;
    int c = d->qs[d->qh], mb = d->qm[d->qh++];
    d->cnt[c][ERG_BACKWARD_WEIGHT]++;
    return erg__steps_push(d->o, act(ERG_BACKWARD_WEIGHT, d->stage[c], mb));
}

static int dpv_overlap(dpv *d, int fc, int bc)
{
    int fm = d->cnt[fc][ERG_FORWARD], bm = d->cnt[bc][ERG_BACKWARD_INPUT];
    erg_instr in = {ERG_OVERLAP_F_B, fm, d->stage[fc], ERG_BACKWARD, d->stage[bc], bm};
    d->cnt[fc][ERG_FORWARD]++;
    d->cnt[bc][ERG_BACKWARD_INPUT]++;
    d->cnt[bc][ERG_BACKWARD_WEIGHT]++;
    return erg__steps_push(d->o, in);
}

static erg_status gen_dualpipev(int P, int M, erg__steps *steps, erg_error *err)
{
    if (M < 2 * P)
        return erg_error_set(err, ERG_EINVAL,
                             "dualpipev requires at least as many microbatches as stages, but got "
                             "M=%d microbatches and %d stages (PyTorch refuses it too)",
                             M, 2 * P);
    int *q = erg__calloc((size_t)2 * M * 2 + 2, sizeof(int));
    if (!q)
        return erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
    erg_status st = ERG_OK;
    for (int r = 0; r < P && !st; r++) {
        dpv d;
        memset(&d, 0, sizeof d);
        d.stage[0] = r;
        d.stage[1] = 2 * P - 1 - r;
        d.qs = q;
        d.qm = q + 2 * M + 1;
        d.o = &steps[r];
        int bad = 0;
        for (int i = 0; i < (P - r - 1) * 2; i++)
            bad |= dpv_add(&d, 0, ERG_FORWARD);
        for (int i = 0; i < r + 1; i++)
            bad |= dpv_add(&d, 0, ERG_FORWARD) | dpv_add(&d, 1, ERG_FORWARD);
        for (int i = 0; i < P - r - 1; i++)
            bad |=
                dpv_add(&d, 1, ERG_BACKWARD_INPUT) | dpv_weight(&d) | dpv_add(&d, 1, ERG_FORWARD);
        for (int i = 0; i < M - 2 * P + r + 1; i++) {
            if (i == 0 && r == P - 1)
                bad |= dpv_add(&d, 0, ERG_FORWARD) | dpv_add(&d, 1, ERG_BACKWARD);
            else
                bad |= dpv_overlap(&d, 0, 1);
            bad |= dpv_overlap(&d, 1, 0);
        }
        for (int i = 0; i < P - r - 1; i++)
            bad |= dpv_add(&d, 1, ERG_BACKWARD) | dpv_overlap(&d, 1, 0);
        int n6 = r + 1, zb = 0;
        for (int i = 0; i < n6; i++) {
            if (i == n6 / 2 && r % 2 == 1)
                zb = 1;
            bad |= dpv_add(&d, 1, zb ? ERG_BACKWARD_INPUT : ERG_BACKWARD);
            if (i == n6 / 2 && r % 2 == 0)
                zb = 1;
            bad |= dpv_add(&d, 0, zb ? ERG_BACKWARD_INPUT : ERG_BACKWARD);
        }
        for (int i = 0; i < P - r - 1; i++)
            bad |= dpv_weight(&d) | dpv_add(&d, 0, zb ? ERG_BACKWARD_INPUT : ERG_BACKWARD);
        for (int i = 0; i < r + 1; i++)
            bad |= dpv_weight(&d);
        if (bad)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
    }
    erg__free(q);
    return st;
}

static erg_status gen_single(const erg_schedule *sched, int P, int M, erg__steps *steps,
                             erg_error *err)
{
    erg_instr *tmp = erg__calloc((size_t)2 * M, sizeof(erg_instr));
    if (!tmp)
        return erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
    for (int r = 0; r < P; r++) {
        erg_status st = erg_schedule_stage_order(sched, P, M, r, tmp, err);
        if (st) {
            erg__free(tmp);
            return st;
        }
        for (int k = 0; k < 2 * M; k++)
            if (erg__steps_push(&steps[r], act(tmp[k].kind, r, tmp[k].microbatch))) {
                erg__free(tmp);
                return erg_error_set(err, ERG_ENOMEM, "out of memory generating a schedule");
            }
    }
    erg__free(tmp);
    return ERG_OK;
}

erg_status erg__generate(const erg_schedule *sched, int P, int V, int M, erg__steps *steps,
                         erg_error *err)
{
    const char *name = erg_schedule_name(sched->kind);
    switch (sched->kind) {
    case ERG_SCHED_1F1B:
    case ERG_SCHED_GPIPE:
    case ERG_SCHED_ENVPIPE:
        if (V != 1)
            return erg_error_set(err, ERG_EINVAL,
                                 "%s runs one stage per rank: --chunks must be 1 (got %d)", name,
                                 V);
        return gen_single(sched, P, M, steps, err);
    case ERG_SCHED_INTERLEAVED_1F1B:
        return gen_interleaved(P, V, M, 0, steps, err);
    case ERG_SCHED_INTERLEAVED_ZB:
        return gen_interleaved(P, V, M, 1, steps, err);
    case ERG_SCHED_LOOPED_BFS:
        return gen_looped_bfs(P, V, M, steps, err);
    case ERG_SCHED_ZBV:
    case ERG_SCHED_DUALPIPEV:
        if (V != 2)
            return erg_error_set(err, ERG_EINVAL,
                                 "%s requires exactly 2 chunks (stages) per rank, but got %d "
                                 "(PyTorch refuses it too)",
                                 name, V);
        return sched->kind == ERG_SCHED_ZBV ? gen_zbv(P, M, steps, err)
                                            : gen_dualpipev(P, M, steps, err);
    case ERG_SCHED_FILE:
        break;
    }
    return erg_error_set(err, ERG_EINVAL, "schedule kind %d has no generator", (int)sched->kind);
}

/* analyze.c: the operator graph, ParallelBlocks (anchors, backward twins, propagation, merge
 * points) and repeated segments of an HLO module on a 2-D device mesh (docs/shard.md, Analysis).
 * One concept in ~1,300 lines: growing blocks is one pass whose steps (anchor, twin, join,
 * follow, adopt) read and write the same block table; the spec algebra, propagation tables,
 * strategies, reassociation, segments and the report already live in their own files. */
#include "shard/shard_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/*
 * How blocks are grown (one pass in topological order, then an adoption pass):
 *
 *  - A dot that is neither a registered backward twin nor joinable becomes an ANCHOR: a new
 *    block whose K strategies are Alpa's dot strategies on the mesh (data/column/row and
 *    batch splits on a 1-D mesh, SS/SR/RS in both axis orders plus the S01 variants on a
 *    2-D one). Its backward twins are found right away (docs/shard.md, "twins") and
 *    registered with the operand specs each anchor strategy implies.
 *  - A dot whose owned operands, under every strategy of their block(s), arrive split only
 *    on batch dims of both operands or on one operand's space dim JOINS the block (no
 *    collective). When its two operands come from two different blocks, the second block is
 *    MERGED into the first with a strategy re-index (for each strategy of the first, the
 *    first strategy of the second that makes the dot collective-free). This is the automatic
 *    form of CFP's dot-pair table: Q·Kᵀ and P·V pull the Q, K and V projections into one
 *    block under the head split.
 *  - Any other op whose operands are owned by one block FOLLOWS it: its spec under each
 *    strategy comes from the propagation table. Where propagation would need communication
 *    under some strategy (a reduce over a split dim, an incompatible reshape), the op still
 *    joins and that strategy pays it as the block's intrinsic communication (an all-reduce of
 *    partial sums, or an all-gather of the operand). A MERGE POINT (operands from several
 *    blocks) goes to the block of its deepest operand; the other inputs become resharding
 *    edges between blocks.
 *  - Ops the table does not know (gather, scatter, unknown custom-calls, collectives, loops)
 *    are boundaries: replicated, unowned.
 *  - Finally unowned parameters, constants and their reshape/transpose/broadcast chains whose
 *    users all lie in one block are ADOPTED by it with the spec their users require. Values
 *    with users in several blocks stay unowned (replicated).
 *
 * One concept, the block builder, over 1,000 lines: the growth pass, the backward-twin search,
 * joins, merges, followers and adoption read and write one builder state (pending twins, their
 * required specs, dot ancestry) and must see each other's effects in order. Around it, by
 * concern: the spec algebra (spec.c), dots and their strategies (dots.c), the propagation table
 * and custom-call classes (propagate.c), all-reduce reassociation (reassoc.c), the repeated
 * segments (segments.c), the report (report.c), HLO text queries such as trip counts and
 * already-partitioned modules (hlo_query.c).
 */

/* ---- the builder ---- */

typedef struct builder {
    erg_shard *s;
    erg_error *err;
    int *twin_pb;       /* [n] pending twin block or -1 */
    spec **twin_req;    /* [n] 2*K specs (lhs then rhs) */
    int *twin_rhs_side; /* [n] 1 when the twin is the gradient for the anchor's rhs */
    bool *dotanc;       /* [n] has a dot ancestor */
    int *queue;         /* scratch [n] */
    uint32_t *stamp;    /* [n] visit epochs of depends_on */
    uint32_t epoch;
    int *mindot; /* [n] least topological index of a dot ancestor (INT_MAX: none) */
    int *pend;   /* registered twins not yet placed (merge_blocks re-points them) */
    int *pref;   /* [n] block whose anchor reads this weight chain, or -1 (adopt) */
    int npend;
    erg_progress_fn progress; /* may be NULL */
    void *user;
} builder;

static erg_status oom(builder *b)
{
    return erg_error_set(b->err, ERG_ENOMEM, "out of memory");
}

static pblock *new_block(builder *b, int anchor, int K)
{
    erg_shard *s = b->s;
    if (!ERG__GROW(s->pbs, s->cappb, s->npb + 1, 32))
        return NULL;
    pblock *p = &s->pbs[s->npb];
    memset(p, 0, sizeof *p);
    p->names = erg__calloc((size_t)K, sizeof(char *));
    if (!p->names)
        return NULL;
    p->id = s->npb++;
    p->alive = true;
    p->anchor = anchor;
    p->K = K;
    return p;
}

static member *add_member(builder *b, int pbi, int ins, const char *role)
{
    erg_shard *s = b->s;
    pblock *p = &s->pbs[pbi];
    if (!ERG__GROW(p->mem, p->capmem, p->nmem + 1, 8))
        return NULL;
    member *m = &p->mem[p->nmem];
    memset(m, 0, sizeof *m);
    int nops = s->c->ins[ins].nops;
    m->ins = ins;
    m->role = role;
    m->out = erg__calloc((size_t)p->K, sizeof(spec));
    m->req = erg__calloc((size_t)(nops ? nops : 1) * (size_t)p->K, sizeof(spec));
    if (!m->out || !m->req) {
        erg__free(m->out);
        erg__free(m->req);
        return NULL;
    }
    for (int k = 0; k < p->K; k++)
        m->out[k] = erg__shard_spec_rep();
    for (int k = 0; k < nops * p->K; k++)
        m->req[k] = erg__shard_spec_rep();
    p->nmem++;
    s->nodes[ins].pb = pbi;
    s->nodes[ins].slot = p->nmem - 1;
    return m;
}

static bool add_coll(member *m, int k, int kind, int axis, double bytes)
{
    /* two arrays, one capacity: it grows when both have */
    size_t cap_c = m->capcolls, cap_k = m->capcolls;
    if (!ERG__GROW(m->colls, cap_c, (size_t)m->ncolls + 1, 4) ||
        !ERG__GROW(m->coll_k, cap_k, (size_t)m->ncolls + 1, 4))
        return false;
    m->capcolls = cap_c;
    m->colls[m->ncolls] = (coll){kind, axis, bytes};
    m->coll_k[m->ncolls++] = k;
    return true;
}

static const spec *out_spec(const erg_shard *s, int ins, int k)
{
    const node *nd = &s->nodes[ins];
    return &s->pbs[nd->pb].mem[nd->slot].out[k];
}

static bool is_chain_op(const hlo_instr *in)
{
    return in->op == HLO_OP_RESHAPE || in->op == HLO_OP_TRANSPOSE || in->op == HLO_OP_BITCAST ||
           in->op == HLO_OP_COPY || in->op == HLO_OP_CONVERT ||
           (in->op == HLO_OP_OTHER && !strcmp(in->opcode, "reverse"));
}

static bool is_shape_perm(const hlo_shape *a, const hlo_shape *b)
{
    if (a->kind != HLO_ARRAY || b->kind != HLO_ARRAY || a->rank != b->rank)
        return false;
    bool used[HLO_MAX_RANK] = {0};
    for (int i = 0; i < a->rank; i++) {
        int f = -1;
        for (int j = 0; j < b->rank; j++)
            if (!used[j] && b->dims[j] == a->dims[i]) {
                f = j;
                break;
            }
        if (f < 0)
            return false;
        used[f] = true;
    }
    return true;
}

/* Spec of a value of shape `g` that is a dimension permutation of `o` with spec `os`
 * (dims matched by size, first unused). */
static spec perm_spec(const hlo_shape *o, const spec *os, const hlo_shape *g)
{
    spec r = erg__shard_spec_rep();
    bool used[HLO_MAX_RANK] = {0};
    for (int i = 0; i < g->rank; i++)
        for (int j = 0; j < o->rank; j++)
            if (!used[j] && o->dims[j] == g->dims[i]) {
                used[j] = true;
                r.d[i] = os->d[j];
                break;
            }
    return r;
}

static int64_t prod_dims(const hlo_shape *sh, const int *idx, int n)
{
    int64_t p = 1;
    for (int k = 0; k < n; k++)
        p *= sh->dims[idx[k]];
    return p;
}

/* Whether `v` depends on `a` (a path a -> ... -> v). A backward search from v over nodes
 * after a in topological order that have a dot ancestor, stopped after DEP_BUDGET visits so
 * that the analysis stays linear in the module size; past the budget, the necessary
 * condition "v has a dot ancestor no later than a" decides (in a training step the
 * gradients depend on every forward dot through the loss, so this only matters for
 * forward-only graphs with independent branches, which are small). */
#define DEP_BUDGET 4096
static bool depends_on(builder *b, int v, int a)
{
    erg_shard *s = b->s;
    int ta = s->nodes[a].topo;
    if (++b->epoch == 0) {
        memset(b->stamp, 0, (size_t)s->n * sizeof *b->stamp);
        b->epoch = 1;
    }
    int sp = 0, visits = 0;
    b->queue[sp++] = v;
    b->stamp[v] = b->epoch;
    while (sp > 0) {
        int x = b->queue[--sp];
        if (x == a)
            return true;
        if (++visits > DEP_BUDGET)
            return b->mindot[v] <= ta;
        const hlo_instr *in = &s->c->ins[x];
        for (int j = 0; j < in->nops; j++) {
            int o = in->ops[j];
            if (b->stamp[o] == b->epoch || s->nodes[o].topo < ta || (o != a && !b->dotanc[o]))
                continue;
            b->stamp[o] = b->epoch;
            b->queue[sp++] = o;
        }
    }
    return false;
}

/* Find the backward twin of anchor `a` with respect to its operand `side` (docs/shard.md).
 *
 * Bounded so that the analysis stays near-linear: a search examines at most s->twin_window
 * candidate dots (later dots, in no block yet, that read the operand's chain) and reads at
 * most TWIN_USERS_PER_CANDIDATE x that many users; a search that reaches either bound stops
 * without a twin and is counted (s->twin_cut, named in the report). In the shared HLO and
 * the generated GPT steps a search meets at most 8 candidates and 22 users; a weight read by
 * thousands of chained dots (bench/gen_chain_hlo.py) meets one candidate per later dot,
 * which made the analysis cubic before the bound (4,000 dots took over a minute). The cheap
 * test of a candidate (do its strategies fit the anchor's, dot_eval) runs before the
 * dependence test (depends_on, up to DEP_BUDGET visits); both must hold, so the order does
 * not change which twin is found. */
#define TWIN_USERS_PER_CANDIDATE 64
static erg_status find_twin(builder *b, int pbi, int a, const dotinfo *d, int side, const strat *st)
{
    long users_seen = 0, cands_seen = 0;
    long max_users = (long)b->s->twin_window * TWIN_USERS_PER_CANDIDATE;
    erg_shard *s = b->s;
    const hlo_comp *c = s->c;
    int K = s->pbs[pbi].K;
    const hlo_instr *A = &c->ins[a];
    /* The chain above the operand, with the operand's spec carried back up per strategy. */
    int chain[16];
    int nch = 0;
    int v = A->ops[side];
    spec *cs = erg__calloc((size_t)K * 16, sizeof(spec));
    spec *cur = erg__calloc((size_t)K * 8, sizeof(spec)); /* BFS frontier specs */
    int *front = erg__calloc(64, sizeof(int));
    spec *fspec = erg__calloc((size_t)K * 64, sizeof(spec));
    erg_status ret = ERG_OK;
    if (!cs || !cur || !front || !fspec) {
        ret = oom(b);
        goto out;
    }
    for (int k = 0; k < K; k++)
        cs[k] = side ? st[k].r : st[k].l;
    chain[nch++] = v;
    while (nch < 16 && is_chain_op(&c->ins[v]) && c->ins[v].nops >= 1) {
        int up = c->ins[v].ops[0];
        for (int k = 0; k < K; k++)
            cs[nch * K + k] = erg__shard_prop_bwd(s, v, 0, &cs[(nch - 1) * K + k]);
        v = up;
        chain[nch++] = v;
    }
    const hlo_shape *O = &A->shape;
    int64_t space_prod = side ? prod_dims(&c->ins[A->ops[1]].shape, d->rs, d->nrs)
                              : prod_dims(&c->ins[A->ops[0]].shape, d->ls, d->nls);
    for (int ci = 0; ci < nch; ci++) {
        /* BFS forward through chain ops from chain[ci], carrying specs. */
        int nf = 0;
        front[nf] = chain[ci];
        for (int k = 0; k < K; k++)
            fspec[nf * K + k] = cs[ci * K + k];
        nf++;
        for (int fi = 0; fi < nf; fi++) {
            int x = front[fi];
            for (int u = 0; u < s->nodes[x].nusers; u++) {
                int w = s->nodes[x].users[u];
                const hlo_instr *W = &c->ins[w];
                if (++users_seen > max_users)
                    goto cut;
                if (w == a)
                    continue;
                if (is_chain_op(W) && W->nops >= 1 && W->ops[0] == x && nf < 64) {
                    bool ok = true;
                    for (int k = 0; k < K && ok; k++) {
                        int ar;
                        ok = erg__shard_prop_fwd(s, w, 0, &fspec[fi * K + k], &fspec[nf * K + k],
                                                 &ar) == PROP_FREE;
                    }
                    if (ok)
                        front[nf++] = w;
                    continue;
                }
                if (W->op != HLO_OP_DOT || s->nodes[w].pb >= 0 || b->twin_pb[w] >= 0 ||
                    s->nodes[w].topo <= s->nodes[a].topo)
                    continue;
                if (++cands_seen > s->twin_window)
                    goto cut;
                int q = W->ops[0] == x ? 0 : W->ops[1] == x ? 1 : -1;
                if (q < 0 || W->ops[0] == W->ops[1])
                    continue;
                int other = W->ops[1 - q];
                if (!is_shape_perm(O, &c->ins[other].shape))
                    continue;
                dotinfo td;
                if (!erg__shard_dot_info(s, w, &td))
                    continue;
                int64_t cp = 1;
                for (int k = 0; k < td.nc; k++)
                    cp *= c->ins[x].shape.dims[q ? td.rc[k] : td.lc[k]];
                if (cp != space_prod)
                    continue;
                spec *req = erg__calloc((size_t)K * 2, sizeof(spec));
                if (!req) {
                    ret = oom(b);
                    goto out;
                }
                bool ok = true;
                for (int k = 0; k < K && ok; k++) {
                    spec g = perm_spec(O, &st[k].o, &c->ins[other].shape);
                    req[q * K + k] = fspec[fi * K + k];
                    req[(1 - q) * K + k] = g;
                    spec o;
                    int ar;
                    ok = erg__shard_dot_eval(s, w, &td, &req[k], &req[K + k], &o, &ar);
                }
                if (!ok || (b->dotanc[other] && !depends_on(b, other, a))) {
                    erg__free(req);
                    continue;
                }
                b->twin_pb[w] = pbi;
                b->pend[b->npend++] = w;
                b->twin_req[w] = req;
                b->twin_rhs_side[w] = side;
                goto out;
            }
        }
    }
    goto out;
cut:
    if (s->twin_cut++ == 0)
        s->twin_cut_anchor = a;
out:
    erg__free(cs);
    erg__free(cur);
    erg__free(front);
    erg__free(fspec);
    return ret;
}

static erg_status set_dot_member(builder *b, int pbi, int i, const spec *req, const char *role)
{
    erg_shard *s = b->s;
    int K = s->pbs[pbi].K;
    dotinfo d;
    if (!erg__shard_dot_info(s, i, &d))
        return erg_error_set(b->err, ERG_EINTERNAL, "dot '%s' lost its dimensions",
                             s->c->ins[i].name);
    member *m = add_member(b, pbi, i, role);
    if (!m)
        return oom(b);
    const hlo_instr *in = &s->c->ins[i];
    for (int k = 0; k < K; k++) {
        int ar;
        m->req[k] = req[k];
        m->req[K + k] = req[K + k];
        if (!erg__shard_dot_eval(s, i, &d, &req[k], &req[K + k], &m->out[k], &ar)) {
            /* Cannot happen for registered twins; be safe: replicated compute. */
            m->req[k] = m->req[K + k] = m->out[k] = erg__shard_spec_rep();
            ar = 0;
        }
        if (ar) {
            int axis = ar == 3 ? SP_BOTH : ar == 1 ? 0 : 1;
            double bytes =
                erg__hlo_shape_bytes(&in->shape) / erg__shard_tiles(s, &m->out[k], in->shape.rank);
            if (!add_coll(m, k, COLL_AR, axis, bytes))
                return oom(b);
        }
    }
    s->nodes[i].is_dotmember = true;
    return ERG_OK;
}

static erg_status new_anchor(builder *b, int i)
{
    erg_shard *s = b->s;
    dotinfo d;
    strat st[64];
    int K = erg__shard_dot_info(s, i, &d) ? erg__shard_enumerate_dot(s, i, &d, st, 64) : 0;
    if (K == 0)
        return ERG_ENOTFOUND; /* no valid strategy: leave it replicated */
    pblock *p = new_block(b, i, K);
    if (!p)
        return oom(b);
    int pbi = p->id;
    for (int k = 0; k < K; k++)
        if (erg__shard_strategy_name(s, i, &st[k], &s->pbs[pbi].names[k]))
            return oom(b);
    spec *req = erg__calloc((size_t)K * 2, sizeof(spec));
    if (!req)
        return oom(b);
    for (int k = 0; k < K; k++) {
        req[k] = st[k].l;
        req[K + k] = st[k].r;
    }
    erg_status rc = set_dot_member(b, pbi, i, req, "anchor");
    erg__free(req);
    if (rc)
        return rc;
    s->nodes[i].is_anchor = true;
    for (int side = 0; side < 2; side++)
        if ((rc = find_twin(b, pbi, i, &d, side, st)))
            return rc;
    return ERG_OK;
}

/* Merge block q into block p: q's strategy sigma[k] is used when p uses k. */
static erg_status merge_blocks(builder *b, int p, int q, const int *sigma)
{
    erg_shard *s = b->s;
    pblock *P = &s->pbs[p], *Q = &s->pbs[q];
    int K = P->K, KQ = Q->K;
    for (int mi = 0; mi < Q->nmem; mi++) {
        member *qm = &Q->mem[mi];
        int nops = s->c->ins[qm->ins].nops;
        member *m = add_member(b, p, qm->ins, qm->role);
        if (!m)
            return oom(b);
        P = &s->pbs[p];
        Q = &s->pbs[q];
        for (int k = 0; k < K; k++) {
            m->out[k] = qm->out[sigma[k]];
            for (int j = 0; j < nops; j++)
                m->req[j * K + k] = qm->req[j * KQ + sigma[k]];
        }
        for (int c = 0; c < qm->ncolls; c++)
            for (int k = 0; k < K; k++)
                if (qm->coll_k[c] == sigma[k] &&
                    !add_coll(m, k, qm->colls[c].kind, qm->colls[c].axis, qm->colls[c].bytes))
                    return oom(b);
        erg__free(qm->out);
        erg__free(qm->req);
        erg__free(qm->colls);
        erg__free(qm->coll_k);
    }
    Q->nmem = 0;
    Q->alive = false;
    for (int t = 0; t < b->npend; t++) {
        int i = b->pend[t];
        if (b->twin_pb[i] == q) {
            spec *r = erg__calloc((size_t)K * 2, sizeof(spec));
            if (!r)
                return oom(b);
            for (int k = 0; k < K; k++) {
                r[k] = b->twin_req[i][sigma[k]];
                r[K + k] = b->twin_req[i][KQ + sigma[k]];
            }
            erg__free(b->twin_req[i]);
            b->twin_req[i] = r;
            b->twin_pb[i] = p;
        }
    }
    return ERG_OK;
}

/* Try to join a non-anchor dot into the block(s) owning its operands without collectives. */
static erg_status try_join_dot(builder *b, int i, bool *joined)
{
    erg_shard *s = b->s;
    const hlo_instr *in = &s->c->ins[i];
    *joined = false;
    dotinfo d;
    if (!erg__shard_dot_info(s, i, &d))
        return ERG_OK;
    int o0 = s->nodes[in->ops[0]].pb, o1 = s->nodes[in->ops[1]].pb;
    if (o0 < 0 && o1 < 0)
        return ERG_OK;
    int p = o0 >= 0 ? o0 : o1;
    int K = s->pbs[p].K;
    int q = (o0 >= 0 && o1 >= 0 && o0 != o1) ? o1 : -1;
    int KQ = q >= 0 ? s->pbs[q].K : 0;
    int *sigma = erg__calloc((size_t)K, sizeof(int));
    spec *req = erg__calloc((size_t)K * 2, sizeof(spec));
    if (!sigma || !req) {
        erg__free(sigma);
        erg__free(req);
        return oom(b);
    }
    /* Joining must keep the work divided: a dot with a weight-like (unowned) operand joins
     * only if every strategy splits it (otherwise it is an anchor with its own choices, e.g.
     * the attention output projection); an activation x activation dot (attention) joins
     * if some strategy splits it. */
    bool ok = true, any_split = false;
    for (int k = 0; k < K && ok; k++) {
        spec l = erg__shard_spec_rep(), r = erg__shard_spec_rep();
        if (o0 == p)
            l = *out_spec(s, in->ops[0], k);
        if (o1 == p)
            r = *out_spec(s, in->ops[1], k);
        if (q < 0) {
            /* An unowned side adopts the batch splits (local slicing, free). */
            if (o0 < 0 || o1 < 0) {
                for (int t = 0; t < d.nb; t++) {
                    if (o0 < 0)
                        l.d[d.lb[t]] = r.d[d.rb[t]];
                    else
                        r.d[d.rb[t]] = l.d[d.lb[t]];
                }
            }
            spec o;
            int ar;
            ok = erg__shard_dot_eval(s, i, &d, &l, &r, &o, &ar) && !ar;
            bool split = ok && erg__shard_tiles(s, &o, in->shape.rank) > 1;
            any_split |= split;
            if (o0 < 0 || o1 < 0)
                ok = split;
        } else {
            int found = -1;
            bool found_split = false;
            for (int t = -1; t < KQ; t++) {
                int kq = t < 0 ? (k < KQ ? k : 0) : t;
                spec rr = *out_spec(s, in->ops[1], kq), o;
                int ar;
                /* The same strategy index first (like CFP's identity re-index), then the
                 * first one that splits the dot, then any collective-free one. */
                if (erg__shard_dot_eval(s, i, &d, &l, &rr, &o, &ar) && !ar &&
                    (found < 0 || erg__shard_tiles(s, &o, in->shape.rank) > 1)) {
                    bool split = erg__shard_tiles(s, &o, in->shape.rank) > 1;
                    if (found >= 0 && !split)
                        continue;
                    found = kq;
                    r = rr;
                    found_split = split;
                    if (split || t < 0)
                        break;
                }
            }
            any_split |= found_split;
            ok = found >= 0;
            sigma[k] = found;
        }
        req[k] = l;
        req[K + k] = r;
    }
    erg_status rc = ERG_OK;
    ok = ok && any_split;
    if (ok) {
        if (q >= 0)
            rc = merge_blocks(b, p, q, sigma);
        if (!rc)
            rc = set_dot_member(b, p, i, req, "dot");
        *joined = rc == ERG_OK;
        /* A joined forward dot has backward twins too (e.g. the attention dots). */
        strat *st = *joined ? erg__calloc((size_t)K, sizeof(strat)) : NULL;
        if (*joined && !st)
            rc = oom(b);
        if (st) {
            const member *m = &s->pbs[p].mem[s->nodes[i].slot];
            for (int k = 0; k < K; k++) {
                st[k].l = m->req[k];
                st[k].r = m->req[K + k];
                st[k].o = m->out[k];
            }
            for (int side = 0; side < 2 && !rc; side++)
                rc = find_twin(b, p, i, &d, side, st);
            erg__free(st);
        }
    }
    erg__free(sigma);
    erg__free(req);
    return rc;
}

static bool is_boundary_op(const erg_shard *s, const hlo_instr *in)
{
    if (in->op == HLO_OP_GTE)
        return !(s->c->ins[in->ops[0]].op == HLO_OP_CUSTOM_CALL &&
                 erg__shard_cc_of(s, &s->c->ins[in->ops[0]]) == CC_ATTENTION);
    switch (in->op) {
    case HLO_OP_GATHER:
    case HLO_OP_SCATTER:
    case HLO_OP_COLLECTIVE:
    case HLO_OP_WHILE:
    case HLO_OP_CALL:
    case HLO_OP_FUSION:
    case HLO_OP_RNG:
    case HLO_OP_DOT:
    case HLO_OP_CONVOLUTION:
        return true;
    case HLO_OP_CUSTOM_CALL:
        return erg__shard_cc_of(s, in) == CC_OPAQUE;
    case HLO_OP_OTHER:
        return !erg__shard_is_dynamic_slice(in);
    default:
        return false;
    }
}

/* Whether instruction o's spec describes an array: arrays of rank > 0, and the tuple result
 * of a fused attention custom-call (its spec is element 0's). */
static bool carries_spec(const erg_shard *s, int o)
{
    const hlo_instr *in = &s->c->ins[o];
    if (in->shape.kind == HLO_ARRAY)
        return in->shape.rank > 0;
    return in->op == HLO_OP_CUSTOM_CALL && s->nodes[o].cc == CC_ATTENTION;
}

/* A non-dot instruction whose operands are owned: follow the block of its deepest operand. */
static erg_status follow(builder *b, int i)
{
    erg_shard *s = b->s;
    const hlo_instr *in = &s->c->ins[i];
    int p = -1, deepest = -1;
    bool merge = false;
    for (int j = 0; j < in->nops; j++) {
        int o = in->ops[j], q = s->nodes[o].pb;
        if (q < 0 || !carries_spec(s, o))
            continue;
        if (p >= 0 && q != p)
            merge = true;
        if (s->nodes[o].topo > deepest) {
            deepest = s->nodes[o].topo;
            p = q;
        }
    }
    if (p < 0)
        return ERG_OK;
    int K = s->pbs[p].K;
    member *m = add_member(b, p, i, merge ? "merge" : "follow");
    if (!m)
        return oom(b);
    for (int k = 0; k < K; k++) {
        bool have = false;
        int status = PROP_FREE, ar = -1, definer = -1;
        spec out = erg__shard_spec_rep();
        /* First operand of block p defines the output spec. */
        for (int j = 0; j < in->nops && !have; j++) {
            int o = in->ops[j];
            if (s->nodes[o].pb != p || !carries_spec(s, o))
                continue;
            status = erg__shard_prop_fwd(s, i, j, out_spec(s, o, k), &out, &ar);
            have = true;
            definer = j;
            if (status == PROP_FAIL)
                out = erg__shard_spec_rep();
            else if (status == PROP_FREE || status == PROP_PARTIAL)
                m->req[j * K + k] = *out_spec(s, o, k);
        }
        if (!erg__shard_spec_valid_for(s, &in->shape, &out))
            out = erg__shard_spec_rep();
        m->out[k] = out;
        /* Custom-calls that drop some splits (softmax-like, attention) need their input
         * gathered there: the definer's requirement follows from the output. */
        if (in->op == HLO_OP_CUSTOM_CALL && definer >= 0 && status == PROP_FREE)
            m->req[definer * K + k] = erg__shard_prop_bwd(s, i, definer, &out);
        if (status == PROP_PARTIAL && ar >= 0) {
            double bytes =
                erg__hlo_shape_bytes(&in->shape) / erg__shard_tiles(s, &out, in->shape.rank);
            if (!add_coll(m, k, COLL_AR, ar, bytes))
                return oom(b);
        }
        /* Every other operand must arrive as this op needs it. */
        for (int j = 0; j < in->nops; j++) {
            if (j == definer && (status == PROP_FREE || status == PROP_PARTIAL))
                continue;
            m->req[j * K + k] = (status == PROP_PARTIAL && j == 0)
                                    ? m->req[j * K + k]
                                    : erg__shard_prop_bwd(s, i, j, &out);
        }
    }
    return ERG_OK;
}

static erg_status adopt(builder *b, int i)
{
    erg_shard *s = b->s;
    const hlo_instr *in = &s->c->ins[i];
    node *nd = &s->nodes[i];
    if (nd->pb >= 0 || nd->sink || in->shape.kind != HLO_ARRAY)
        return ERG_OK;
    switch (in->op) {
    case HLO_OP_PARAMETER:
    case HLO_OP_CONSTANT:
    case HLO_OP_IOTA:
    case HLO_OP_BROADCAST:
    case HLO_OP_RESHAPE:
    case HLO_OP_TRANSPOSE:
    case HLO_OP_CONVERT:
    case HLO_OP_COPY:
    case HLO_OP_BITCAST:
        break;
    case HLO_OP_CUSTOM_CALL:
        /* weights behind a same-shape custom-call (Neuron's TransferWithStaticRing) */
        if (nd->cc != CC_ELEMENTWISE && nd->cc != CC_SAMESHAPE && nd->cc != CC_LASTDIM)
            return ERG_OK;
        break;
    case HLO_OP_GTE:
        /* loop-carried state of a while body (a stacked weight) */
        if (!erg__shard_is_param_gte(s->c, in))
            return ERG_OK;
        break;
    case HLO_OP_ELEMENTWISE:
        /* CFP's "attach the remaining instructions" (its third phase; docs/shard.md): a computation
         * on unowned values whose users all lie in one block, e.g. the in-graph optimizer's
         * update of its moment estimates, is done on that block's shards */
        if (in->shape.rank == 0)
            return ERG_OK;
        break;
    default:
        if (!erg__shard_is_dynamic_slice(in)) /* one layer of a stacked weight */
            return ERG_OK;
    }
    for (int j = 0; j < in->nops; j++)
        if (s->nodes[in->ops[j]].pb >= 0)
            return ERG_OK;
    int p = -1, first_user = -1;
    bool several = false;
    for (int u = 0; u < nd->nusers; u++) {
        int w = nd->users[u];
        if (s->nodes[w].sink)
            continue;
        int q = s->nodes[w].pb;
        if (q < 0 || (p >= 0 && q != p)) {
            several = true;
            break;
        }
        p = q;
        if (first_user < 0)
            first_user = w;
    }
    if (several) {
        /* A weight (or its transfer/transpose chain) that an anchor of block b->pref[i]
         * reads, also used elsewhere (the optimizer update of a training step, a tied
         * embedding): it takes that block's spec, and its other users reshard from it
         * (edges, or gathers for replicated users) instead of the weight staying whole. */
        p = b->pref[i];
        first_user = -1;
        for (int u = 0; p >= 0 && u < nd->nusers && first_user < 0; u++)
            if (s->nodes[nd->users[u]].pb == p && !s->nodes[nd->users[u]].sink)
                first_user = nd->users[u];
        if (first_user < 0)
            return ERG_OK;
    }
    if (p < 0)
        return ERG_OK;
    int K = s->pbs[p].K;
    const hlo_instr *U = &s->c->ins[first_user];
    int pos = 0;
    while (pos < U->nops && U->ops[pos] != i)
        pos++;
    member *m = add_member(b, p, i, "adopt");
    if (!m)
        return oom(b);
    const member *um = &s->pbs[p].mem[s->nodes[first_user].slot];
    for (int k = 0; k < K; k++) {
        spec o = um->req[pos * K + k];
        if (!erg__shard_spec_valid_for(s, &in->shape, &o))
            o = erg__shard_spec_rep();
        m->out[k] = o;
        for (int j = 0; j < in->nops; j++)
            m->req[j * K + k] = erg__shard_prop_bwd(s, i, j, &o);
    }
    return ERG_OK;
}

/* ---- graph basics ---- */

static erg_status build_graph(erg_shard *s, erg_error *err)
{
    const hlo_comp *c = s->c;
    int n = c->n;
    int *cnt = erg__calloc((size_t)n, sizeof(int));
    int *indeg = erg__calloc((size_t)n, sizeof(int));
    if (!cnt || !indeg) {
        erg__free(cnt);
        erg__free(indeg);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c->ins[i].nops; j++)
            cnt[c->ins[i].ops[j]]++;
    for (int i = 0; i < n; i++) {
        s->nodes[i].pb = -1;
        s->nodes[i].users = cnt[i] ? erg__malloc((size_t)cnt[i] * sizeof(int)) : NULL;
        if (cnt[i] && !s->nodes[i].users) {
            erg__free(cnt);
            erg__free(indeg);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c->ins[i].nops; j++) {
            int o = c->ins[i].ops[j];
            bool dup = false;
            for (int u = 0; u < s->nodes[o].nusers; u++)
                dup |= s->nodes[o].users[u] == i;
            if (!dup)
                s->nodes[o].users[s->nodes[o].nusers++] = i;
        }
    /* Depth-first post-order from the instructions in text order: the text order itself
     * when it is already topological (as XLA prints it). indeg[] is the DFS state:
     * 0 new, 1 on the stack, 2 done; cnt[] the next operand to visit. */
    int qt = 0;
    int *stack = erg__malloc((size_t)n * sizeof(int));
    if (!stack) {
        erg__free(cnt);
        erg__free(indeg);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    memset(cnt, 0, (size_t)n * sizeof(int));
    bool cyclic = false;
    for (int r = 0; r < n && !cyclic; r++) {
        if (indeg[r])
            continue;
        int sp = 0;
        stack[sp++] = r;
        indeg[r] = 1;
        while (sp > 0 && !cyclic) {
            int v = stack[sp - 1];
            if (cnt[v] < c->ins[v].nops) {
                int o = c->ins[v].ops[cnt[v]++];
                if (indeg[o] == 1)
                    cyclic = true;
                else if (indeg[o] == 0) {
                    indeg[o] = 1;
                    stack[sp++] = o;
                }
            } else {
                indeg[v] = 2;
                s->nodes[v].topo = qt;
                s->topo[qt++] = v;
                sp--;
            }
        }
    }
    erg__free(stack);
    if (cyclic)
        qt = -1;
    erg__free(cnt);
    if (qt != n) {
        /* The parser rejects cycles; kept for modules built by other means. */
        long line = 0, col = 0;
        int at = 0;
        while (at < n && indeg[at] != 1)
            at++;
        erg__hlo_line_col(s->m, c->ins[at < n ? at : 0].start, &line, &col);
        erg__free(indeg);
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: computation '%s' has a cycle through '%s'",
                             s->m->filename, line, c->name, c->ins[at < n ? at : 0].name);
    }
    erg__free(indeg);
    for (int i = 0; i < n; i++) {
        const hlo_instr *in = &c->ins[i];
        int8_t h = -1;
        s->nodes[i].cc =
            in->op == HLO_OP_CUSTOM_CALL ? erg__shard_cc_classify(s->m, c, in, &h) : CC_NONE;
        s->nodes[i].attn_head = h;
    }
    for (int i = 0; i < n; i++) {
        const hlo_instr *in = &c->ins[i];
        s->nodes[i].sink = in->op == HLO_OP_TUPLE || (i == c->root && in->shape.kind != HLO_ARRAY);
        s->nodes[i].boundary = is_boundary_op(s, in);
    }
    return ERG_OK;
}

/* ---- public ---- */

erg_status erg_shard_analyze(const erg_hlo_module *m, int mesh0, int mesh1, erg_shard **out,
                             erg_error *err)
{
    return erg_shard_analyze_computation(m, NULL, mesh0, mesh1, out, err);
}

void erg_shard_analyze_options_init(erg_shard_analyze_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->twin_window = ERG_SHARD_TWIN_WINDOW;
}

static erg_status analyze_on(const erg_hlo_module *m, const char *computation, int mesh0, int mesh1,
                             const erg_shard_analyze_options *o, erg_shard **out, erg_error *err);

erg_status erg_shard_analyze_computation(const erg_hlo_module *m, const char *computation,
                                         int mesh0, int mesh1, erg_shard **out, erg_error *err)
{
    erg_shard_analyze_options o;
    erg_shard_analyze_options_init(&o);
    o.computation = computation;
    return erg_shard_analyze_opts(m, mesh0, mesh1, &o, out, err);
}

erg_status erg_shard_analyze_opts(const erg_hlo_module *m, int mesh0, int mesh1,
                                  const erg_shard_analyze_options *opts, erg_shard **out,
                                  erg_error *err)
{
    erg_shard_analyze_options o;
    erg_shard_analyze_options_init(&o);
    if (opts)
        o = *opts;
    if (o.twin_window < 1 || o.twin_window > 1000000)
        return erg_error_set(err, ERG_EINVAL, "twin window %d: must be 1 to 1000000",
                             o.twin_window);
    const char *computation = o.computation;
    erg_error le;
    erg_status st = analyze_on(m, computation, mesh0, mesh1, &o, out, &le);
    if (st && err)
        *err = le;
    /* A 1-D mesh of n devices whose size divides no dim: view it as a 2-D mesh a x b (the same
     * devices, ids i*b + j) so that a dim divisible by a factor can be split on that axis and
     * replicated on the other (1x6 as 2x3 or 3x2). */
    int n = mesh0 * mesh1;
    if (st != ERG_ENOTFOUND || (mesh0 != 1 && mesh1 != 1) || !strstr(le.msg, "has a strategy"))
        return st;
    for (int b = n / 2; b >= 2; b--) {
        if (n % b)
            continue;
        erg_error e2;
        if (analyze_on(m, computation, n / b, b, &o, out, &e2) == ERG_OK) {
            (*out)->mesh_req[0] = mesh0;
            (*out)->mesh_req[1] = mesh1;
            return ERG_OK;
        }
    }
    return st;
}

/* The storage a dot operand v reads: a parameter, or in a while body the get-tuple-element
 * of the loop state, reached through reshape/transpose/convert/copy, same-shape custom-calls
 * (Neuron's TransferWithStaticRing) and the dynamic-slice that takes one layer out of a
 * stacked weight; -1 if none. */
static int weight_storage(const erg_shard *s, int v)
{
    for (int guard = 0; guard < 32; guard++) {
        const hlo_instr *V = &s->c->ins[v];
        if (V->op == HLO_OP_PARAMETER || erg__shard_is_param_gte(s->c, V))
            return v;
        bool through = is_chain_op(V) || erg__shard_is_dynamic_slice(V) ||
                       (V->op == HLO_OP_CUSTOM_CALL &&
                        (s->nodes[v].cc == CC_ELEMENTWISE || s->nodes[v].cc == CC_SAMESHAPE));
        if (!through || V->nops < 1)
            return -1;
        v = V->ops[0];
    }
    return -1;
}

static erg_status analyze_on(const erg_hlo_module *m, const char *computation, int mesh0, int mesh1,
                             const erg_shard_analyze_options *opt, erg_shard **out, erg_error *err)
{
    if (!m || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_analyze: NULL argument");
    *out = NULL;
    if (mesh0 < 1 || mesh1 < 1 || mesh0 > 1024 || mesh1 > 1024 || mesh0 * mesh1 < 2)
        return erg_error_set(err, ERG_EINVAL,
                             "mesh %dx%d: both sizes must be >= 1 and their product >= 2", mesh0,
                             mesh1);
    erg_status pst = erg__hlo_check_unpartitioned(m, err);
    if (pst)
        return pst;
    int ci = m->entry;
    if (computation) {
        ci = erg__hlo_find_comp(m, computation);
        if (ci < 0)
            return erg_error_set(err, ERG_ENOTFOUND, "%s: no computation named '%s'", m->filename,
                                 computation);
    }
    erg_shard *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->m = m;
    s->c = &m->comps[ci];
    s->trips = 1;
    if (ci != m->entry) {
        long t = erg__hlo_trip_count(m, ci, &s->loop);
        if (t > 0)
            s->trips = t;
    }
    s->mesh[0] = s->mesh_req[0] = mesh0;
    s->mesh[1] = s->mesh_req[1] = mesh1;
    s->n = s->c->n;
    s->twin_window = opt->twin_window;
    s->twin_cut_anchor = -1;
    builder B = {.s = s, .err = err, .progress = opt->progress, .user = opt->user}, *b = &B;
    erg_status st = ERG_ENOMEM;
    s->nodes = erg__calloc((size_t)s->n, sizeof *s->nodes);
    s->topo = erg__calloc((size_t)s->n, sizeof(int));
    b->twin_pb = erg__malloc((size_t)s->n * sizeof(int));
    b->twin_req = erg__calloc((size_t)s->n, sizeof(spec *));
    b->twin_rhs_side = erg__calloc((size_t)s->n, sizeof(int));
    b->dotanc = erg__calloc((size_t)s->n, sizeof(bool));
    b->stamp = erg__calloc((size_t)s->n, sizeof *b->stamp);
    b->mindot = erg__malloc((size_t)s->n * sizeof(int));
    b->pend = erg__malloc((size_t)s->n * sizeof(int));
    b->pref = erg__malloc((size_t)s->n * sizeof(int));
    b->queue = erg__calloc((size_t)s->n, sizeof(int));
    if (!s->nodes || !s->topo || !b->twin_pb || !b->twin_req || !b->twin_rhs_side || !b->dotanc ||
        !b->queue || !b->stamp || !b->mindot || !b->pend || !b->pref) {
        erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < s->n; i++)
        b->twin_pb[i] = -1;
    if ((st = build_graph(s, err)))
        goto done;
    for (int t = 0; t < s->n; t++) {
        int i = s->topo[t];
        const hlo_instr *in = &s->c->ins[i];
        b->mindot[i] = INT_MAX;
        for (int j = 0; j < in->nops; j++) {
            int o = in->ops[j];
            bool isdot = s->c->ins[o].op == HLO_OP_DOT || s->c->ins[o].op == HLO_OP_CONVOLUTION;
            if (isdot || b->dotanc[o])
                b->dotanc[i] = true;
            int md = isdot ? ERG__MIN(s->nodes[o].topo, b->mindot[o]) : b->mindot[o];
            b->mindot[i] = ERG__MIN(b->mindot[i], md);
        }
    }
    /* Growth in topological order. */
    for (int t = 0; t < s->n; t++) {
        int i = s->topo[t];
        const hlo_instr *in = &s->c->ins[i];
        node *nd = &s->nodes[i];
        if (b->progress && (t & 1023) == 0 && b->progress(b->user, (uint64_t)t, (uint64_t)s->n)) {
            st = erg_error_set(err, ERG_ECANCELED, "analysis canceled");
            goto done;
        }
        if (nd->pb >= 0 || nd->sink)
            continue;
        if (in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION) {
            if (b->twin_pb[i] >= 0) {
                int p = b->twin_pb[i];
                if ((st = set_dot_member(b, p, i, b->twin_req[i], "twin")))
                    goto done;
                nd->is_twin = true;
                /* Weight marking: the rhs-side twin's anchor operand chain. */
                continue;
            }
            bool joined = false;
            if ((st = try_join_dot(b, i, &joined)))
                goto done;
            if (joined)
                continue;
            st = new_anchor(b, i);
            if (st == ERG_ENOTFOUND)
                st = ERG_OK;
            if (st)
                goto done;
            continue;
        }
        if (nd->boundary || (in->shape.kind != HLO_ARRAY && !carries_spec(s, i)))
            continue;
        if ((st = follow(b, i)))
            goto done;
    }
    /* Weight chains first read by an anchor: their preferred block (adopt). */
    for (int i = 0; i < s->n; i++)
        b->pref[i] = -1;
    for (int p = 0; p < s->npb; p++) {
        if (!s->pbs[p].alive)
            continue;
        for (int mi = 0; mi < s->pbs[p].nmem; mi++) {
            int a = s->pbs[p].mem[mi].ins;
            if (!s->nodes[a].is_anchor)
                continue;
            int side = weight_storage(s, s->c->ins[a].ops[1]) >= 0   ? 1
                       : weight_storage(s, s->c->ins[a].ops[0]) >= 0 ? 0
                                                                     : -1;
            for (int v = side >= 0 ? s->c->ins[a].ops[side] : -1, guard = 0; v >= 0 && guard < 32;
                 guard++) {
                if (s->nodes[v].pb >= 0 || b->pref[v] >= 0)
                    break;
                b->pref[v] = p;
                const hlo_instr *V = &s->c->ins[v];
                if (V->op == HLO_OP_PARAMETER || erg__shard_is_param_gte(s->c, V) || V->nops < 1)
                    break;
                v = V->ops[0];
            }
        }
    }
    for (int t = s->n - 1; t >= 0; t--)
        if ((st = adopt(b, s->topo[t])))
            goto done;
    /* Weights: the storage (weight_storage) an anchor reads, adopted by its block. */
    for (int p = 0; p < s->npb; p++) {
        if (!s->pbs[p].alive)
            continue;
        for (int mi = 0; mi < s->pbs[p].nmem; mi++) {
            int a = s->pbs[p].mem[mi].ins;
            if (!s->nodes[a].is_anchor)
                continue;
            /* the rhs, or the lhs when only the lhs leads to a parameter (dot(W, x)) */
            int w0 = weight_storage(s, s->c->ins[a].ops[0]);
            int w1 = weight_storage(s, s->c->ins[a].ops[1]);
            int w = w1 >= 0 ? w1 : w0;
            if (w >= 0)
                s->nodes[w].weight |= s->nodes[w].pb == p;
        }
    }
    if ((st = erg__shard_reassociate(s, err)))
        goto done;
    /* Live blocks in creation order. */
    s->order = erg__calloc((size_t)(s->npb ? s->npb : 1), sizeof(int));
    s->pos_of = erg__calloc((size_t)(s->npb ? s->npb : 1), sizeof(int));
    if (!s->order || !s->pos_of) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    for (int p = 0; p < s->npb; p++) {
        s->pos_of[p] = -1;
        if (s->pbs[p].alive && s->pbs[p].nmem) {
            s->pos_of[p] = s->norder;
            s->order[s->norder++] = p;
        }
    }
    if (s->norder == 0) {
        char hint[200] = "";
        for (int i = 0; i < s->n && !hint[0]; i++) {
            if (s->c->ins[i].op != HLO_OP_WHILE)
                continue;
            char *body = erg__hlo_attr_str(m, &s->c->ins[i], "body");
            if (body)
                snprintf(hint, sizeof hint,
                         "; its loop '%s' has body '%s': analyse that with "
                         "--computation %s",
                         s->c->ins[i].name, body, body);
            erg__free(body);
        }
        size_t ndots = 0;
        for (int i = 0; i < s->n; i++)
            ndots += s->c->ins[i].op == HLO_OP_DOT || s->c->ins[i].op == HLO_OP_CONVOLUTION;
        if (ndots == 0)
            st = erg_error_set(err, ERG_ENOTFOUND,
                               "%s: computation '%s' has no dot or convolution, nothing to "
                               "shard (its %d instructions stay replicated)%s",
                               m->filename, s->c->name, s->n, hint);
        else
            st = erg_error_set(err, ERG_ENOTFOUND,
                               "%s: none of the %zu dots/convolutions in computation '%s' has "
                               "a strategy on the %dx%d mesh whose splits divide its dims "
                               "evenly, nothing to shard%s",
                               m->filename, ndots, s->c->name, mesh0, mesh1, hint);
        goto done;
    }
    if ((st = erg__shard_block_hashes(s, err)) || (st = erg__shard_find_segments(s, err)))
        goto done;
    for (int i = 0; i < s->nseg; i++)
        if (s->segs[i].unique == i)
            s->nuniq++;
    if (b->progress)
        b->progress(b->user, (uint64_t)s->n, (uint64_t)s->n);
    st = ERG_OK;
done:
    if (b->twin_req)
        for (int i = 0; i < s->n; i++)
            erg__free(b->twin_req[i]);
    erg__free(b->twin_pb);
    erg__free(b->twin_req);
    erg__free(b->twin_rhs_side);
    erg__free(b->dotanc);
    erg__free(b->stamp);
    erg__free(b->mindot);
    erg__free(b->pend);
    erg__free(b->pref);
    erg__free(b->queue);
    if (st) {
        erg_shard_free(s);
        return st;
    }
    *out = s;
    return ERG_OK;
}

void erg_shard_free(erg_shard *s)
{
    if (!s)
        return;
    for (int p = 0; p < s->npb; p++) {
        pblock *b = &s->pbs[p];
        for (int mi = 0; mi < b->nmem; mi++) {
            erg__free(b->mem[mi].out);
            erg__free(b->mem[mi].req);
            erg__free(b->mem[mi].colls);
            erg__free(b->mem[mi].coll_k);
            erg__free(b->mem[mi].cost_s);
            erg__free(b->mem[mi].mem_b);
        }
        erg__free(b->mem);
        for (int k = 0; b->names && k < b->K; k++)
            erg__free(b->names[k]);
        erg__free(b->names);
        erg__free(b->time_s);
        erg__free(b->comm_s);
        erg__free(b->intr_s);
        erg__free(b->comm_bytes);
        erg__free(b->mem_bytes);
        erg__free(b->flops);
    }
    erg__free(s->pbs);
    for (int i = 0; s->nodes && i < s->n; i++)
        erg__free(s->nodes[i].users);
    erg__free(s->nodes);
    erg__free(s->topo);
    erg__free(s->order);
    erg__free(s->pos_of);
    for (int e = 0; e < s->nedges; e++) {
        erg__free(s->edges[e].cost_s);
        erg__free(s->edges[e].bytes);
    }
    erg__free(s->edges);
    erg__shard_dp_free(s);
    for (int i = 0; i < s->nseg; i++)
        erg__shard_segment_free_costs(&s->segs[i]);
    erg__free(s->segs);
    for (int i = 0; i < s->nrpairs; i++) {
        erg__free(s->rpairs[i].axa);
        erg__free(s->rpairs[i].ba);
        erg__free(s->rpairs[i].axb);
        erg__free(s->rpairs[i].bb);
    }
    erg__free(s->rpairs);
    erg__free(s);
}

size_t erg_shard_num_blocks(const erg_shard *s)
{
    return s ? (size_t)s->norder : 0;
}
size_t erg_shard_num_segments(const erg_shard *s)
{
    return s ? (size_t)s->nseg : 0;
}
size_t erg_shard_num_unique_segments(const erg_shard *s)
{
    return s ? (size_t)s->nuniq : 0;
}

size_t erg_shard_block_num_strategies(const erg_shard *s, size_t b)
{
    return s && b < (size_t)s->norder ? (size_t)s->pbs[s->order[b]].K : 0;
}

size_t erg_shard_block_num_members(const erg_shard *s, size_t b)
{
    return s && b < (size_t)s->norder ? (size_t)s->pbs[s->order[b]].nmem : 0;
}

const char *erg_shard_block_anchor(const erg_shard *s, size_t b)
{
    return s && b < (size_t)s->norder ? s->c->ins[s->pbs[s->order[b]].anchor].name : NULL;
}

const char *erg_shard_strategy_name(const erg_shard *s, size_t b, size_t k)
{
    if (!s || b >= (size_t)s->norder || k >= (size_t)s->pbs[s->order[b]].K)
        return NULL;
    return s->pbs[s->order[b]].names[k];
}

long erg_shard_block_of(const erg_shard *s, const char *name)
{
    if (!s || !name)
        return -1;
    if (name[0] == '%')
        name++;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->c->ins[i].name, name))
            return s->nodes[i].pb >= 0 ? s->pos_of[s->nodes[i].pb] : -1;
    return -1;
}

void erg_shard_segment(const erg_shard *s, size_t i, size_t *first_block, size_t *num_blocks,
                       size_t *unique_id)
{
    if (!s || i >= (size_t)s->nseg)
        return;
    if (first_block)
        *first_block = (size_t)s->segs[i].first;
    if (num_blocks)
        *num_blocks = (size_t)s->segs[i].n;
    if (unique_id)
        *unique_id = (size_t)s->segs[i].unique;
}

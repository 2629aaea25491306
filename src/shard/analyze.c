/* analyze.c: the operator graph, ParallelBlocks (anchors, backward twins, propagation, merge
 * points) and repeated segments of an HLO module on a 2-D device mesh (cfp-spec §1.3, §2.2). */
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
 *    2-D one). Its backward twins are found right away (spec §1.3 "Backward twins") and
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
 * Segments: each block gets a hash of its members (opcode, shape, sharding-relevant
 * attributes, role) and its strategy names; the block sequence is searched for the period
 * p <= 64 and offset that cover the most blocks with repeats (cfp-spec §2.2 step 2). The
 * prefix, each repeat and the suffix become segments; repeats share one unique id.
 */

static spec spec_rep(void)
{
    spec s;
    memset(s.d, (unsigned char)SP_R, sizeof s.d);
    return s;
}

static int axis_size(const erg_shard *s, int code)
{
    return code == SP_BOTH ? s->mesh[0] * s->mesh[1] : code >= 0 ? s->mesh[code] : 1;
}

static bool uses_axis(int8_t code, int a) { return code == a || (code == SP_BOTH && a >= 0); }

int shard_tiles(const erg_shard *s, const spec *sp, int rank)
{
    int t = 1;
    for (int i = 0; i < rank; i++)
        if (sp->d[i] != SP_R)
            t *= axis_size(s, sp->d[i]);
    return t;
}

void shard_spec_str(const spec *sp, int rank, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    if (rank == 0) {
        snprintf(buf, size, "R");
        return;
    }
    for (int i = 0; i < rank && k + 4 < size; i++) {
        const char *t = sp->d[i] == SP_R ? "R" : sp->d[i] == 0 ? "S0" : sp->d[i] == 1 ? "S1"
                                                                                       : "S01";
        k += (size_t)snprintf(buf + k, size - k, "%s", t);
    }
}

static bool spec_valid_for(const erg_shard *s, const hlo_shape *sh, const spec *sp)
{
    if (sh->kind != HLO_ARRAY)
        return true;
    int used[2] = {0, 0};
    for (int i = 0; i < sh->rank; i++) {
        int8_t c = sp->d[i];
        if (c == SP_R)
            continue;
        if (sh->dims[i] % axis_size(s, c))
            return false;
        for (int a = 0; a < 2; a++)
            if (uses_axis(c, a) && used[a]++)
                return false;
    }
    return true;
}

/* ---- dots ---- */

typedef struct dotinfo {
    int nb, nc;
    int64_t lb[HLO_MAX_RANK], rb[HLO_MAX_RANK], lc[HLO_MAX_RANK], rc[HLO_MAX_RANK];
    int lrank, rrank;
    int nls, nrs;
    int ls[HLO_MAX_RANK], rs[HLO_MAX_RANK]; /* space dims */
    /* output dim of batch pair k, lhs space dim k, rhs space dim k */
    int ob[HLO_MAX_RANK], ols[HLO_MAX_RANK], ors[HLO_MAX_RANK];
} dotinfo;

bool shard_conv_labels(const erg_hlo_module *m, const hlo_instr *in, int lrank, int rrank,
                       int orank, int idx[6])
{
    /* dim_labels=b01f_01io->b01f: lhs batch 'b' and feature 'f', rhs input 'i' and output
     * 'o' features, output 'b' and 'f'; digits are spatial. Grouped convolutions are not
     * handled (replicated). */
    char *v = hlo_attr_str(m, in, "dim_labels");
    char *fg = hlo_attr_str(m, in, "feature_group_count");
    char *bg = hlo_attr_str(m, in, "batch_group_count");
    bool ok = v && (!fg || !strcmp(fg, "1")) && (!bg || !strcmp(bg, "1"));
    erg__free(fg);
    erg__free(bg);
    if (ok) {
        char *us = strchr(v, '_'), *ar = strstr(v, "->");
        ok = us && ar && us < ar && (int)(us - v) == lrank && (int)(ar - us - 1) == rrank &&
             (int)strlen(ar + 2) == orank;
        if (ok) {
            const char *parts[3] = {v, us + 1, ar + 2};
            const int lens[3] = {lrank, rrank, orank};
            const char want[6] = {'b', 'f', 'i', 'o', 'b', 'f'};
            for (int q = 0; q < 6 && ok; q++) {
                int part = q / 2 == 0 ? 0 : q / 2 == 1 ? 1 : 2;
                idx[q] = -1;
                for (int k = 0; k < lens[part]; k++)
                    if (parts[part][k] == want[q])
                        idx[q] = k;
                ok = idx[q] >= 0;
            }
        }
    }
    erg__free(v);
    return ok;
}

static bool dot_info(const erg_shard *s, int i, dotinfo *d)
{
    const hlo_instr *in = &s->c->ins[i];
    memset(d, 0, sizeof *d);
    if (in->nops != 2 || in->shape.kind != HLO_ARRAY)
        return false;
    const hlo_shape *L = &s->c->ins[in->ops[0]].shape, *R = &s->c->ins[in->ops[1]].shape;
    if (L->kind != HLO_ARRAY || R->kind != HLO_ARRAY)
        return false;
    d->lrank = L->rank;
    d->rrank = R->rank;
    if (in->op == HLO_OP_CONVOLUTION) {
        /* A convolution as a dot: batch -> M, input feature -> K, output feature -> N;
         * spatial dims belong to no role, so a split on them is never valid. */
        int idx[6];
        if (!shard_conv_labels(s->m, in, L->rank, R->rank, in->shape.rank, idx))
            return false;
        d->nc = 1;
        d->lc[0] = idx[1];
        d->rc[0] = idx[2];
        d->nls = 1;
        d->ls[0] = idx[0];
        d->ols[0] = idx[4];
        d->nrs = 1;
        d->rs[0] = idx[3];
        d->ors[0] = idx[5];
        return true;
    }
    if (in->op != HLO_OP_DOT)
        return false;
    int nb = hlo_attr_ints(s->m, in, "lhs_batch_dims", d->lb, HLO_MAX_RANK);
    int nb2 = hlo_attr_ints(s->m, in, "rhs_batch_dims", d->rb, HLO_MAX_RANK);
    int nc = hlo_attr_ints(s->m, in, "lhs_contracting_dims", d->lc, HLO_MAX_RANK);
    int nc2 = hlo_attr_ints(s->m, in, "rhs_contracting_dims", d->rc, HLO_MAX_RANK);
    if (nb < 0)
        nb = 0;
    if (nb2 < 0)
        nb2 = 0;
    if (nc < 0)
        nc = 0;
    if (nc2 < 0)
        nc2 = 0;
    if (nb != nb2 || nc != nc2)
        return false;
    d->nb = nb;
    d->nc = nc;
    bool lused[HLO_MAX_RANK] = {0}, rused[HLO_MAX_RANK] = {0};
    for (int k = 0; k < nb; k++) {
        if (d->lb[k] < 0 || d->lb[k] >= L->rank || d->rb[k] < 0 || d->rb[k] >= R->rank)
            return false;
        lused[d->lb[k]] = rused[d->rb[k]] = true;
    }
    for (int k = 0; k < nc; k++) {
        if (d->lc[k] < 0 || d->lc[k] >= L->rank || d->rc[k] < 0 || d->rc[k] >= R->rank)
            return false;
        lused[d->lc[k]] = rused[d->rc[k]] = true;
    }
    for (int k = 0; k < L->rank; k++)
        if (!lused[k])
            d->ls[d->nls++] = k;
    for (int k = 0; k < R->rank; k++)
        if (!rused[k])
            d->rs[d->nrs++] = k;
    for (int k = 0; k < d->nb; k++)
        d->ob[k] = k;
    for (int k = 0; k < d->nls; k++)
        d->ols[k] = d->nb + k;
    for (int k = 0; k < d->nrs; k++)
        d->ors[k] = d->nb + d->nls + k;
    return d->nb + d->nls + d->nrs == in->shape.rank;
}

/* Output spec and collectives of a dot given its operand specs; false if the operand specs
 * are inconsistent (would need communication before the dot). */
static bool dot_eval(const erg_shard *s, int i, const dotinfo *d, const spec *l, const spec *r,
                     spec *out, int *ar_axes)
{
    *out = spec_rep();
    *ar_axes = 0;
    for (int a = 0; a < 2; a++) {
        if (s->mesh[a] == 1)
            continue;
        int la = -1, ra = -1;
        for (int k = 0; k < d->lrank; k++)
            if (uses_axis(l->d[k], a)) {
                if (la >= 0)
                    return false;
                la = k;
            }
        for (int k = 0; k < d->rrank; k++)
            if (uses_axis(r->d[k], a)) {
                if (ra >= 0)
                    return false;
                ra = k;
            }
        if (la < 0 && ra < 0)
            continue;
        int od = -1;
        bool ok = false;
        for (int k = 0; k < d->nb; k++)
            if (la == d->lb[k] && ra == d->rb[k]) {
                od = d->ob[k];
                ok = true;
            }
        for (int k = 0; k < d->nc && !ok; k++)
            if (la == d->lc[k] && ra == d->rc[k]) {
                *ar_axes |= 1 << a;
                ok = true;
            }
        for (int k = 0; k < d->nls && !ok; k++)
            if (la == d->ls[k] && ra < 0) {
                od = d->ols[k];
                ok = true;
            }
        for (int k = 0; k < d->nrs && !ok; k++)
            if (ra == d->rs[k] && la < 0) {
                od = d->ors[k];
                ok = true;
            }
        if (!ok)
            return false;
        if (od >= 0)
            out->d[od] = out->d[od] == SP_R ? (int8_t)a : SP_BOTH;
    }
    (void)i;
    return true;
}

/* ---- the builder ---- */

typedef struct builder {
    erg_shard *s;
    erg_error *err;
    int *twin_pb;    /* [n] pending twin block or -1 */
    spec **twin_req; /* [n] 2*K specs (lhs then rhs) */
    int *twin_rhs_side; /* [n] 1 when the twin is the gradient for the anchor's rhs */
    bool *dotanc;    /* [n] has a dot ancestor */
    int *queue;      /* scratch [n] */
    uint32_t *stamp; /* [n] visit epochs of depends_on */
    uint32_t epoch;
    int *mindot;     /* [n] least topological index of a dot ancestor (INT_MAX: none) */
    int *pend;       /* registered twins not yet placed (merge_blocks re-points them) */
    int *pref;       /* [n] block whose anchor reads this weight chain, or -1 (adopt) */
    int npend;
    erg_progress_fn progress; /* may be NULL */
    void *user;
} builder;

static erg_status oom(builder *b) { return erg_error_set(b->err, ERG_ENOMEM, "out of memory"); }

static pblock *new_block(builder *b, int anchor, int K)
{
    erg_shard *s = b->s;
    if (s->npb == s->cappb) {
        int nc = s->cappb ? s->cappb * 2 : 32;
        pblock *p = erg__reallocarray(s->pbs, (size_t)nc, sizeof *p);
        if (!p)
            return NULL;
        s->pbs = p;
        s->cappb = nc;
    }
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
    if (p->nmem == p->capmem) {
        int nc = p->capmem ? p->capmem * 2 : 8;
        member *m = erg__reallocarray(p->mem, (size_t)nc, sizeof *m);
        if (!m)
            return NULL;
        p->mem = m;
        p->capmem = nc;
    }
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
        m->out[k] = spec_rep();
    for (int k = 0; k < nops * p->K; k++)
        m->req[k] = spec_rep();
    p->nmem++;
    s->nodes[ins].pb = pbi;
    s->nodes[ins].slot = p->nmem - 1;
    return m;
}

static bool add_coll(member *m, int k, int kind, int axis, double bytes)
{
    if (m->ncolls == m->capcolls) {
        int nc = m->capcolls ? m->capcolls * 2 : 4;
        coll *c = erg__reallocarray(m->colls, (size_t)nc, sizeof *c);
        if (!c)
            return false;
        m->colls = c;
        int *ck = erg__reallocarray(m->coll_k, (size_t)nc, sizeof *ck);
        if (!ck)
            return false;
        m->coll_k = ck;
        m->capcolls = nc;
    }
    m->colls[m->ncolls] = (coll){kind, axis, bytes};
    m->coll_k[m->ncolls++] = k;
    return true;
}

static const spec *out_spec(const erg_shard *s, int ins, int k)
{
    const node *nd = &s->nodes[ins];
    return &s->pbs[nd->pb].mem[nd->slot].out[k];
}

/* ---- propagation table ---- */

enum { PROP_FREE = 0, PROP_PARTIAL = 1, PROP_FAIL = 2 };

static bool same_dims(const hlo_shape *a, const hlo_shape *b);

static bool has_any(const char *t, const char *const *words, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (strstr(t, words[k]))
            return true;
    return false;
}

/* Class of a custom-call (shard_internal.h, CC_*) from its target and shapes; for fused
 * attention also the head dim of its rank-4 operands (-1 for rank 3: [batch*heads, seq, d]). */
static int8_t cc_classify(const erg_hlo_module *m, const hlo_comp *c, const hlo_instr *in,
                          int8_t *head)
{
    static const char *const ew[] = {"gelu", "relu", "silu", "swish", "sigmoid", "tanh",
                                     "transferwithstaticring", "identity", "dropout",
                                     "quickgelu", "elementwise"};
    static const char *const lastdim[] = {"softmax", "layernorm", "layer_norm", "rmsnorm",
                                          "rms_norm", "normalization", "norm"};
    static const char *const attn[] = {"fmha", "flash", "attention", "attn", "sdpa", "mha"};
    *head = -1;
    char *t = hlo_attr_str(m, in, "custom_call_target");
    if (!t)
        return CC_OPAQUE;
    for (char *q = t; *q; q++)
        *q = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
    const hlo_shape *o = &in->shape;
    if (o->kind == HLO_TUPLE && o->nelems > 0)
        o = &o->elems[0]; /* fused attention returns (output, statistics/scratch...) */
    int8_t cls = CC_OPAQUE;
    /* Array operands of rank > 0 and whether they all have the output's dims. */
    int narr = 0, nfull = 0;
    bool all_same = o->kind == HLO_ARRAY, all_compat = all_same;
    for (int j = 0; j < in->nops; j++) {
        const hlo_shape *os = &c->ins[in->ops[j]].shape;
        if (os->kind != HLO_ARRAY) {
            all_same = all_compat = false;
            continue;
        }
        if (os->rank == 0)
            continue;
        narr++;
        bool same = same_dims(os, o);
        nfull += same;
        all_same &= same;
        /* or the result's trailing dims: a norm's scale and bias ([H] for [T, H]) */
        bool trailing = o->kind == HLO_ARRAY && os->rank < o->rank;
        for (int d = 0; trailing && d < os->rank; d++)
            trailing = os->dims[d] == o->dims[o->rank - os->rank + d];
        all_compat &= same || trailing;
    }
    all_compat &= nfull > 0;
    bool plain = in->shape.kind == HLO_ARRAY;
    if (!strcmp(t, "\"sharding\"") || (plain && all_compat && narr > 0 &&
                                      has_any(t, ew, ERG__ARRAY_LEN(ew))))
        cls = CC_ELEMENTWISE;
    else if (has_any(t, attn, ERG__ARRAY_LEN(attn))) {
        /* Q, K, V of one rank (3 or 4) whose batch and head dims agree; output like Q. */
        const hlo_shape *Q = in->nops >= 3 ? &c->ins[in->ops[0]].shape : NULL;
        const hlo_shape *K = Q ? &c->ins[in->ops[1]].shape : NULL;
        const hlo_shape *V = Q ? &c->ins[in->ops[2]].shape : NULL;
        bool ok = Q && Q->kind == HLO_ARRAY && K->kind == HLO_ARRAY && V->kind == HLO_ARRAY &&
                  (Q->rank == 3 || Q->rank == 4) && K->rank == Q->rank && V->rank == Q->rank &&
                  o->kind == HLO_ARRAY && same_dims(o, Q) && K->dims[0] == Q->dims[0] &&
                  V->dims[0] == Q->dims[0];
        if (ok && Q->rank == 4) {
            /* The head dim: named by cuDNN's dot dimension numbers (batch dims 0 and h),
             * else the one of dims 1, 2 that K and V share with Q while the other (the
             * sequence) may differ, else the smaller of the two (heads < sequence). */
            int h = -1;
            const hlo_attr *bc = hlo_find_attr(in, "backend_config");
            if (bc) {
                const char *b = m->text + bc->off, *e = b + bc->len;
                static const char key[] = "lhs_batch_dimensions";
                for (const char *q = b; q + sizeof key - 1 <= e; q++)
                    if (!memcmp(q, key, sizeof key - 1)) {
                        const char *r = q + sizeof key - 1;
                        while (r < e && *r != ']')
                            r++;
                        /* the last digit before ']' is the second batch dim */
                        const char *d = r;
                        while (d > q && !(d[-1] >= '0' && d[-1] <= '9'))
                            d--;
                        if (d > q && (d[-1] == '1' || d[-1] == '2'))
                            h = d[-1] - '0';
                        break;
                    }
            }
            if (h < 0) {
                bool k1 = K->dims[1] == Q->dims[1] && V->dims[1] == Q->dims[1];
                bool k2 = K->dims[2] == Q->dims[2] && V->dims[2] == Q->dims[2];
                if (k1 != k2)
                    h = k1 ? 1 : 2;
                else
                    h = Q->dims[1] < Q->dims[2] ? 1 : 2;
            }
            ok = K->dims[h] == Q->dims[h] && V->dims[h] == Q->dims[h];
            *head = (int8_t)h;
        }
        cls = ok ? CC_ATTENTION : CC_OPAQUE;
    } else if (plain && all_compat && narr > 0 && has_any(t, lastdim, ERG__ARRAY_LEN(lastdim)))
        cls = CC_LASTDIM;
    else if (plain && all_same && narr > 0)
        cls = CC_SAMESHAPE;
    erg__free(t);
    return cls;
}

static int8_t cc_of(const erg_shard *s, const hlo_instr *in)
{
    return s->nodes[in - s->c->ins].cc;
}

/* A tensor laid out like fused attention i's output o: Q, K, V, the forward output and its
 * gradient (backward kernels), dQ, dK, dV: the same rank and the same batch and head sizes. */
static bool attn_like(const erg_shard *s, int i, const hlo_shape *t, const hlo_shape *o)
{
    int h = s->nodes[i].attn_head;
    return t->kind == HLO_ARRAY && o->kind == HLO_ARRAY && t->rank == o->rank && t->rank > 0 &&
           t->dims[0] == o->dims[0] && (h < 0 || t->dims[h] == o->dims[h]);
}

static bool is_identity_op(const erg_shard *s, const hlo_instr *in)
{
    switch (in->op) {
    case HLO_OP_ELEMENTWISE:
    case HLO_OP_CONVERT:
    case HLO_OP_COPY:
    case HLO_OP_BITCAST:
        return true;
    case HLO_OP_CUSTOM_CALL:
        return cc_of(s, in) == CC_ELEMENTWISE || cc_of(s, in) == CC_SAMESHAPE;
    default:
        return false;
    }
}

static bool is_dynamic_slice(const hlo_instr *in)
{
    return in->op == HLO_OP_OTHER && !strcmp(in->opcode, "dynamic-slice");
}

/* A get-tuple-element of a parameter (loop-carried state in a while body). */
static bool is_param_gte(const hlo_comp *c, const hlo_instr *in)
{
    return in->op == HLO_OP_GTE && in->nops == 1 && c->ins[in->ops[0]].op == HLO_OP_PARAMETER;
}

static bool same_dims(const hlo_shape *a, const hlo_shape *b)
{
    if (a->kind != HLO_ARRAY || b->kind != HLO_ARRAY || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* Reshape dimension groups: in dims [gi[g], gi[g+1]) <-> out dims [go[g], go[g+1]). */
static int reshape_groups(const hlo_shape *a, const hlo_shape *o, int *gi, int *go)
{
    int i = 0, j = 0, g = 0;
    while (i < a->rank || j < o->rank) {
        gi[g] = i;
        go[g] = j;
        int64_t pa = 1, po = 1;
        if (i < a->rank)
            pa = a->dims[i++];
        if (j < o->rank)
            po = o->dims[j++];
        while (pa != po) {
            if (pa < po) {
                if (i >= a->rank)
                    return -1;
                pa *= a->dims[i++];
            } else {
                if (j >= o->rank)
                    return -1;
                po *= o->dims[j++];
            }
        }
        g++;
        if (g >= 2 * HLO_MAX_RANK)
            return -1;
    }
    gi[g] = i;
    go[g] = j;
    return g;
}

/* Map a spec through a reshape (from shape a to shape o); false when some split cannot be
 * carried without communication. */
static bool reshape_map(const erg_shard *s, const hlo_shape *a, const hlo_shape *o,
                        const spec *in, spec *out)
{
    *out = spec_rep();
    int gi[2 * HLO_MAX_RANK + 1], go[2 * HLO_MAX_RANK + 1];
    int ng = reshape_groups(a, o, gi, go);
    if (ng < 0)
        return false;
    bool ok = true;
    for (int g = 0; g < ng; g++) {
        int first_in = -1, first_out = -1;
        for (int k = gi[g]; k < gi[g + 1]; k++)
            if (a->dims[k] != 1) {
                first_in = k;
                break;
            }
        for (int k = go[g]; k < go[g + 1]; k++)
            if (o->dims[k] != 1) {
                first_out = k;
                break;
            }
        for (int k = gi[g]; k < gi[g + 1]; k++) {
            if (in->d[k] == SP_R)
                continue;
            if (k != first_in || first_out < 0 ||
                o->dims[first_out] % axis_size(s, in->d[k])) {
                ok = false;
                continue;
            }
            out->d[first_out] = in->d[k];
        }
    }
    return ok;
}

/* Forward: operand j arrives with spec `op`; compute the output spec. */
static int prop_fwd(const erg_shard *s, int i, int j, const spec *op, spec *out, int *ar_axis)
{
    const hlo_instr *in = &s->c->ins[i];
    const hlo_shape *os = &s->c->ins[in->ops[j]].shape;
    *out = spec_rep();
    *ar_axis = -1;
    int64_t dims[HLO_MAX_RANK];
    int nd;
    if (in->op == HLO_OP_CUSTOM_CALL && cc_of(s, in) == CC_ATTENTION) {
        /* Fused attention: Q, K, V (operands 0-2) carry batch and head splits to the
         * output (element 0 of a tuple result); a split elsewhere is gathered. */
        const hlo_shape *o = in->shape.kind == HLO_TUPLE ? &in->shape.elems[0] : &in->shape;
        if (!attn_like(s, i, os, o))
            return PROP_FAIL;
        int h = s->nodes[i].attn_head;
        out->d[0] = op->d[0];
        if (h >= 0)
            out->d[h] = op->d[h];
        return PROP_FREE;
    }
    if (in->op == HLO_OP_GTE && s->c->ins[in->ops[0]].op == HLO_OP_CUSTOM_CALL &&
        cc_of(s, &s->c->ins[in->ops[0]]) == CC_ATTENTION) {
        /* Element 0 of a fused attention's tuple carries its spec. */
        const hlo_shape *t = &s->c->ins[in->ops[0]].shape;
        nd = hlo_attr_ints(s->m, in, "index", dims, 1);
        if (t->kind != HLO_TUPLE || nd != 1 || dims[0] < 0 || dims[0] >= t->nelems ||
            !same_dims(&t->elems[dims[0]], &in->shape) ||
            !attn_like(s, in->ops[0], &in->shape, &t->elems[0]))
            return PROP_FAIL;
        *out = *op; /* dQ, dK, dV of a backward kernel: the same batch and head dims */
        return PROP_FREE;
    }
    if (in->shape.kind != HLO_ARRAY || os->kind != HLO_ARRAY)
        return PROP_FAIL;
    if (in->op == HLO_OP_CUSTOM_CALL && cc_of(s, in) == CC_LASTDIM) {
        /* Softmax-like: per row of the last dim; a split of that dim is gathered first. */
        if (os->rank == 0)
            return PROP_FREE;
        if (!same_dims(os, &in->shape))
            return PROP_FAIL;
        *out = *op;
        out->d[os->rank - 1] = SP_R;
        return PROP_FREE;
    }
    if (is_dynamic_slice(in)) {
        if (j != 0 || os->rank != in->shape.rank)
            return PROP_FAIL;
        for (int k = 0; k < os->rank; k++) {
            if (op->d[k] != SP_R && os->dims[k] != in->shape.dims[k])
                return PROP_FAIL;
            out->d[k] = op->d[k];
        }
        return PROP_FREE;
    }
    switch (in->op) {
    case HLO_OP_BROADCAST:
        nd = hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd != os->rank)
            return PROP_FAIL;
        for (int k = 0; k < nd; k++) {
            if (dims[k] < 0 || dims[k] >= in->shape.rank)
                return PROP_FAIL;
            out->d[dims[k]] = op->d[k];
        }
        return PROP_FREE;
    case HLO_OP_TRANSPOSE:
        nd = hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd != in->shape.rank || nd != os->rank)
            return PROP_FAIL;
        for (int k = 0; k < nd; k++) {
            if (dims[k] < 0 || dims[k] >= nd)
                return PROP_FAIL;
            out->d[k] = op->d[dims[k]];
        }
        return PROP_FREE;
    case HLO_OP_RESHAPE:
        return reshape_map(s, os, &in->shape, op, out) ? PROP_FREE : PROP_FAIL;
    case HLO_OP_REDUCE: {
        if (j != 0)
            return PROP_FAIL;
        nd = hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd < 0)
            return PROP_FAIL;
        bool red[HLO_MAX_RANK] = {0};
        for (int k = 0; k < nd; k++) {
            if (dims[k] < 0 || dims[k] >= os->rank)
                return PROP_FAIL;
            red[dims[k]] = true;
        }
        int o = 0, partial = -1;
        for (int k = 0; k < os->rank; k++) {
            if (red[k]) {
                if (op->d[k] != SP_R)
                    partial = partial < 0 ? op->d[k] : SP_BOTH;
                continue;
            }
            if (o < in->shape.rank)
                out->d[o] = op->d[k];
            o++;
        }
        if (o != in->shape.rank)
            return PROP_FAIL;
        *ar_axis = partial;
        return partial >= 0 ? PROP_PARTIAL : PROP_FREE;
    }
    case HLO_OP_SLICE:
    case HLO_OP_PAD:
    case HLO_OP_CONCATENATE:
        if (os->rank != in->shape.rank)
            return PROP_FAIL;
        for (int k = 0; k < os->rank; k++) {
            if (op->d[k] != SP_R && os->dims[k] != in->shape.dims[k])
                return PROP_FAIL;
            out->d[k] = op->d[k];
        }
        return PROP_FREE;
    default:
        if (!is_identity_op(s, in))
            return PROP_FAIL;
        if (os->rank == 0)
            return PROP_FREE;
        if (!same_dims(os, &in->shape))
            return PROP_FAIL;
        *out = *op;
        return PROP_FREE;
    }
}

/* Backward: the spec operand j must have for instruction i to produce `out` locally. */
static spec prop_bwd(const erg_shard *s, int i, int j, const spec *out)
{
    const hlo_instr *in = &s->c->ins[i];
    const hlo_shape *os = &s->c->ins[in->ops[j]].shape;
    spec r = spec_rep();
    if (in->op == HLO_OP_CUSTOM_CALL && cc_of(s, in) == CC_ATTENTION) {
        const hlo_shape *o = in->shape.kind == HLO_TUPLE ? &in->shape.elems[0] : &in->shape;
        int h = s->nodes[i].attn_head;
        if (attn_like(s, i, os, o)) {
            r.d[0] = out->d[0];
            if (h >= 0)
                r.d[h] = out->d[h];
        }
        return r;
    }
    if (in->op == HLO_OP_GTE && s->c->ins[in->ops[0]].op == HLO_OP_CUSTOM_CALL &&
        cc_of(s, &s->c->ins[in->ops[0]]) == CC_ATTENTION)
        return *out; /* the tuple's spec is element 0's */
    if (in->shape.kind != HLO_ARRAY || os->kind != HLO_ARRAY || os->rank == 0)
        return r;
    if (in->op == HLO_OP_CUSTOM_CALL && cc_of(s, in) == CC_LASTDIM) {
        if (same_dims(os, &in->shape)) {
            r = *out;
            r.d[os->rank - 1] = SP_R;
        }
        return r;
    }
    if (is_dynamic_slice(in)) {
        if (j == 0 && os->rank == in->shape.rank)
            for (int k = 0; k < os->rank; k++)
                if (os->dims[k] == in->shape.dims[k])
                    r.d[k] = out->d[k];
        return r;
    }
    int64_t dims[HLO_MAX_RANK];
    int nd;
    switch (in->op) {
    case HLO_OP_BROADCAST:
        nd = hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd != os->rank)
            return r;
        for (int k = 0; k < nd; k++)
            if (dims[k] >= 0 && dims[k] < in->shape.rank && os->dims[k] == in->shape.dims[dims[k]])
                r.d[k] = out->d[dims[k]];
        return r;
    case HLO_OP_TRANSPOSE:
        nd = hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd != in->shape.rank || nd != os->rank)
            return r;
        for (int k = 0; k < nd; k++)
            if (dims[k] >= 0 && dims[k] < nd)
                r.d[dims[k]] = out->d[k];
        return r;
    case HLO_OP_RESHAPE: {
        spec t;
        reshape_map(s, &in->shape, os, out, &t);
        return t;
    }
    case HLO_OP_REDUCE: {
        if (j != 0)
            return r;
        nd = hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        bool red[HLO_MAX_RANK] = {0};
        for (int k = 0; k < nd; k++)
            if (dims[k] >= 0 && dims[k] < os->rank)
                red[dims[k]] = true;
        int o = 0;
        for (int k = 0; k < os->rank; k++)
            if (!red[k] && o < in->shape.rank)
                r.d[k] = out->d[o++];
        return r;
    }
    case HLO_OP_SLICE:
    case HLO_OP_PAD:
    case HLO_OP_CONCATENATE:
        if (os->rank != in->shape.rank)
            return r;
        for (int k = 0; k < os->rank; k++)
            if (os->dims[k] == in->shape.dims[k])
                r.d[k] = out->d[k];
        return r;
    default:
        if (is_identity_op(s, in) && same_dims(os, &in->shape))
            return *out;
        if (in->op == HLO_OP_CUSTOM_CALL && is_identity_op(s, in) && os->rank < in->shape.rank) {
            /* an operand of the result's trailing dims (a scale or bias) */
            int off = in->shape.rank - os->rank;
            for (int k = 0; k < os->rank; k++)
                if (os->dims[k] == in->shape.dims[off + k])
                    r.d[k] = out->d[off + k];
        }
        return r;
    }
}

/* ---- anchors and strategies ---- */

typedef struct strat {
    spec l, r, o;
    int ar;
} strat;

static int enumerate_dot(const erg_shard *s, int i, const dotinfo *d, strat *out, int max)
{
    const hlo_instr *in = &s->c->ins[i];
    const hlo_shape *L = &s->c->ins[in->ops[0]].shape, *R = &s->c->ins[in->ops[1]].shape;
    int n = 0;
    /* Candidate assignments: (role, axis) pairs; role M = first lhs space dim, N = first
     * rhs space dim, K = first contracting pair, B_i = batch pair i. */
    enum { RM, RN, RK, RB };
    typedef struct {
        int role, idx, axis;
    } put;
    put cands[64][2];
    int ncand[64];
    int nc = 0;
    bool two_d = s->mesh[0] > 1 && s->mesh[1] > 1;
    int one = s->mesh[0] > 1 ? 0 : 1;
    if (!two_d) {
        cands[nc][0] = (put){RM, 0, one}, ncand[nc++] = 1;
        cands[nc][0] = (put){RN, 0, one}, ncand[nc++] = 1;
        cands[nc][0] = (put){RK, 0, one}, ncand[nc++] = 1;
        for (int b = 0; b < d->nb && nc < 60; b++)
            cands[nc][0] = (put){RB, b, one}, ncand[nc++] = 1;
    } else {
        for (int o = 0; o < 2; o++) {
            int a = o, bb = 1 - o;
            cands[nc][0] = (put){RM, 0, a}, cands[nc][1] = (put){RN, 0, bb}, ncand[nc++] = 2;
            cands[nc][0] = (put){RM, 0, a}, cands[nc][1] = (put){RK, 0, bb}, ncand[nc++] = 2;
            cands[nc][0] = (put){RK, 0, a}, cands[nc][1] = (put){RN, 0, bb}, ncand[nc++] = 2;
        }
        cands[nc][0] = (put){RM, 0, SP_BOTH}, ncand[nc++] = 1;
        cands[nc][0] = (put){RN, 0, SP_BOTH}, ncand[nc++] = 1;
        cands[nc][0] = (put){RK, 0, SP_BOTH}, ncand[nc++] = 1;
        for (int b = 0; b < d->nb && nc < 58; b++) {
            cands[nc][0] = (put){RB, b, SP_BOTH}, ncand[nc++] = 1;
            cands[nc][0] = (put){RB, b, 0}, cands[nc][1] = (put){RM, 0, 1}, ncand[nc++] = 2;
        }
    }
    /* Roles (M, N, K, batch 0..) split by some valid strategy; on a 2-D mesh a role that no
     * two-axis strategy can split (its dim does not divide by an axis or by both) gets the
     * strategies that split it on one axis and replicate on the other (3x2 meshes). */
    bool role_split[3 + HLO_MAX_RANK] = {0};
    int first_extra = -1;
again:
    for (int c = first_extra < 0 ? 0 : first_extra; c < nc && n < max; c++) {
        strat st;
        st.l = spec_rep();
        st.r = spec_rep();
        bool ok = true;
        for (int q = 0; q < ncand[c]; q++) {
            put p = cands[c][q];
            int8_t ax = (int8_t)p.axis;
            switch (p.role) {
            case RM:
                if (d->nls == 0)
                    ok = false;
                else
                    st.l.d[d->ls[0]] = ax;
                break;
            case RN:
                if (d->nrs == 0)
                    ok = false;
                else
                    st.r.d[d->rs[0]] = ax;
                break;
            case RK:
                if (d->nc == 0)
                    ok = false;
                else
                    st.l.d[d->lc[0]] = ax, st.r.d[d->rc[0]] = ax;
                break;
            default:
                st.l.d[d->lb[p.idx]] = ax, st.r.d[d->rb[p.idx]] = ax;
            }
        }
        if (!ok || !spec_valid_for(s, L, &st.l) || !spec_valid_for(s, R, &st.r))
            continue;
        if (!dot_eval(s, i, d, &st.l, &st.r, &st.o, &st.ar))
            continue;
        if (!spec_valid_for(s, &in->shape, &st.o))
            continue;
        for (int q = 0; q < ncand[c]; q++)
            role_split[cands[c][q].role == RB ? 3 + cands[c][q].idx : cands[c][q].role] = true;
        out[n++] = st;
    }
    if (two_d && first_extra < 0) {
        first_extra = nc;
        for (int r = 0; r < 3 + d->nb && nc < 62; r++) {
            if (role_split[r])
                continue;
            for (int a = 0; a < 2 && nc < 62; a++)
                cands[nc][0] = (put){r < 3 ? r : RB, r < 3 ? 0 : r - 3, a}, ncand[nc++] = 1;
        }
        if (nc > first_extra)
            goto again;
    }
    return n;
}

static erg_status strategy_name(const erg_shard *s, int i, const strat *st, char **out)
{
    const hlo_instr *in = &s->c->ins[i];
    char o[80], l[80], r[80], buf[260];
    shard_spec_str(&st->o, in->shape.rank, o, sizeof o);
    shard_spec_str(&st->l, s->c->ins[in->ops[0]].shape.rank, l, sizeof l);
    shard_spec_str(&st->r, s->c->ins[in->ops[1]].shape.rank, r, sizeof r);
    snprintf(buf, sizeof buf, "%s = %s x %s", o, l, r);
    *out = erg__strdup(buf);
    return *out ? ERG_OK : ERG_ENOMEM;
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
    spec r = spec_rep();
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

/* Find the backward twin of anchor `a` with respect to its operand `side` (cfp-spec §1.3).
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
static erg_status find_twin(builder *b, int pbi, int a, const dotinfo *d, int side,
                            const strat *st)
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
            cs[nch * K + k] = prop_bwd(s, v, 0, &cs[(nch - 1) * K + k]);
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
                        ok = prop_fwd(s, w, 0, &fspec[fi * K + k], &fspec[nf * K + k], &ar) ==
                             PROP_FREE;
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
                if (!dot_info(s, w, &td))
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
                    ok = dot_eval(s, w, &td, &req[k], &req[K + k], &o, &ar);
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
    if (!dot_info(s, i, &d))
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
        if (!dot_eval(s, i, &d, &req[k], &req[K + k], &m->out[k], &ar)) {
            /* Cannot happen for registered twins; be safe: replicated compute. */
            m->req[k] = m->req[K + k] = m->out[k] = spec_rep();
            ar = 0;
        }
        if (ar) {
            int axis = ar == 3 ? SP_BOTH : ar == 1 ? 0 : 1;
            double bytes = hlo_shape_bytes(&in->shape) / shard_tiles(s, &m->out[k], in->shape.rank);
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
    int K = dot_info(s, i, &d) ? enumerate_dot(s, i, &d, st, 64) : 0;
    if (K == 0)
        return ERG_ENOTFOUND; /* no valid strategy: leave it replicated */
    pblock *p = new_block(b, i, K);
    if (!p)
        return oom(b);
    int pbi = p->id;
    for (int k = 0; k < K; k++)
        if (strategy_name(s, i, &st[k], &s->pbs[pbi].names[k]))
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
    if (!dot_info(s, i, &d))
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
        spec l = spec_rep(), r = spec_rep();
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
            ok = dot_eval(s, i, &d, &l, &r, &o, &ar) && !ar;
            bool split = ok && shard_tiles(s, &o, in->shape.rank) > 1;
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
                if (dot_eval(s, i, &d, &l, &rr, &o, &ar) && !ar &&
                    (found < 0 || shard_tiles(s, &o, in->shape.rank) > 1)) {
                    bool split = shard_tiles(s, &o, in->shape.rank) > 1;
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
                 cc_of(s, &s->c->ins[in->ops[0]]) == CC_ATTENTION);
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
        return cc_of(s, in) == CC_OPAQUE;
    case HLO_OP_OTHER:
        return !is_dynamic_slice(in);
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
        spec out = spec_rep();
        /* First operand of block p defines the output spec. */
        for (int j = 0; j < in->nops && !have; j++) {
            int o = in->ops[j];
            if (s->nodes[o].pb != p || !carries_spec(s, o))
                continue;
            status = prop_fwd(s, i, j, out_spec(s, o, k), &out, &ar);
            have = true;
            definer = j;
            if (status == PROP_FAIL)
                out = spec_rep();
            else if (status == PROP_FREE || status == PROP_PARTIAL)
                m->req[j * K + k] = *out_spec(s, o, k);
        }
        if (!spec_valid_for(s, &in->shape, &out))
            out = spec_rep();
        m->out[k] = out;
        /* Custom-calls that drop some splits (softmax-like, attention) need their input
         * gathered there: the definer's requirement follows from the output. */
        if (in->op == HLO_OP_CUSTOM_CALL && definer >= 0 && status == PROP_FREE)
            m->req[definer * K + k] = prop_bwd(s, i, definer, &out);
        if (status == PROP_PARTIAL && ar >= 0) {
            double bytes = hlo_shape_bytes(&in->shape) / shard_tiles(s, &out, in->shape.rank);
            if (!add_coll(m, k, COLL_AR, ar, bytes))
                return oom(b);
        }
        /* Every other operand must arrive as this op needs it. */
        for (int j = 0; j < in->nops; j++) {
            if (j == definer && (status == PROP_FREE || status == PROP_PARTIAL))
                continue;
            m->req[j * K + k] = (status == PROP_PARTIAL && j == 0) ? m->req[j * K + k]
                                                                    : prop_bwd(s, i, j, &out);
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
        if (!is_param_gte(s->c, in))
            return ERG_OK;
        break;
    case HLO_OP_ELEMENTWISE:
        /* CFP's "attach the remaining instructions" (cfp-spec §1.2 phase 3): a computation
         * on unowned values whose users all lie in one block, e.g. the in-graph optimizer's
         * update of its moment estimates, is done on that block's shards */
        if (in->shape.rank == 0)
            return ERG_OK;
        break;
    default:
        if (!is_dynamic_slice(in)) /* one layer of a stacked weight */
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
        if (!spec_valid_for(s, &in->shape, &o))
            o = spec_rep();
        m->out[k] = o;
        for (int j = 0; j < in->nops; j++)
            m->req[j * K + k] = prop_bwd(s, i, j, &o);
    }
    return ERG_OK;
}

/* ---- all-reduce reassociation ---- */

static bool is_add(const hlo_instr *in)
{
    return in->op == HLO_OP_ELEMENTWISE && !strcmp(in->opcode, "add");
}

/* The dot member that produces `v` through single-use reshape, bitcast, copy or transpose
 * members of its block (same bytes), or -1. The dot must have `v`'s chain as its only use. */
static int partial_source(const erg_shard *s, int v)
{
    int p = s->nodes[v].pb;
    if (p < 0)
        return -1;
    for (int guard = 0; guard < 16; guard++) {
        const hlo_instr *in = &s->c->ins[v];
        if (s->nodes[v].pb != p)
            return -1;
        if (in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION)
            return s->nodes[v].nusers == 1 ? v : -1;
        if (!(in->op == HLO_OP_RESHAPE || in->op == HLO_OP_BITCAST || in->op == HLO_OP_COPY ||
              in->op == HLO_OP_TRANSPOSE) ||
            in->nops != 1 || s->nodes[in->ops[0]].nusers != 1)
            return -1;
        v = in->ops[0];
    }
    return -1;
}

/* Whether `v` is an add that continues a tree: its single user is an add of its shape. */
static bool inner_add(const erg_shard *s, int v)
{
    const hlo_instr *in = &s->c->ins[v];
    if (!is_add(in) || s->nodes[v].nusers != 1)
        return false;
    int u = s->nodes[v].users[0];
    return is_add(&s->c->ins[u]) && same_dims(&s->c->ins[u].shape, &in->shape);
}

/* The leaves of the add tree rooted at `r`, in operand order (adds of any block). */
static void add_leaves(const erg_shard *s, int r, int *leaves, int *nl, int max, int depth)
{
    const hlo_instr *in = &s->c->ins[r];
    for (int j = 0; j < in->nops; j++) {
        int o = in->ops[j];
        if (depth < 64 && inner_add(s, o) && s->nodes[o].users[0] == r)
            add_leaves(s, o, leaves, nl, max, depth + 1);
        else if (*nl < max)
            leaves[(*nl)++] = o;
    }
}

/* The all-reduce a member needs under strategy k: its axis (or -1) and bytes. */
static int member_ar(const member *m, int k, double *bytes)
{
    for (int c = 0; c < m->ncolls; c++)
        if (m->coll_k[c] == k && m->colls[c].kind == COLL_AR) {
            *bytes = m->colls[c].bytes;
            return m->colls[c].axis;
        }
    return -1;
}

static void drop_ar(erg_shard *s, member *m, int k)
{
    for (int c = 0; c < m->ncolls; c++)
        if (m->coll_k[c] == k && m->colls[c].kind == COLL_AR) {
            m->colls[c] = m->colls[m->ncolls - 1];
            m->coll_k[c] = m->coll_k[m->ncolls - 1];
            m->ncolls--;
            s->reassoc_saved++;
            return;
        }
}

/*
 * Sibling dots whose partial sums are added (the input gradients of separate Q, K and V
 * projections under a column split: dX = dQ·Wqᵀ + dK·Wkᵀ + dV·Wvᵀ, each contracting the
 * split dim) need one all-reduce of the sum, not one each: XLA's AllReduceReassociate does
 * exactly this. For every maximal add tree, the dot members that produce its leaves
 * ("sources", in operand order):
 *  - all in one block: per strategy, the first source with an all-reduce keeps it and every
 *    other one all-reducing the same size on the same axis drops it (p partial sums, one
 *    all-reduce);
 *  - in several blocks: each pair of consecutive sources saves one all-reduce when both
 *    all-reduce the same size on the same axis: inside a block the later one drops it, across
 *    blocks the pair is recorded (s->rpairs) and cost.c lowers the resharding edge between
 *    the two blocks by one all-reduce for those strategy pairs. This never counts more than
 *    p - 1 savings (it can count fewer when partial sums are not adjacent).
 */
static erg_status reassociate(erg_shard *s, erg_error *err)
{
    enum { MAXL = 64 };
    int leaves[MAXL], src[MAXL];
    for (int r = 0; r < s->n; r++) {
        const hlo_instr *R = &s->c->ins[r];
        if (!is_add(R) || R->shape.kind != HLO_ARRAY || inner_add(s, r))
            continue;
        int nl = 0, ns = 0;
        add_leaves(s, r, leaves, &nl, MAXL, 0);
        for (int l = 0; l < nl; l++) {
            int d = partial_source(s, leaves[l]);
            if (d >= 0)
                src[ns++] = d;
        }
        if (ns < 2)
            continue;
        bool one = true;
        for (int l = 1; l < ns; l++)
            one &= s->nodes[src[l]].pb == s->nodes[src[0]].pb;
        if (one) {
            pblock *P = &s->pbs[s->nodes[src[0]].pb];
            for (int k = 0; k < P->K; k++) {
                int keep_axis = -2;
                double keep_bytes = 0, b;
                for (int l = 0; l < ns; l++) {
                    member *m = &P->mem[s->nodes[src[l]].slot];
                    int ax = member_ar(m, k, &b);
                    if (ax < 0)
                        continue;
                    if (keep_axis == -2) {
                        keep_axis = ax;
                        keep_bytes = b;
                    } else if (ax == keep_axis && b == keep_bytes) {
                        drop_ar(s, m, k);
                    }
                }
            }
            continue;
        }
        /* Several blocks: the all-reduces before any is dropped, per source and strategy. */
        int8_t *ax[MAXL];
        double *by[MAXL];
        bool ok = true;
        for (int l = 0; l < ns; l++) {
            const pblock *P = &s->pbs[s->nodes[src[l]].pb];
            ax[l] = erg__malloc((size_t)P->K);
            by[l] = erg__malloc((size_t)P->K * sizeof(double));
            ok &= ax[l] && by[l];
            for (int k = 0; ax[l] && by[l] && k < P->K; k++) {
                by[l][k] = 0;
                ax[l][k] = (int8_t)member_ar(&P->mem[s->nodes[src[l]].slot], k, &by[l][k]);
            }
        }
        for (int l = 0; ok && l + 1 < ns; l++) {
            int pa = s->nodes[src[l]].pb, pb2 = s->nodes[src[l + 1]].pb;
            if (pa == pb2) {
                pblock *P = &s->pbs[pa];
                for (int k = 0; k < P->K; k++)
                    if (ax[l][k] != -1 && ax[l][k] == ax[l + 1][k] && by[l][k] == by[l + 1][k])
                        drop_ar(s, &P->mem[s->nodes[src[l + 1]].slot], k);
                continue;
            }
            rpair *np = erg__reallocarray(s->rpairs, (size_t)s->nrpairs + 1, sizeof *np);
            if (!np) {
                ok = false;
                break;
            }
            s->rpairs = np;
            np[s->nrpairs++] = (rpair){src[l], src[l + 1], ax[l], by[l], ax[l + 1], by[l + 1],
                                       false};
            /* the arrays now belong to the pair(s); copy for the next pair's left side */
            int8_t *ca = erg__malloc((size_t)s->pbs[pb2].K);
            double *cb = erg__malloc((size_t)s->pbs[pb2].K * sizeof(double));
            if (!ca || !cb) {
                erg__free(ca);
                erg__free(cb);
                ax[l + 1] = NULL;
                by[l + 1] = NULL;
                ok = false;
                break;
            }
            memcpy(ca, ax[l + 1], (size_t)s->pbs[pb2].K);
            memcpy(cb, by[l + 1], (size_t)s->pbs[pb2].K * sizeof(double));
            ax[l] = NULL;
            by[l] = NULL;
            ax[l + 1] = ca;
            by[l + 1] = cb;
        }
        for (int l = 0; l < ns; l++) {
            erg__free(ax[l]);
            erg__free(by[l]);
        }
        if (!ok)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
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
        hlo_line_col(s->m, c->ins[at < n ? at : 0].start, &line, &col);
        erg__free(indeg);
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: computation '%s' has a cycle through '%s'",
                             s->m->filename, line, c->name, c->ins[at < n ? at : 0].name);
    }
    erg__free(indeg);
    for (int i = 0; i < n; i++) {
        const hlo_instr *in = &c->ins[i];
        int8_t h = -1;
        s->nodes[i].cc = in->op == HLO_OP_CUSTOM_CALL ? cc_classify(s->m, c, in, &h) : CC_NONE;
        s->nodes[i].attn_head = h;
    }
    for (int i = 0; i < n; i++) {
        const hlo_instr *in = &c->ins[i];
        s->nodes[i].sink = in->op == HLO_OP_TUPLE || (i == c->root && in->shape.kind != HLO_ARRAY);
        s->nodes[i].boundary = is_boundary_op(s, in);
    }
    return ERG_OK;
}

/* ---- segments ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hstr(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return mix(h, 0x51);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static erg_status block_hashes(erg_shard *s, erg_error *err)
{
    static const char *const keys[] = {"dimensions", "lhs_contracting_dims",
                                       "rhs_contracting_dims", "lhs_batch_dims",
                                       "rhs_batch_dims", "direction", "slice", "index"};
    for (int oi = 0; oi < s->norder; oi++) {
        pblock *p = &s->pbs[s->order[oi]];
        uint64_t *lab = erg__malloc((size_t)(p->nmem ? p->nmem : 1) * sizeof(uint64_t));
        if (!lab)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        int nl = 0;
        for (int mi = 0; mi < p->nmem; mi++) {
            const hlo_instr *in = &s->c->ins[p->mem[mi].ins];
            /* Like CFP's fingerprint, only the dots: the ops a block absorbs at the model's
             * edges (embedding gradients, loss) must not make the first layer differ. */
            if (in->op != HLO_OP_DOT && in->op != HLO_OP_CONVOLUTION)
                continue;
            uint64_t h = hstr(1469598103934665603ull, in->opcode);
            h = hstr(h, p->mem[mi].role);
            h = mix(h, (uint64_t)in->shape.kind * 31 + (uint64_t)in->shape.dtype);
            for (int d = 0; d < in->shape.rank; d++)
                h = mix(h, (uint64_t)in->shape.dims[d]);
            for (size_t k = 0; k < ERG__ARRAY_LEN(keys); k++) {
                char *v = hlo_attr_str(s->m, in, keys[k]);
                h = hstr(h, v);
                erg__free(v);
            }
            for (int k = 0; k < p->K; k++) {
                char buf[80];
                shard_spec_str(&p->mem[mi].out[k], in->shape.rank, buf, sizeof buf);
                h = hstr(h, buf);
            }
            lab[nl++] = h;
        }
        qsort(lab, (size_t)nl, sizeof *lab, cmp_u64);
        uint64_t h = mix(0x1234, (uint64_t)p->K);
        for (int k = 0; k < p->K; k++)
            h = hstr(h, p->names[k]);
        for (int mi = 0; mi < nl; mi++)
            h = mix(h, lab[mi]);
        p->hash = h;
        erg__free(lab);
    }
    return ERG_OK;
}

static erg_status add_segment(erg_shard *s, int first, int n, int unique, erg_error *err)
{
    segment *sg = erg__reallocarray(s->segs, (size_t)s->nseg + 1, sizeof *sg);
    if (!sg)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->segs = sg;
    memset(&sg[s->nseg], 0, sizeof *sg);
    sg[s->nseg].first = first;
    sg[s->nseg].n = n;
    sg[s->nseg].unique = unique < 0 ? s->nseg : unique;
    s->nseg++;
    return ERG_OK;
}

/* Split [first, first+n) into chunks whose strategy product stays enumerable. */
static erg_status add_chunks(erg_shard *s, int first, int n, erg_error *err)
{
    while (n > 0) {
        int len = 0;
        double prod = 1;
        while (len < n && prod * s->pbs[s->order[first + len]].K <= 20000) {
            prod *= s->pbs[s->order[first + len]].K;
            len++;
        }
        if (len == 0)
            len = 1;
        erg_status st = add_segment(s, first, len, -1, err);
        if (st)
            return st;
        first += len;
        n -= len;
    }
    return ERG_OK;
}

static erg_status find_segments(erg_shard *s, erg_error *err)
{
    int n = s->norder;
    int best_p = 0, best_s = 0, best_l = 0;
    /* For each period p, run[i] = how many consecutive positions from i have
     * hash[j] == hash[j + p]; a start st then repeats 1 + run[st] / p times. O(64 n). */
    int *run = erg__malloc((size_t)(n + 1) * sizeof(int));
    if (!run)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int p = 1; p <= 64 && 2 * p <= n; p++) {
        run[n - p] = 0;
        for (int i = n - p - 1; i >= 0; i--)
            run[i] = s->pbs[s->order[i]].hash == s->pbs[s->order[i + p]].hash ? run[i + 1] + 1 : 0;
        for (int st = 0; st + 2 * p <= n; st++) {
            int L = 1 + run[st] / p;
            if (L >= 2 && (long)L * p > (long)best_l * best_p) {
                best_p = p;
                best_s = st;
                best_l = L;
            }
        }
    }
    erg__free(run);
    erg_status st;
    if (best_l < 2)
        return add_chunks(s, 0, n, err);
    if (best_s > 0 && (st = add_chunks(s, 0, best_s, err)))
        return st;
    /* Each repeat is cut into the same chunks (so that a chunk's combinations stay
     * enumerable); chunk j of every repeat maps to chunk j of the first. */
    int cut[65], ncut = 0, at = 0;
    while (at < best_p) {
        int len = 0;
        double prod = 1;
        while (at + len < best_p && prod * s->pbs[s->order[best_s + at + len]].K <= 20000) {
            prod *= s->pbs[s->order[best_s + at + len]].K;
            len++;
        }
        if (!len)
            len = 1;
        cut[ncut++] = len;
        at += len;
    }
    int first_seg = s->nseg;
    for (int r = 0; r < best_l; r++) {
        int off = best_s + r * best_p;
        for (int j = 0; j < ncut; j++) {
            if ((st = add_segment(s, off, cut[j], r ? first_seg + j : -1, err)))
                return st;
            off += cut[j];
        }
    }
    int end = best_s + best_l * best_p;
    if (end < n && (st = add_chunks(s, end, n - end, err)))
        return st;
    return ERG_OK;
}

/* ---- public ---- */

/* Trip count of the while loop whose body is computation `ci`: backend_config
 * "known_trip_count":{"n":"N"}, else the loop condition's compare(i, constant(N)),
 * direction=LT; 0 when `ci` is no loop body or the count is unknown. *loop names the
 * while instruction (or NULL). */
static long trip_count(const erg_hlo_module *m, int ci, const char **loop)
{
    *loop = NULL;
    for (int c = 0; c < m->ncomps; c++)
        for (int i = 0; i < m->comps[c].n; i++) {
            const hlo_instr *in = &m->comps[c].ins[i];
            if (in->op != HLO_OP_WHILE)
                continue;
            char *body = hlo_attr_str(m, in, "body");
            bool match = body && hlo_find_comp(m, body) == ci;
            erg__free(body);
            if (!match)
                continue;
            *loop = in->name;
            const hlo_attr *a = hlo_find_attr(in, "backend_config");
            if (a) {
                const char *t = m->text + a->off, *e = t + a->len;
                const char *k = NULL;
                for (const char *q = t; q + 16 <= e; q++)
                    if (!memcmp(q, "known_trip_count", 16)) {
                        k = q + 16;
                        break;
                    }
                while (k && k < e && *k != '"' && !(*k >= '0' && *k <= '9'))
                    k++;
                /* skip {"n":" */
                while (k && k < e && !(*k >= '0' && *k <= '9'))
                    k++;
                if (k && k < e) {
                    long v = 0;
                    while (k < e && *k >= '0' && *k <= '9' && v < 1000000000)
                        v = v * 10 + (*k++ - '0');
                    if (v > 0)
                        return v;
                }
            }
            char *cond = hlo_attr_str(m, in, "condition");
            int cc = cond ? hlo_find_comp(m, cond) : -1;
            erg__free(cond);
            if (cc < 0)
                return 0;
            const hlo_comp *C = &m->comps[cc];
            for (int j = 0; j < C->n; j++) {
                const hlo_instr *cmp = &C->ins[j];
                char *dir = hlo_attr_str(m, cmp, "direction");
                bool lt = dir && !strcmp(dir, "LT");
                erg__free(dir);
                if (strcmp(cmp->opcode, "compare") || !lt || cmp->nops != 2)
                    continue;
                const hlo_instr *k2 = &C->ins[cmp->ops[1]];
                if (k2->op == HLO_OP_CONSTANT && k2->lit_len > 0 && k2->lit_len < 20) {
                    char buf[24];
                    memcpy(buf, m->text + k2->lit_off, k2->lit_len);
                    buf[k2->lit_len] = '\0';
                    long v;
                    if (erg__parse_long(buf, &v) && v > 0)
                        return v;
                }
            }
            return 0;
        }
    return 0;
}

/* Largest replica group of a collective: {{0,1},{2,3}} -> 2, [2,4]<=[8] -> 4, {} (all
 * devices) or a missing attribute -> -1. */
static long largest_group(const erg_hlo_module *m, const hlo_instr *in)
{
    const hlo_attr *a = hlo_find_attr(in, "replica_groups");
    if (!a)
        a = hlo_find_attr(in, "source_target_pairs");
    if (!a)
        return -1;
    const char *t = m->text + a->off, *e = t + a->len;
    if (a->len && *t == '[') {
        /* iota form [groups,size]<=[n]: the last dim before ']' is the group size */
        const char *r = memchr(t, ']', (size_t)(e - t));
        long v = 0;
        const char *q = r;
        while (q && q > t && q[-1] >= '0' && q[-1] <= '9')
            q--;
        for (; q && q < r; q++)
            v = v * 10 + (*q - '0');
        return v > 0 ? v : -1;
    }
    long best = 0, cur = 0;
    int depth = 0;
    bool any = false;
    for (const char *q = t; q < e; q++) {
        if (*q == '{') {
            depth++;
            if (depth == 2)
                cur = 0, any = false;
        } else if (*q == '}') {
            if (depth == 2 && any)
                best = ERG__MAX(best, cur + 1);
            depth--;
        } else if (depth == 2 && *q == ',') {
            cur++;
        } else if (depth == 2 && *q >= '0' && *q <= '9') {
            any = true;
        }
    }
    return best > 0 ? best : -1;
}

/* cfp-spec §1.3: collectives already present mean the module was partitioned (per-device
 * shapes); planning it again would re-annotate per-device tensors. */
static erg_status check_unpartitioned(const erg_hlo_module *m, erg_error *err)
{
    bool annotated = false;
    for (int c = 0; c < m->ncomps; c++)
        for (int i = 0; i < m->comps[c].n; i++) {
            const hlo_instr *in = &m->comps[c].ins[i];
            annotated |= hlo_find_attr(in, "sharding") != NULL;
            bool is_coll = in->op == HLO_OP_COLLECTIVE || !strcmp(in->opcode, "cross-replica-sum") ||
                        !strcmp(in->opcode, "collective-permute-start") ||
                        !strcmp(in->opcode, "collective-broadcast") ||
                        !strcmp(in->opcode, "ragged-all-to-all");
            bool ids = !strcmp(in->opcode, "partition-id") || !strcmp(in->opcode, "replica-id");
            long g = is_coll ? largest_group(m, in) : 0;
            /* A collective whose groups each hold one device is a no-op; any other one
             * (explicit groups, or {} meaning all devices) says the module is partitioned
             * or data-parallel already. */
            bool real = is_coll && g != 1;
            if (real || ids) {
                long line, col;
                hlo_line_col(m, in->start, &line, &col);
                return erg_error_set(
                    err, ERG_EINVAL,
                    "%s:%ld: the module is already partitioned: '%s' is %s%s%s (num_partitions=%ld); "
                    "ergon shard plans the single-device module before SPMD partitioning (its "
                    "shapes are whole tensors): give it that module instead",
                    m->filename, line, in->name, is_coll ? "a collective " : "a ", in->opcode,
                    is_coll && g > 1 ? " over device groups" : "", m->num_partitions);
            }
        }
    if (m->num_partitions > 1 && !annotated)
        return erg_error_set(err, ERG_EINVAL,
                             "%s: the module declares num_partitions=%ld but carries no "
                             "sharding annotation: it looks already partitioned (per-device "
                             "shapes); ergon shard plans the single-device module before SPMD "
                             "partitioning: give it that module instead",
                             m->filename, m->num_partitions);
    return ERG_OK;
}

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

static erg_status analyze_on(const erg_hlo_module *m, const char *computation, int mesh0,
                             int mesh1, const erg_shard_analyze_options *o, erg_shard **out,
                             erg_error *err);

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
        if (V->op == HLO_OP_PARAMETER || is_param_gte(s->c, V))
            return v;
        bool through = is_chain_op(V) || is_dynamic_slice(V) ||
                       (V->op == HLO_OP_CUSTOM_CALL &&
                        (s->nodes[v].cc == CC_ELEMENTWISE || s->nodes[v].cc == CC_SAMESHAPE));
        if (!through || V->nops < 1)
            return -1;
        v = V->ops[0];
    }
    return -1;
}

static erg_status analyze_on(const erg_hlo_module *m, const char *computation, int mesh0,
                             int mesh1, const erg_shard_analyze_options *opt, erg_shard **out,
                             erg_error *err)
{
    if (!m || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_analyze: NULL argument");
    *out = NULL;
    if (mesh0 < 1 || mesh1 < 1 || mesh0 > 1024 || mesh1 > 1024 || mesh0 * mesh1 < 2)
        return erg_error_set(err, ERG_EINVAL,
                             "mesh %dx%d: both sizes must be >= 1 and their product >= 2",
                             mesh0, mesh1);
    erg_status pst = check_unpartitioned(m, err);
    if (pst)
        return pst;
    int ci = m->entry;
    if (computation) {
        ci = hlo_find_comp(m, computation);
        if (ci < 0)
            return erg_error_set(err, ERG_ENOTFOUND, "%s: no computation named '%s'",
                                 m->filename, computation);
    }
    erg_shard *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->m = m;
    s->c = &m->comps[ci];
    s->trips = 1;
    if (ci != m->entry) {
        long t = trip_count(m, ci, &s->loop);
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
    if (!s->nodes || !s->topo || !b->twin_pb || !b->twin_req || !b->twin_rhs_side ||
        !b->dotanc || !b->queue || !b->stamp || !b->mindot || !b->pend || !b->pref) {
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
            int side = weight_storage(s, s->c->ins[a].ops[1]) >= 0 ? 1
                       : weight_storage(s, s->c->ins[a].ops[0]) >= 0 ? 0
                                                                       : -1;
            for (int v = side >= 0 ? s->c->ins[a].ops[side] : -1, guard = 0; v >= 0 && guard < 32;
                 guard++) {
                if (s->nodes[v].pb >= 0 || b->pref[v] >= 0)
                    break;
                b->pref[v] = p;
                const hlo_instr *V = &s->c->ins[v];
                if (V->op == HLO_OP_PARAMETER || is_param_gte(s->c, V) || V->nops < 1)
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
    if ((st = reassociate(s, err)))
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
            char *body = hlo_attr_str(m, &s->c->ins[i], "body");
            if (body)
                snprintf(hint, sizeof hint, "; its loop '%s' has body '%s': analyse that with "
                         "--computation %s", s->c->ins[i].name, body, body);
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
    if ((st = block_hashes(s, err)) || (st = find_segments(s, err)))
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
    shard_dp_free(s);
    for (int i = 0; i < s->nseg; i++) {
        erg__free(s->segs[i].keep);
        erg__free(s->segs[i].keep_time);
        erg__free(s->segs[i].keep_mem);
    }
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

size_t erg_shard_num_blocks(const erg_shard *s) { return s ? (size_t)s->norder : 0; }
size_t erg_shard_num_segments(const erg_shard *s) { return s ? (size_t)s->nseg : 0; }
size_t erg_shard_num_unique_segments(const erg_shard *s) { return s ? (size_t)s->nuniq : 0; }

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

erg_status erg_shard_report(const erg_shard *s, bool all_members, char **text, erg_error *err)
{
    if (!s || !text)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_report: NULL argument");
    erg__buf b = {0};
    erg_status st = ERG_OK;
#define P(...)                                                                                     \
    do {                                                                                           \
        if ((st = erg__buf_printf(&b, __VA_ARGS__)))                                               \
            goto fail;                                                                             \
    } while (0)
    size_t ndots = 0, nowned = 0;
    for (int i = 0; i < s->n; i++) {
        ndots += s->c->ins[i].op == HLO_OP_DOT || s->c->ins[i].op == HLO_OP_CONVOLUTION;
        nowned += s->nodes[i].pb >= 0;
    }
P("module %s, %s %s: %d instructions, %zu dots/convolutions; mesh %dx%d\n", s->m->name,
      s->c == &s->m->comps[s->m->entry] ? "entry" : "computation", s->c->name, s->n, ndots,
      s->mesh[0], s->mesh[1]);
    if (s->mesh_req[0] != s->mesh[0] || s->mesh_req[1] != s->mesh[1])
        P("mesh %dx%d viewed as %dx%d (the same devices): no dim divides by %d, so dims are "
          "split on one factor and replicated on the other\n",
          s->mesh_req[0], s->mesh_req[1], s->mesh[0], s->mesh[1], s->mesh_req[0] * s->mesh_req[1]);
    if (s->loop)
        P("loop body of '%s': %ld iterations, one plan for all of them (costs x %ld)\n", s->loop,
          s->trips, s->trips);
    if (s->twin_cut > 0)
        P("note: %ld backward-twin searches stopped at the window of %d candidate dots (the "
          "first for anchor '%s'): those anchors may lack a gradient twin; a larger "
          "--twin-window searches further, at a cost that grows with it\n",
          s->twin_cut, s->twin_window,
          s->twin_cut_anchor >= 0 ? s->c->ins[s->twin_cut_anchor].name : "?");
    {
        /* Loops in this computation, so that their bodies can be analysed on their own. */
        for (int i = 0; i < s->n; i++) {
            const hlo_instr *in = &s->c->ins[i];
            if (in->op != HLO_OP_WHILE)
                continue;
            char *body = hlo_attr_str(s->m, in, "body");
            int bi = body ? hlo_find_comp(s->m, body) : -1;
            const char *lp;
            long t = bi >= 0 ? trip_count(s->m, bi, &lp) : 0;
            size_t nd = 0;
            for (int j = 0; bi >= 0 && j < s->m->comps[bi].n; j++)
                nd += s->m->comps[bi].ins[j].op == HLO_OP_DOT;
            if (t > 0)
                P("while %s: body %s (%zu dots), %ld iterations; analyse it with "
                  "--computation %s\n",
                  in->name, body ? body : "?", nd, t, body ? body : "?");
            else
                P("while %s: body %s (%zu dots), unknown trip count; analyse it with "
                  "--computation %s\n",
                  in->name, body ? body : "?", nd, body ? body : "?");
            erg__free(body);
        }
    }
    {
        int ncc[CC_OPAQUE + 1] = {0};
        for (int i = 0; i < s->n; i++)
            ncc[s->nodes[i].cc]++;
        int tot = ncc[CC_ELEMENTWISE] + ncc[CC_SAMESHAPE] + ncc[CC_LASTDIM] + ncc[CC_ATTENTION] +
                  ncc[CC_OPAQUE];
        if (tot)
            P("custom-calls: %d (%d elementwise, %d same-shape opaque, %d softmax-like, %d fused "
              "attention, %d opaque: replicated)\n",
              tot, ncc[CC_ELEMENTWISE], ncc[CC_SAMESHAPE], ncc[CC_LASTDIM], ncc[CC_ATTENTION],
              ncc[CC_OPAQUE]);
    }
    if (s->reassoc_saved || s->nrpairs)
        P("all-reduce reassociation: %d all-reduces of partial sums merged inside blocks (over "
          "all strategies), %d sibling pairs across blocks (costed on their edges)\n",
          s->reassoc_saved, s->nrpairs);
    P("ParallelBlocks: %d (%zu instructions owned, %zu replicated/multi-block)\n", s->norder,
      nowned, (size_t)s->n - nowned);
    for (int oi = 0; oi < s->norder; oi++) {
        const pblock *p = &s->pbs[s->order[oi]];
        int nd = 0, na = 0, ntw = 0;
        for (int mi = 0; mi < p->nmem; mi++) {
            const char *r = p->mem[mi].role;
            nd += !strcmp(r, "dot");
            na += !strcmp(r, "anchor");
            ntw += !strcmp(r, "twin");
        }
        P("\nPB %d: anchor %s, %d strategies, %d members (%d anchor%s, %d twin%s, %d joined "
          "dot%s)\n",
          oi, s->c->ins[p->anchor].name, p->K, p->nmem, na, na == 1 ? "" : "s", ntw,
          ntw == 1 ? "" : "s", nd, nd == 1 ? "" : "s");
        for (int k = 0; k < p->K; k++)
            P("  strategy %d: %s\n", k, p->names[k]);
        for (int mi = 0; mi < p->nmem; mi++) {
            const member *mm = &p->mem[mi];
            const hlo_instr *in = &s->c->ins[mm->ins];
            bool isdot = in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION;
            if (!isdot)
                continue;
            P("  %-6s %-24s Plan:", mm->role, in->name);
            for (int k = 0; k < p->K; k++) {
                char buf[80];
                shard_spec_str(&mm->out[k], in->shape.rank, buf, sizeof buf);
                bool ar = false;
                for (int c = 0; c < mm->ncolls; c++)
                    ar |= mm->coll_k[c] == k;
                P(" %s%s%s", buf, ar ? "+AR" : "", k + 1 < p->K ? "," : "");
            }
            P("\n");
        }
        int others = 0, merges = 0;
        for (int mi = 0; mi < p->nmem; mi++) {
            others += s->c->ins[p->mem[mi].ins].op != HLO_OP_DOT &&
                      s->c->ins[p->mem[mi].ins].op != HLO_OP_CONVOLUTION;
            merges += !strcmp(p->mem[mi].role, "merge");
        }
        if (all_members) {
            for (int mi = 0; mi < p->nmem; mi++) {
                const member *mm = &p->mem[mi];
                const hlo_instr *in = &s->c->ins[mm->ins];
                if (in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION)
                    continue;
                P("  %-6s %-24s Plan:", mm->role, in->name);
                for (int k = 0; k < p->K; k++) {
                    char buf[80];
                    shard_spec_str(&mm->out[k], in->shape.kind == HLO_ARRAY ? in->shape.rank : 0,
                                   buf, sizeof buf);
                    bool ar = false;
                    for (int c = 0; c < mm->ncolls; c++)
                        ar |= mm->coll_k[c] == k;
                    P(" %s%s%s", buf, ar ? "+AR" : "", k + 1 < p->K ? "," : "");
                }
                P("\n");
            }
            continue;
        }
        P("  + %d other members (%d merge point%s):", others, merges, merges == 1 ? "" : "s");
        int shown = 0;
        for (int mi = 0; mi < p->nmem && shown < 6; mi++) {
            if (s->c->ins[p->mem[mi].ins].op == HLO_OP_DOT ||
                s->c->ins[p->mem[mi].ins].op == HLO_OP_CONVOLUTION)
                continue;
            P(" %s", s->c->ins[p->mem[mi].ins].name);
            shown++;
        }
        P("%s\n", others > shown ? " ..." : "");
    }
    /* Multi-block values: unowned values whose users lie in two or more blocks. */
    int nmulti = 0, shown_multi = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->nodes[i].pb >= 0 || s->nodes[i].sink)
            continue;
        int first = -1;
        bool multi = false;
        for (int u = 0; u < s->nodes[i].nusers; u++) {
            int q = s->nodes[s->nodes[i].users[u]].pb;
            if (q < 0)
                continue;
            if (first >= 0 && q != first)
                multi = true;
            first = q;
        }
        if (!multi)
            continue;
        if (nmulti++ == 0)
            P("\nmulti-block values (replicated, consumed by several blocks):");
        if (shown_multi < 8) {
            P(" %s", s->c->ins[i].name);
            shown_multi++;
        }
    }
    if (nmulti)
        P("%s (%d)\n", nmulti > shown_multi ? " ..." : "", nmulti);
    P("\nunique segments: %d of %d segments\n", s->nuniq, s->nseg);
    for (int i = 0; i < s->nseg; i++) {
        const segment *g = &s->segs[i];
        const segment *u = &s->segs[g->unique];
        P("segments (%d, %d) mapped to (%d, %d)\n", g->first, g->first + g->n, u->first,
          u->first + u->n);
    }
    P("\nstrategy map (per anchor: search space):");
    for (int i = 0; i < s->nseg; i++) {
        const segment *g = &s->segs[i];
        P("\n  segment %d [", i);
        for (int k = 0; k < g->n; k++)
            P("%d%s", s->pbs[s->order[g->first + k]].K, k + 1 < g->n ? "," : "");
        P("]:");
        for (int k = 0; k < g->n; k++)
            P(" %s", s->c->ins[s->pbs[s->order[g->first + k]].anchor].name);
    }
    P("\n");
#undef P
    *text = b.data;
    return ERG_OK;
fail:
    erg__buf_free(&b);
    return erg_error_set(err, st, "out of memory");
}

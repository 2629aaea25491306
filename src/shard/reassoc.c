/* reassoc.c: all-reduce reassociation: sibling dots whose partial sums are added need one
 * all-reduce of the sum, not one each (within a block the others are dropped, across blocks
 * the saving is recorded for cost.c's resharding edges). */
#include "shard/shard_internal.h"

#include <stdlib.h>
#include <string.h>

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
    return is_add(&s->c->ins[u]) && erg__shard_same_dims(&s->c->ins[u].shape, &in->shape);
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
erg_status erg__shard_reassociate(erg_shard *s, erg_error *err)
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
            if (!ERG__GROW(s->rpairs, s->caprpairs, (size_t)s->nrpairs + 1, 8)) {
                ok = false;
                break;
            }
            s->rpairs[s->nrpairs++] =
                (rpair){src[l], src[l + 1], ax[l], by[l], ax[l + 1], by[l + 1], false};
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

/* propagate.c: the propagation table: how a spec crosses each op forward (operand -> output,
 * free, partial sums or not at all) and backward, reshape dim groups, custom-call classes. */
#include "shard/shard_internal.h"

#include <stdlib.h>
#include <string.h>

static bool has_any(const char *t, const char *const *words, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (strstr(t, words[k]))
            return true;
    return false;
}

/* Class of a custom-call (shard_internal.h, CC_*) from its target and shapes; for fused
 * attention also the head dim of its rank-4 operands (-1 for rank 3: [batch*heads, seq, d]). */
int8_t erg__shard_cc_classify(const erg_hlo_module *m, const hlo_comp *c, const hlo_instr *in,
                              int8_t *head)
{
    static const char *const ew[] = {"gelu",
                                     "relu",
                                     "silu",
                                     "swish",
                                     "sigmoid",
                                     "tanh",
                                     "transferwithstaticring",
                                     "identity",
                                     "dropout",
                                     "quickgelu",
                                     "elementwise"};
    static const char *const lastdim[] = {"softmax",  "layernorm",     "layer_norm", "rmsnorm",
                                          "rms_norm", "normalization", "norm"};
    static const char *const attn[] = {"fmha", "flash", "attention", "attn", "sdpa", "mha"};
    *head = -1;
    char *t = erg__hlo_attr_str(m, in, "custom_call_target");
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
        bool same = erg__shard_same_dims(os, o);
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
    if (!strcmp(t, "\"sharding\"") ||
        (plain && all_compat && narr > 0 && has_any(t, ew, ERG__ARRAY_LEN(ew))))
        cls = CC_ELEMENTWISE;
    else if (has_any(t, attn, ERG__ARRAY_LEN(attn))) {
        /* Q, K, V of one rank (3 or 4) whose batch and head dims agree; output like Q. */
        const hlo_shape *Q = in->nops >= 3 ? &c->ins[in->ops[0]].shape : NULL;
        const hlo_shape *K = Q ? &c->ins[in->ops[1]].shape : NULL;
        const hlo_shape *V = Q ? &c->ins[in->ops[2]].shape : NULL;
        bool ok = Q && Q->kind == HLO_ARRAY && K->kind == HLO_ARRAY && V->kind == HLO_ARRAY &&
                  (Q->rank == 3 || Q->rank == 4) && K->rank == Q->rank && V->rank == Q->rank &&
                  o->kind == HLO_ARRAY && erg__shard_same_dims(o, Q) && K->dims[0] == Q->dims[0] &&
                  V->dims[0] == Q->dims[0];
        if (ok && Q->rank == 4) {
            /* The head dim: named by cuDNN's dot dimension numbers (batch dims 0 and h),
             * else the one of dims 1, 2 that K and V share with Q while the other (the
             * sequence) may differ, else the smaller of the two (heads < sequence). */
            int h = -1;
            const hlo_attr *bc = erg__hlo_find_attr(in, "backend_config");
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

int8_t erg__shard_cc_of(const erg_shard *s, const hlo_instr *in)
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
        return erg__shard_cc_of(s, in) == CC_ELEMENTWISE || erg__shard_cc_of(s, in) == CC_SAMESHAPE;
    default:
        return false;
    }
}

bool erg__shard_is_dynamic_slice(const hlo_instr *in)
{
    return in->op == HLO_OP_OTHER && !strcmp(in->opcode, "dynamic-slice");
}

/* A get-tuple-element of a parameter (loop-carried state in a while body). */
bool erg__shard_is_param_gte(const hlo_comp *c, const hlo_instr *in)
{
    return in->op == HLO_OP_GTE && in->nops == 1 && c->ins[in->ops[0]].op == HLO_OP_PARAMETER;
}

bool erg__shard_same_dims(const hlo_shape *a, const hlo_shape *b)
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
static bool reshape_map(const erg_shard *s, const hlo_shape *a, const hlo_shape *o, const spec *in,
                        spec *out)
{
    *out = erg__shard_spec_rep();
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
                o->dims[first_out] % erg__shard_axis_size(s, in->d[k])) {
                ok = false;
                continue;
            }
            out->d[first_out] = in->d[k];
        }
    }
    return ok;
}

/* Forward: operand j arrives with spec `op`; compute the output spec. */
int erg__shard_prop_fwd(const erg_shard *s, int i, int j, const spec *op, spec *out, int *ar_axis)
{
    const hlo_instr *in = &s->c->ins[i];
    const hlo_shape *os = &s->c->ins[in->ops[j]].shape;
    *out = erg__shard_spec_rep();
    *ar_axis = -1;
    int64_t dims[HLO_MAX_RANK];
    int nd;
    if (in->op == HLO_OP_CUSTOM_CALL && erg__shard_cc_of(s, in) == CC_ATTENTION) {
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
        erg__shard_cc_of(s, &s->c->ins[in->ops[0]]) == CC_ATTENTION) {
        /* Element 0 of a fused attention's tuple carries its spec. */
        const hlo_shape *t = &s->c->ins[in->ops[0]].shape;
        nd = erg__hlo_attr_ints(s->m, in, "index", dims, 1);
        if (t->kind != HLO_TUPLE || nd != 1 || dims[0] < 0 || dims[0] >= t->nelems ||
            !erg__shard_same_dims(&t->elems[dims[0]], &in->shape) ||
            !attn_like(s, in->ops[0], &in->shape, &t->elems[0]))
            return PROP_FAIL;
        *out = *op; /* dQ, dK, dV of a backward kernel: the same batch and head dims */
        return PROP_FREE;
    }
    if (in->shape.kind != HLO_ARRAY || os->kind != HLO_ARRAY)
        return PROP_FAIL;
    if (in->op == HLO_OP_CUSTOM_CALL && erg__shard_cc_of(s, in) == CC_LASTDIM) {
        /* Softmax-like: per row of the last dim; a split of that dim is gathered first. */
        if (os->rank == 0)
            return PROP_FREE;
        if (!erg__shard_same_dims(os, &in->shape))
            return PROP_FAIL;
        *out = *op;
        out->d[os->rank - 1] = SP_R;
        return PROP_FREE;
    }
    if (erg__shard_is_dynamic_slice(in)) {
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
        nd = erg__hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd != os->rank)
            return PROP_FAIL;
        for (int k = 0; k < nd; k++) {
            if (dims[k] < 0 || dims[k] >= in->shape.rank)
                return PROP_FAIL;
            out->d[dims[k]] = op->d[k];
        }
        return PROP_FREE;
    case HLO_OP_TRANSPOSE:
        nd = erg__hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
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
        nd = erg__hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
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
        if (!erg__shard_same_dims(os, &in->shape))
            return PROP_FAIL;
        *out = *op;
        return PROP_FREE;
    }
}

/* Backward: the spec operand j must have for instruction i to produce `out` locally. */
spec erg__shard_prop_bwd(const erg_shard *s, int i, int j, const spec *out)
{
    const hlo_instr *in = &s->c->ins[i];
    const hlo_shape *os = &s->c->ins[in->ops[j]].shape;
    spec r = erg__shard_spec_rep();
    if (in->op == HLO_OP_CUSTOM_CALL && erg__shard_cc_of(s, in) == CC_ATTENTION) {
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
        erg__shard_cc_of(s, &s->c->ins[in->ops[0]]) == CC_ATTENTION)
        return *out; /* the tuple's spec is element 0's */
    if (in->shape.kind != HLO_ARRAY || os->kind != HLO_ARRAY || os->rank == 0)
        return r;
    if (in->op == HLO_OP_CUSTOM_CALL && erg__shard_cc_of(s, in) == CC_LASTDIM) {
        if (erg__shard_same_dims(os, &in->shape)) {
            r = *out;
            r.d[os->rank - 1] = SP_R;
        }
        return r;
    }
    if (erg__shard_is_dynamic_slice(in)) {
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
        nd = erg__hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
        if (nd != os->rank)
            return r;
        for (int k = 0; k < nd; k++)
            if (dims[k] >= 0 && dims[k] < in->shape.rank && os->dims[k] == in->shape.dims[dims[k]])
                r.d[k] = out->d[dims[k]];
        return r;
    case HLO_OP_TRANSPOSE:
        nd = erg__hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
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
        nd = erg__hlo_attr_ints(s->m, in, "dimensions", dims, HLO_MAX_RANK);
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
        if (is_identity_op(s, in) && erg__shard_same_dims(os, &in->shape))
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

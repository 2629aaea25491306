/* values.c: the plan as a framework in the same process reads it -- per parameter and output
 * of the analysed computation, the mesh axes of every dim (what annotate writes as
 * sharding={...}), the owning block, why a value stays replicated, and the modelled cost of a
 * block's strategy (python/ergon/jax.py; docs/shard.md, In process). Accessors only. */
#include "shard/shard_internal.h"

#include <stdio.h>
#include <string.h>

void erg_shard_mesh(const erg_shard *s, int *mesh0, int *mesh1)
{
    if (mesh0)
        *mesh0 = s ? s->mesh[0] : 0;
    if (mesh1)
        *mesh1 = s ? s->mesh[1] : 0;
}

/* Instruction index of parameter number i, or -1. */
static int param_ins(const erg_shard *s, size_t i)
{
    for (int k = 0; k < s->n; k++)
        if (s->c->ins[k].op == HLO_OP_PARAMETER && s->c->ins[k].param_num == (long)i)
            return k;
    return -1;
}

size_t erg_shard_num_values(const erg_shard *s, erg_shard_value_kind kind)
{
    if (!s)
        return 0;
    if (kind == ERG_SHARD_OUTPUT) {
        const hlo_instr *r = &s->c->ins[s->c->root];
        return r->shape.kind == HLO_TUPLE ? (size_t)r->shape.nelems : 1;
    }
    size_t n = 0;
    for (int k = 0; k < s->n; k++)
        n += s->c->ins[k].op == HLO_OP_PARAMETER;
    return n;
}

/* Value i: its shape (never NULL when in range) and the instruction whose spec it takes
 * (-1 when there is none: an element of a ROOT tuple not built by a tuple instruction). */
static const hlo_shape *value_of(const erg_shard *s, erg_shard_value_kind kind, size_t i, int *ins)
{
    *ins = -1;
    if (!s || i >= erg_shard_num_values(s, kind))
        return NULL;
    if (kind == ERG_SHARD_PARAMETER) {
        *ins = param_ins(s, i);
        return *ins >= 0 ? &s->c->ins[*ins].shape : NULL;
    }
    const hlo_instr *r = &s->c->ins[s->c->root];
    if (r->shape.kind != HLO_TUPLE) {
        *ins = s->c->root;
        return &r->shape;
    }
    if (r->op == HLO_OP_TUPLE && (int)i < r->nops)
        *ins = r->ops[i];
    return &r->shape.elems[i];
}

const char *erg_shard_value_name(const erg_shard *s, erg_shard_value_kind kind, size_t i)
{
    int ins;
    return value_of(s, kind, i, &ins) && ins >= 0 ? s->c->ins[ins].name : NULL;
}

int erg_shard_value_rank(const erg_shard *s, erg_shard_value_kind kind, size_t i)
{
    int ins;
    const hlo_shape *sh = value_of(s, kind, i, &ins);
    return sh && sh->kind == HLO_ARRAY ? sh->rank : -1;
}

long erg_shard_value_block(const erg_shard *s, erg_shard_value_kind kind, size_t i)
{
    int ins;
    if (!value_of(s, kind, i, &ins) || ins < 0 || s->nodes[ins].pb < 0)
        return -1;
    return s->pos_of[s->nodes[ins].pb];
}

/* The ERG_SHARD_AXIS* bits of spec code c (SP_R, 0, 1, SP_BOTH), axes of size 1 left out. */
static unsigned axis_bits(const erg_shard *s, int8_t c)
{
    unsigned b = 0;
    if ((c == 0 || c == SP_BOTH) && s->mesh[0] > 1)
        b |= ERG_SHARD_AXIS0;
    if ((c == 1 || c == SP_BOTH) && s->mesh[1] > 1)
        b |= ERG_SHARD_AXIS1;
    return b;
}

static void dims_str(const hlo_shape *sh, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 0; d < sh->rank && k + 1 < size; d++) {
        int w = snprintf(buf + k, size - k, "%s%lld", d ? "," : "", (long long)sh->dims[d]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

/* Why value (instruction ins, shape sh) is replicated under p (only called when it is). */
static void replicated_why(const erg_shard *s, const erg_shard_plan *p, int ins,
                           const hlo_shape *sh, char *why, size_t size)
{
    char dims[200];
    if (sh->kind != HLO_ARRAY) {
        snprintf(why, size, "not an array (%s)", sh->kind == HLO_TUPLE ? "a tuple" : "a token");
        return;
    }
    if (sh->rank == 0) {
        snprintf(why, size, "a scalar");
        return;
    }
    dims_str(sh, dims, sizeof dims);
    int pb = ins >= 0 ? s->nodes[ins].pb : -1;
    if (pb < 0 || s->pos_of[pb] < 0) {
        snprintf(why, size,
                 "no block owns it (no dot reaches [%s] through the operations the analysis "
                 "follows)",
                 dims);
        return;
    }
    const pblock *b = &s->pbs[pb];
    const member *mm = &b->mem[s->nodes[ins].slot];
    int pos = s->pos_of[pb], splits = 0;
    for (int k = 0; k < b->K; k++)
        splits += erg__shard_tiles(s, &mm->out[k], sh->rank) > 1;
    if (!splits)
        snprintf(why, size,
                 "no strategy of block %d (%s) splits [%s] on the %dx%d mesh (no dim it "
                 "could split divides by the mesh axes)",
                 pos, s->c->ins[b->anchor].name, dims, s->mesh[0], s->mesh[1]);
    else
        snprintf(why, size,
                 "block %d (%s) runs strategy %s, which keeps [%s] whole (%d of its %d "
                 "strategies split it; the plan's is cheaper)",
                 pos, s->c->ins[b->anchor].name, b->names[p->k[pos]], dims, splits, b->K);
}

erg_status erg_shard_value_axes(const erg_shard *s, const erg_shard_plan *p,
                                erg_shard_value_kind kind, size_t i, unsigned *axes, size_t naxes,
                                char *why, size_t why_size, erg_error *err)
{
    if (!s || !p || (!axes && naxes))
        return erg_error_set(err, ERG_EINVAL, "erg_shard_value_axes: NULL argument");
    int ins;
    const hlo_shape *sh = value_of(s, kind, i, &ins);
    if (!sh)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_value_axes: %s %zu out of range (%zu)",
                             kind == ERG_SHARD_OUTPUT ? "output" : "parameter", i,
                             erg_shard_num_values(s, kind));
    int rank = sh->kind == HLO_ARRAY ? sh->rank : 0;
    if ((size_t)rank > naxes)
        return erg_error_set(err, ERG_EINVAL,
                             "erg_shard_value_axes: %s %zu has rank %d, room for %zu axes",
                             kind == ERG_SHARD_OUTPUT ? "output" : "parameter", i, rank, naxes);
    const spec *sp = ins >= 0 ? erg__shard_plan_spec(s, p, ins) : NULL;
    /* as emit.c's sharding_str: a spec whose tiles cover one device is replicated */
    bool split = sp && rank > 0 && erg__shard_tiles(s, sp, rank) > 1;
    for (int d = 0; d < rank; d++)
        axes[d] = split ? axis_bits(s, sp->d[d]) : 0;
    if (why && why_size) {
        why[0] = '\0';
        if (!split)
            replicated_why(s, p, ins, sh, why, why_size);
    }
    return ERG_OK;
}

erg_status erg_shard_block_cost(const erg_shard *s, size_t b, size_t k, double *time_s,
                                double *comm_s, double *memory_bytes, erg_error *err)
{
    if (!s)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_block_cost: NULL argument");
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "erg_shard_block_cost: run erg_shard_profile first");
    if (b >= (size_t)s->norder)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_block_cost: block %zu out of range (%d)",
                             b, s->norder);
    const pblock *pb = &s->pbs[s->order[b]];
    if (k >= (size_t)pb->K)
        return erg_error_set(err, ERG_EINVAL,
                             "erg_shard_block_cost: strategy %zu of block %zu out of range (%d)", k,
                             b, pb->K);
    if (time_s)
        *time_s = pb->time_s[k];
    if (comm_s)
        *comm_s = pb->comm_s[k];
    if (memory_bytes)
        *memory_bytes = pb->mem_bytes[k];
    return ERG_OK;
}

erg_status erg_shard_profile_device(erg_shard *s, const char *device, erg_error *err)
{
    erg_shard_cost_options o;
    erg_shard_cost_options_init(&o);
    o.device = device;
    return erg_shard_profile(s, &o, NULL, NULL, err);
}

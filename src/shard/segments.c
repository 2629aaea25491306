/* segments.c: repeated segments of the block sequence: a hash per block (its dots and its
 * strategies), the period p <= 64 and offset that cover the most blocks with repeats, and the
 * cut into segments whose strategy combinations stay enumerable (docs/shard.md "Segments"). */
#include "shard/shard_internal.h"

#include <stdlib.h>
#include <string.h>

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

erg_status shard_block_hashes(erg_shard *s, erg_error *err)
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
    if (!ERG__GROW(s->segs, s->capseg, (size_t)s->nseg + 1, 16))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    segment *sg = s->segs;
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

erg_status shard_find_segments(erg_shard *s, erg_error *err)
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

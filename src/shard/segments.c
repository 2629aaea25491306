/* segments.c: repeated segments of the block sequence: a hash per block (its dots and its
 * strategies), the period p <= 64 and offset that cover the most blocks with repeats, and the
 * cut into segments whose strategy combinations stay enumerable (docs/shard.md "Segments");
 * then, once cost.c has the block and edge costs, each segment's combination table (time and
 * memory of every strategy combination, or an imported profile row), its kept best
 * combinations, and the exact DP tables built from them. */
#include "shard/shard_internal.h"

#include <math.h>
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

erg_status erg__shard_block_hashes(erg_shard *s, erg_error *err)
{
    static const char *const keys[] = {"dimensions",
                                       "lhs_contracting_dims",
                                       "rhs_contracting_dims",
                                       "lhs_batch_dims",
                                       "rhs_batch_dims",
                                       "direction",
                                       "slice",
                                       "index"};
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
                char *v = erg__hlo_attr_str(s->m, in, keys[k]);
                h = hstr(h, v);
                erg__free(v);
            }
            for (int k = 0; k < p->K; k++) {
                char buf[80];
                erg__shard_spec_str(&p->mem[mi].out[k], in->shape.rank, buf, sizeof buf);
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

erg_status erg__shard_find_segments(erg_shard *s, erg_error *err)
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

/* ---- segment combination tables: block and edge costs summed per combination ---- */

void erg__shard_seg_decode(const erg_shard *s, const segment *g, long c, size_t *k)
{
    for (int i = g->n - 1; i >= 0; i--) {
        int K = s->pbs[s->order[g->first + i]].K;
        k[g->first + i] = (size_t)(c % K);
        c /= K;
    }
}

/* Per segment, the indices of the edges with both ends inside it, in edge order: one pass
 * over the edges for all segments (segments_build asked seg_edges per segment, which scanned
 * every edge each time: quadratic with 20,000 one-block segments). *start has nseg + 1
 * entries; the caller frees both. */
static erg_status seg_edge_lists(const erg_shard *s, int **start, int **list)
{
    int *seg_of = erg__malloc(((size_t)s->norder + 1) * sizeof(int));
    *start = erg__calloc((size_t)s->nseg + 2, sizeof(int));
    *list = erg__malloc(((size_t)s->nedges + 1) * sizeof(int));
    if (!seg_of || !*start || !*list) {
        erg__free(seg_of);
        erg__free(*start);
        erg__free(*list);
        *start = *list = NULL;
        return ERG_ENOMEM;
    }
    for (int i = 0; i < s->norder; i++)
        seg_of[i] = -1;
    for (int si = 0; si < s->nseg; si++)
        for (int i = 0; i < s->segs[si].n; i++)
            seg_of[s->segs[si].first + i] = si;
    int *st = *start;
    for (int e = 0; e < s->nedges; e++) {
        int a = seg_of[s->edges[e].a];
        if (a >= 0 && a == seg_of[s->edges[e].b])
            st[a + 1]++;
    }
    for (int si = 0; si < s->nseg; si++)
        st[si + 1] += st[si];
    int *pos = erg__malloc(((size_t)s->nseg + 1) * sizeof(int));
    if (!pos) {
        erg__free(seg_of);
        erg__free(*start);
        erg__free(*list);
        *start = *list = NULL;
        return ERG_ENOMEM;
    }
    memcpy(pos, st, (size_t)s->nseg * sizeof(int));
    for (int e = 0; e < s->nedges; e++) {
        int a = seg_of[s->edges[e].a];
        if (a >= 0 && a == seg_of[s->edges[e].b])
            (*list)[pos[a]++] = e;
    }
    erg__free(pos);
    erg__free(seg_of);
    return ERG_OK;
}

/* Sum of block and intra-segment edge costs for combination c of segment g. */
/* Indices of the edges with both ends inside segment g (caller frees); -1 on OOM. */
int erg__shard_seg_edges(const erg_shard *s, const segment *g, int **out)
{
    *out = erg__malloc((size_t)(s->nedges + 1) * sizeof(int));
    if (!*out)
        return -1;
    int n = 0;
    for (int e = 0; e < s->nedges; e++) {
        const pedge *E = &s->edges[e];
        if (E->a >= g->first && E->a < g->first + g->n && E->b >= g->first &&
            E->b < g->first + g->n)
            (*out)[n++] = e;
    }
    return n;
}

void erg__shard_seg_cost(const erg_shard *s, const segment *g, const int *rel, int nrel,
                         const size_t *k, double *time_s, double *mem, double *comm_s,
                         double *comm_bytes, double *intr_s)
{
    double t = 0, m = 0, cs = 0, cb = 0, is = 0;
    for (int i = 0; i < g->n; i++) {
        const pblock *p = &s->pbs[s->order[g->first + i]];
        size_t kk = k[g->first + i];
        t += p->time_s[kk];
        m += p->mem_bytes[kk];
        cs += p->comm_s[kk];
        is += p->intr_s[kk];
        cb += p->comm_bytes[kk];
    }
    int n = rel ? nrel : s->nedges;
    for (int x = 0; x < n; x++) {
        const pedge *E = &s->edges[rel ? rel[x] : x];
        if (!rel && (E->a < g->first || E->a >= g->first + g->n || E->b < g->first ||
                     E->b >= g->first + g->n))
            continue;
        int Kb = s->pbs[s->order[E->b]].K;
        double c = E->cost_s[k[E->a] * (size_t)Kb + k[E->b]];
        t += c;
        cs += c;
        cb += E->bytes[k[E->a] * (size_t)Kb + k[E->b]];
    }
    *time_s = t;
    *mem = m;
    if (comm_s)
        *comm_s = cs;
    if (comm_bytes)
        *comm_bytes = cb;
    if (intr_s)
        *intr_s = is;
}

int erg__shard_cmp_ci(const void *a, const void *b)
{
    double x = ((const shard_ci *)a)->v, y = ((const shard_ci *)b)->v;
    return x < y ? -1 : x > y;
}

erg_status erg__shard_load_profiles(erg_shard *s, const char *path, shard_imported **out, int *nout,
                                    erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_file(path, 256 << 20, &text, &len, err);
    if (st)
        return st;
    erg__csv c;
    erg__csv_init(&c, text, len);
    int r, n = 0;
    size_t cap = 0;
    shard_imported *v = NULL;
    bool header = true;
    while ((r = erg__csv_next(&c)) > 0) {
        if (header) {
            header = false;
            if (c.nfields != 4 || strcmp(c.fields[0], "segment") ||
                strcmp(c.fields[1], "strategies")) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: expected the header segment,strategies,time_s,"
                                   "memory_bytes",
                                   path, c.line);
                break;
            }
            continue;
        }
        long seg;
        double ts, mem;
        if (c.nfields != 4 || !erg__parse_long(c.fields[0], &seg) ||
            !erg__parse_double(c.fields[2], &ts) || !erg__parse_double(c.fields[3], &mem) ||
            ts < 0 || mem < 0) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: expected segment,strategies,time_s,memory_bytes with "
                               "non-negative numbers",
                               path, c.line);
            break;
        }
        if (seg < 0 || seg >= s->nseg || s->segs[seg].unique != seg) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: segment %ld is not a unique segment of this analysis "
                               "(see 'ergon shard analyze')",
                               path, c.line, seg);
            break;
        }
        const segment *g = &s->segs[seg];
        long combo = 0;
        const char *q = c.fields[1];
        int cnt = 0;
        while (*q) {
            char *e;
            long k = strtol(q, &e, 10);
            if (e == q || cnt >= g->n || k < 0 || k >= s->pbs[s->order[g->first + cnt]].K) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: strategies '%s' must be %d indices joined by '-', "
                                   "each below its block's strategy count",
                                   path, c.line, c.fields[1], g->n);
                goto out;
            }
            combo = combo * s->pbs[s->order[g->first + cnt]].K + k;
            cnt++;
            q = e;
            if (*q == '-')
                q++;
            else if (*q) {
                cnt = -1;
                break;
            }
        }
        if (cnt != g->n) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: strategies '%s' must list %d indices",
                               path, c.line, c.fields[1], g->n);
            break;
        }
        if (!ERG__GROW(v, cap, (size_t)n + 1, 64)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            break;
        }
        v[n++] = (shard_imported){(int)seg, combo, ts, mem};
    }
    if (r < 0 && !st)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
out:
    erg__csv_free(&c);
    erg__free(text);
    if (st) {
        erg__free(v);
        return st;
    }
    *out = v;
    *nout = n;
    return ERG_OK;
}

/* True when segment g repeats segment u (an earlier occurrence of its unique segment) with
 * bitwise identical block costs and intra-segment edges, so its combination table is u's
 * (the first BERT layer differs slightly: it also holds embedding ops). rel: g's edges. */
static bool same_costs(const erg_shard *s, const segment *g, const segment *u, const int *rel,
                       int nrel)
{
    if (u == g || u->n != g->n || u->ncombo != g->ncombo || u->first >= g->first)
        return false;
    for (int i = 0; i < g->n; i++) {
        const pblock *a = &s->pbs[s->order[g->first + i]], *b = &s->pbs[s->order[u->first + i]];
        size_t K = (size_t)a->K;
        if (a->K != b->K || memcmp(a->time_s, b->time_s, K * sizeof(double)) ||
            memcmp(a->mem_bytes, b->mem_bytes, K * sizeof(double)))
            return false;
    }
    int n = 0;
    for (int e = 0; e < s->nedges; e++) {
        const pedge *E = &s->edges[e];
        if (E->a < u->first || E->a >= u->first + u->n || E->b < u->first ||
            E->b >= u->first + u->n)
            continue;
        if (n >= nrel)
            return false;
        const pedge *F = &s->edges[rel[n++]];
        if (F->a - g->first != E->a - u->first || F->b - g->first != E->b - u->first)
            return false;
        size_t KK = (size_t)s->pbs[s->order[E->a]].K * (size_t)s->pbs[s->order[E->b]].K;
        if (memcmp(E->cost_s, F->cost_s, KK * sizeof(double)))
            return false;
    }
    return n == nrel;
}

/* Per segment: every combination's time and memory (block costs plus intra-segment edges,
 * or an imported profile row), the `keep` fastest plus `keep` smallest for the report and
 * the fallback DP, and the exact DP tables (search.c). */
erg_status erg__shard_segments_build(erg_shard *s, const shard_imported *imp, int nimp, int keep,
                                     bool only, erg_error *err)
{
    erg_status st = ERG_OK;
    size_t *kv = erg__calloc((size_t)s->norder + 1, sizeof(size_t));
    double **tvs = erg__calloc((size_t)s->nseg + 1, sizeof(double *));
    double **mvs = erg__calloc((size_t)s->nseg + 1, sizeof(double *));
    int *same_as = erg__malloc((size_t)(s->nseg + 1) * sizeof(int));
    for (int si = 0; same_as && si <= s->nseg; si++)
        same_as[si] = -1;
    shard_ci *bt = NULL, *bm = NULL;
    int *rel = NULL, *rel_start = NULL, *rel_list = NULL;
    int *last_of = erg__malloc(((size_t)s->nseg + 1) * sizeof(int));
    for (int si = 0; last_of && si <= s->nseg; si++)
        last_of[si] = -1;
    s->imports = nimp > 0 || only;
    if (!kv || !tvs || !mvs || !same_as || !last_of || seg_edge_lists(s, &rel_start, &rel_list)) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    for (int si = 0; si < s->nseg; si++) {
        segment *g = &s->segs[si];
        erg__shard_segment_free_costs(g);
        g->imp_only = only;
        long nc = 1;
        for (int i = 0; i < g->n; i++)
            nc *= s->pbs[s->order[g->first + i]].K;
        g->ncombo = nc;
        int nrel = rel_start[si + 1] - rel_start[si];
        rel = erg__malloc(((size_t)nrel + 1) * sizeof(int));
        if (!rel) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto done;
        }
        memcpy(rel, rel_list + rel_start[si], (size_t)nrel * sizeof(int));
        /* the latest earlier occurrence of the same unique segment (unique ids are segment
         * indices: last_of[] keeps the scan linear with thousands of distinct segments) */
        int from = g->unique >= 0 && g->unique < s->nseg ? last_of[g->unique] : -1;
        if (g->unique >= 0 && g->unique < s->nseg)
            last_of[g->unique] = si;
        bool reuse = from >= 0 && same_costs(s, g, &s->segs[from], rel, nrel);
        same_as[si] = reuse ? from : -1;
        if (reuse) {
            /* A repeat of its unique segment with identical block and edge costs (the 12
             * BERT layers): its combinations and kept rows are that segment's, costed and
             * stored once (tvs/mvs point at the earlier arrays). */
            const segment *u = &s->segs[from];
            tvs[si] = tvs[from];
            mvs[si] = mvs[from];
            g->imported = u->imported;
            g->keep = erg__malloc((size_t)(u->nkeep + 1) * sizeof(long));
            g->keep_time = erg__malloc((size_t)(u->nkeep + 1) * sizeof(double));
            g->keep_mem = erg__malloc((size_t)(u->nkeep + 1) * sizeof(double));
            g->imp = erg__malloc((size_t)(u->nimp + 1) * sizeof(seg_import));
            if (!g->keep || !g->keep_time || !g->keep_mem || !g->imp) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto done;
            }
            g->nkeep = u->nkeep;
            memcpy(g->keep, u->keep, (size_t)u->nkeep * sizeof(long));
            memcpy(g->keep_time, u->keep_time, (size_t)u->nkeep * sizeof(double));
            memcpy(g->keep_mem, u->keep_mem, (size_t)u->nkeep * sizeof(double));
            g->nimp = u->nimp;
            if (u->nimp)
                memcpy(g->imp, u->imp, (size_t)u->nimp * sizeof(seg_import));
            erg__free(rel);
            rel = NULL;
            continue;
        }
        bt = erg__malloc((size_t)nc * sizeof(shard_ci));
        bm = erg__malloc((size_t)nc * sizeof(shard_ci));
        tvs[si] = erg__malloc((size_t)nc * sizeof(double));
        mvs[si] = erg__malloc((size_t)nc * sizeof(double));
        if (!bt || !bm || !tvs[si] || !mvs[si]) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto done;
        }
        double *tv = tvs[si], *mv = mvs[si];
        size_t capimp = 0;
        for (long c = 0; !reuse && c < nc; c++) {
            erg__shard_seg_decode(s, g, c, kv);
            double t, m;
            erg__shard_seg_cost(s, g, rel, nrel, kv, &t, &m, NULL, NULL, NULL);
            const shard_imported *row = NULL;
            for (int x = 0; x < nimp; x++) /* the file's last row of c counts */
                if (imp[x].seg == g->unique && imp[x].combo == c)
                    row = &imp[x];
            if (row) {
                if (!ERG__GROW(g->imp, capimp, (size_t)g->nimp + 1, 4)) {
                    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                    goto done;
                }
                double ti = row->time_s * (double)s->trips;
                g->imp[g->nimp++] = (seg_import){c, ti - t, row->mem - m};
                t = ti;
                m = row->mem;
                g->imported = true;
            }
            bool found = row != NULL;
            if (only && !found) /* measured costs only: not a candidate */
                t = INFINITY;
            bt[c] = (shard_ci){c, t};
            bm[c] = (shard_ci){c, m};
            tv[c] = t;
            mv[c] = m;
        }
        erg__free(rel);
        rel = NULL;
        qsort(bt, (size_t)nc, sizeof *bt, erg__shard_cmp_ci);
        qsort(bm, (size_t)nc, sizeof *bm, erg__shard_cmp_ci);
        int cap = (int)ERG__MIN((long)2 * keep, nc);
        g->keep = erg__malloc((size_t)cap * sizeof(long));
        g->keep_time = erg__malloc((size_t)cap * sizeof(double));
        g->keep_mem = erg__malloc((size_t)cap * sizeof(double));
        if (!g->keep || !g->keep_time || !g->keep_mem) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto done;
        }
        for (int pass = 0; pass < 2; pass++) {
            shard_ci *arr = pass ? bm : bt;
            for (long x = 0; x < ERG__MIN((long)keep, nc); x++) {
                long c = arr[x].c;
                if (!isfinite(tv[c]))
                    continue; /* not a candidate (measured costs only) */
                bool dup = false;
                for (int y = 0; y < g->nkeep && !dup; y++)
                    dup = g->keep[y] == c;
                if (!dup && g->nkeep < cap)
                    g->keep[g->nkeep++] = c;
            }
        }
        for (int y = 0; y < g->nkeep; y++) {
            g->keep_time[y] = tv[g->keep[y]];
            g->keep_mem[y] = mv[g->keep[y]];
        }
        erg__free(bt);
        erg__free(bm);
        bt = bm = NULL;
    }
    st = erg__shard_dp_prepare(s, tvs, mvs, same_as, err);
done:
    for (int si = 0; tvs && mvs && same_as && si < s->nseg; si++) {
        if (same_as[si] >= 0)
            continue; /* shared with an earlier segment */
        erg__free(tvs[si]);
        erg__free(mvs[si]);
    }
    erg__free(tvs);
    erg__free(mvs);
    erg__free(same_as);
    erg__free(bt);
    erg__free(bm);
    erg__free(rel);
    erg__free(rel_start);
    erg__free(rel_list);
    erg__free(last_of);
    erg__free(kv);
    return st;
}

void erg__shard_segment_free_costs(segment *g)
{
    erg__free(g->keep);
    erg__free(g->keep_time);
    erg__free(g->keep_mem);
    erg__free(g->imp);
    g->keep = NULL;
    g->keep_time = g->keep_mem = NULL;
    g->imp = NULL;
    g->nkeep = g->nimp = 0;
    g->imported = g->imp_only = false;
}

static int cmp_import(const void *key, const void *elem)
{
    long c = *(const long *)key, e = ((const seg_import *)elem)->combo;
    return c < e ? -1 : c > e;
}

void erg__shard_eval_used(const erg_shard *s, const size_t *k, double *time_s, double *mem_bytes)
{
    erg__shard_eval(s, k, time_s, mem_bytes, NULL);
    for (int si = 0; s->imports && si < s->nseg; si++) {
        const segment *g = &s->segs[si];
        if (!g->nimp && !g->imp_only)
            continue;
        long c = 0; /* the combination of k in g: erg__shard_seg_decode's mixed radix */
        for (int i = 0; i < g->n; i++)
            c = c * s->pbs[s->order[g->first + i]].K + (long)k[g->first + i];
        const seg_import *r =
            g->nimp ? bsearch(&c, g->imp, (size_t)g->nimp, sizeof *g->imp, cmp_import) : NULL;
        if (r) {
            *time_s += r->dt_s;
            *mem_bytes += r->dm_bytes;
        } else if (g->imp_only) {
            *time_s = INFINITY;
        }
    }
}

erg_status erg__shard_segments_rebuild(erg_shard *s, int keep, erg_error *err)
{
    return erg__shard_segments_build(s, NULL, 0, keep > 0 ? keep : 64, false, err);
}

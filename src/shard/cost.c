/* cost.c: block and edge costs: alpha-beta collectives, roofline or measured compute (the
 * GEMM timing is in cost_gemm.c), resharding between specs, memory; erg_shard_profile, which
 * builds them and then the segment tables (segments.c); evaluation and the cost reports. One
 * concept in ~1,080 lines: the cost model and the one entry that applies it to every block and
 * edge; its measured-GEMM timing and segment tables are already in their own files. */
#include "shard/shard_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Cost model (docs/shard.md, Costs), per device, in seconds:
 *  - collective on mesh axis d with n devices (alpha_d s, beta_d s/byte):
 *      all-reduce  alpha + beta * 2(n-1)/n * B   (B = tensor bytes per device)
 *      all-gather  alpha + beta * (n-1)/n * B    (B = gathered bytes per device)
 *      all-to-all  alpha + beta * (n-1)/(2n) * B (B = full tensor bytes; Alpa's n/2 penalty)
 *    "both axes" uses n = m0*m1, the larger alpha and the larger beta (slower link).
 *  - resharding src -> dst, per mesh axis: same dim or newly split: free (local slice);
 *    split dim lost: all-gather; moved to another dim: all-to-all. Costs add over axes.
 *  - compute: dot FLOPs / tiles / (peak * efficiency), other ops 2 * output bytes / tiles /
 *    memory bandwidth; or, for dots, the measured time of the local GEMM.
 *  - memory per device: weights * optimizer factor / tiles + forward dot outputs / tiles;
 *    unowned values are replicated (a constant).
 */

static const char builtin_devices[] =
    "name,peak_tflops,efficiency,mem_bw_gbs,mem_gb,alpha0_us,bw0_gbs,alpha1_us,bw1_gbs\n"
    "a100-nvlink,312,0.6,2039,80,10,300,10,300\n"
    "a100-pcie,312,0.6,1935,40,15,24,15,24\n"
    "h100,989,0.6,3350,80,8,450,8,450\n"
    "v100,125,0.6,900,16,10,150,10,150\n";

erg_status erg__shard_load_devices(const char *path, const char *name, device_params *out,
                                   erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_status st;
    const char *src = path ? path : "built-in device table";
    if (path) {
        if ((st = erg__read_file(path, 1 << 20, &text, &len, err)))
            return st;
    } else {
        text = erg__strdup(builtin_devices);
        if (!text)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        len = strlen(text);
    }
    if (!name)
        name = "a100-nvlink";
    erg__csv c;
    erg__csv_init(&c, text, len);
    int r;
    bool header = true, found = false;
    st = ERG_OK;
    while ((r = erg__csv_next(&c)) > 0) {
        if (header) {
            header = false;
            if (c.nfields != 9 || strcmp(c.fields[0], "name")) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: expected the header "
                                   "name,peak_tflops,efficiency,mem_bw_gbs,mem_gb,alpha0_us,"
                                   "bw0_gbs,alpha1_us,bw1_gbs",
                                   src, c.line);
                break;
            }
            continue;
        }
        if (c.nfields != 9) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: expected 9 fields, got %zu", src, c.line,
                               c.nfields);
            break;
        }
        double v[8];
        for (int i = 0; i < 8; i++)
            if (!erg__parse_double(c.fields[i + 1], &v[i]) || v[i] < 0 ||
                ((i != 4 && i != 6) && v[i] <= 0)) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: field %d '%s' is not a valid number",
                                   src, c.line, i + 2, c.fields[i + 1]);
                goto out;
            }
        if (strcmp(c.fields[0], name))
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", c.fields[0]);
        out->peak_flops = v[0] * 1e12;
        out->eff = v[1];
        out->mem_bw = v[2] * 1e9;
        out->mem_bytes = v[3] * 1e9;
        out->alpha[0] = v[4] * 1e-6;
        out->beta[0] = 1.0 / (v[5] * 1e9);
        out->alpha[1] = v[6] * 1e-6;
        out->beta[1] = 1.0 / (v[7] * 1e9);
        found = true;
    }
    if (r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st && !found)
        st = erg_error_set(err, ERG_ENOTFOUND, "%s: no device named '%s'", src, name);
out:
    erg__csv_free(&c);
    erg__free(text);
    return st;
}

static int axis_n(const erg_shard *s, int axis)
{
    return axis == SP_BOTH ? s->mesh[0] * s->mesh[1] : s->mesh[axis];
}

static double coll_factor(int kind, int n)
{
    switch (kind) {
    case COLL_AR:
        return 2.0 * (n - 1) / n;
    case COLL_AG:
        return (double)(n - 1) / n;
    default:
        return (double)(n - 1) / (2.0 * n);
    }
}

double erg__shard_coll_time(const erg_shard *s, int kind, int axis, double bytes)
{
    int n = axis_n(s, axis);
    if (n <= 1 || bytes <= 0)
        return 0;
    double a, b;
    if (axis == SP_BOTH) {
        a = ERG__MAX(s->dev.alpha[0], s->dev.alpha[1]);
        b = ERG__MAX(s->dev.beta[0], s->dev.beta[1]);
    } else {
        a = s->dev.alpha[axis];
        b = s->dev.beta[axis];
    }
    return a + b * coll_factor(kind, n) * bytes;
}

static bool uses(int8_t code, int a)
{
    return code == a || code == SP_BOTH;
}

/* erg__shard_reshard, also split by collective kind when cnt/kb are given (COLL_AG, COLL_A2A). */
static double reshard_kinds(const erg_shard *s, const hlo_shape *sh, const spec *src,
                            const spec *dst, double *bytes, double *cnt, double *kb)
{
    *bytes = 0;
    if (sh->kind != HLO_ARRAY || sh->rank == 0)
        return 0;
    double full = erg__hlo_shape_bytes(sh), t = 0;
    int tiles = erg__shard_tiles(s, src, sh->rank);
    for (int a = 0; a < 2; a++) {
        if (s->mesh[a] <= 1)
            continue;
        int ds = -1, dd = -1;
        for (int k = 0; k < sh->rank; k++) {
            if (uses(src->d[k], a))
                ds = k;
            if (uses(dst->d[k], a))
                dd = k;
        }
        if (ds < 0 || ds == dd)
            continue;
        int n = s->mesh[a];
        if (dd < 0) {
            double B = full / tiles * n;
            t += erg__shard_coll_time(s, COLL_AG, a, B);
            *bytes += coll_factor(COLL_AG, n) * B;
            if (cnt) {
                cnt[COLL_AG] += 1;
                kb[COLL_AG] += coll_factor(COLL_AG, n) * B;
            }
        } else {
            double B = full / tiles * n;
            t += erg__shard_coll_time(s, COLL_A2A, a, B);
            *bytes += coll_factor(COLL_A2A, n) * B;
            if (cnt) {
                cnt[COLL_A2A] += 1;
                kb[COLL_A2A] += coll_factor(COLL_A2A, n) * B;
            }
        }
    }
    return t;
}

double erg__shard_reshard(const erg_shard *s, const hlo_shape *sh, const spec *src, const spec *dst,
                          double *bytes)
{
    return reshard_kinds(s, sh, src, dst, bytes, NULL, NULL);
}

/* ---- per-member costs ---- */

/* Local GEMM shape of a dot member under its specs: batch, M, N, K per device. */
static void dot_local(const erg_shard *s, const hlo_instr *in, const spec *l, const spec *r,
                      int64_t dims[4])
{
    const hlo_shape *L = &s->c->ins[in->ops[0]].shape, *R = &s->c->ins[in->ops[1]].shape;
    int64_t lb[HLO_MAX_RANK], lc[HLO_MAX_RANK], rc[HLO_MAX_RANK];
    int nb = erg__hlo_attr_ints(s->m, in, "lhs_batch_dims", lb, HLO_MAX_RANK);
    int nc = erg__hlo_attr_ints(s->m, in, "lhs_contracting_dims", lc, HLO_MAX_RANK);
    int nc2 = erg__hlo_attr_ints(s->m, in, "rhs_contracting_dims", rc, HLO_MAX_RANK);
    bool lk[HLO_MAX_RANK] = {0}, lbm[HLO_MAX_RANK] = {0}, rk[HLO_MAX_RANK] = {0};
    for (int i = 0; i < nc; i++)
        if (lc[i] >= 0 && lc[i] < L->rank)
            lk[lc[i]] = true;
    for (int i = 0; i < nb; i++)
        if (lb[i] >= 0 && lb[i] < L->rank)
            lbm[lb[i]] = true;
    for (int i = 0; i < nc2; i++)
        if (rc[i] >= 0 && rc[i] < R->rank)
            rk[rc[i]] = true;
    int64_t B = 1, M = 1, K = 1;
    for (int i = 0; i < L->rank; i++) {
        int64_t d = L->dims[i];
        if (l->d[i] != SP_R)
            d /= l->d[i] == SP_BOTH ? s->mesh[0] * s->mesh[1] : s->mesh[l->d[i]];
        if (lbm[i])
            B *= d;
        else if (lk[i])
            K *= d;
        else
            M *= d;
    }
    int64_t N = 1;
    int64_t rbatch = 1;
    for (int i = 0; i < R->rank; i++) {
        int64_t d = R->dims[i];
        if (r->d[i] != SP_R)
            d /= r->d[i] == SP_BOTH ? s->mesh[0] * s->mesh[1] : s->mesh[r->d[i]];
        if (!rk[i])
            N *= d;
    }
    (void)rbatch;
    /* rhs batch dims were counted in N; divide them out. */
    if (nb > 0 && B > 0)
        N /= B;
    dims[0] = B;
    dims[1] = M;
    dims[2] = N ? N : 1;
    dims[3] = K;
}

/* Devices a dim is split over under spec code c. */
static int code_size(const erg_shard *s, int8_t c)
{
    return c == SP_R ? 1 : c == SP_BOTH ? s->mesh[0] * s->mesh[1] : s->mesh[c];
}

/* Convolution as a GEMM: M = output elements / output features, N = output features,
 * K = filter elements / output features; per device under the operand specs. */
static bool conv_gemm(const erg_shard *s, const hlo_instr *in, const spec *l, const spec *r,
                      int64_t dims[4])
{
    const hlo_shape *L = &s->c->ins[in->ops[0]].shape, *R = &s->c->ins[in->ops[1]].shape;
    int idx[6];
    if (!erg__shard_conv_labels(s->m, in, L->rank, R->rank, in->shape.rank, idx))
        return false;
    double out = (double)erg__hlo_shape_elems(&in->shape), filt = (double)erg__hlo_shape_elems(R);
    int64_t of = in->shape.dims[idx[5]];
    /* a zero-size dim empties the GEMM (M, N or K 0; clamped to 1 below, no division by 0) */
    int64_t M = of ? (int64_t)(out / (double)of) : 0, N = of,
            K = of ? (int64_t)(filt / (double)of) : 0;
    if (l) {
        int64_t bl = L->dims[idx[0]], fl = L->dims[idx[1]], ol = R->dims[idx[3]];
        int64_t b2 = bl / code_size(s, l->d[idx[0]]);
        int64_t f2 = fl / code_size(s, l->d[idx[1]]);
        int64_t o2 = ol / code_size(s, r->d[idx[3]]);
        M = bl ? M / bl * b2 : 0;
        K = fl ? K / fl * f2 : 0;
        N = o2;
    }
    dims[0] = 1;
    dims[1] = M > 0 ? M : 1;
    dims[2] = N > 0 ? N : 1;
    dims[3] = K > 0 ? K : 1;
    return true;
}

static double dot_flops(const erg_shard *s, const hlo_instr *in)
{
    if (in->op == HLO_OP_CONVOLUTION) {
        int64_t d[4];
        return conv_gemm(s, in, NULL, NULL, d) && erg__hlo_shape_elems(&in->shape) > 0
                   ? 2.0 * (double)d[1] * (double)d[2] * (double)d[3]
                   : 0;
    }
    const hlo_shape *L = &s->c->ins[in->ops[0]].shape;
    int64_t lc[HLO_MAX_RANK];
    int nc = erg__hlo_attr_ints(s->m, in, "lhs_contracting_dims", lc, HLO_MAX_RANK);
    double k = 1;
    for (int i = 0; i < nc; i++)
        if (lc[i] >= 0 && lc[i] < L->rank)
            k *= (double)L->dims[lc[i]];
    return 2.0 * (double)erg__hlo_shape_elems(&in->shape) * k;
}

static erg_status member_compute(const erg_shard *s, timer_ctx *t, const member *m, int K, int k,
                                 double *time_s, double *flops, erg_error *err)
{
    const hlo_instr *in = &s->c->ins[m->ins];
    *flops = 0;
    *time_s = 0;
    if (in->shape.kind != HLO_ARRAY)
        return ERG_OK;
    if ((in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION) && in->nops == 2) {
        double f = dot_flops(s, in);
        *flops = f;
        int64_t d[4];
        if (in->op == HLO_OP_DOT)
            dot_local(s, in, &m->req[k], &m->req[K + k], d);
        else if (!conv_gemm(s, in, &m->req[k], &m->req[K + k], d))
            d[0] = d[1] = d[2] = d[3] = 1;
        double per_dev = 2.0 * (double)d[0] * (double)d[1] * (double)d[2] * (double)d[3];
        if (t && t->mode != ERG_SHARD_COMPUTE_MODEL)
            return erg__shard_time_gemm(t, d[0], d[1], d[2], d[3], time_s, err);
        *time_s = per_dev / (s->dev.peak_flops * s->dev.eff);
        return ERG_OK;
    }
    if (in->op == HLO_OP_PARAMETER || in->op == HLO_OP_CONSTANT)
        return ERG_OK;
    double bytes =
        erg__hlo_shape_bytes(&in->shape) / erg__shard_tiles(s, &m->out[k], in->shape.rank);
    *time_s = 2.0 * bytes / s->dev.mem_bw;
    return ERG_OK;
}

/* Block pair (a, b) -> edge index: an open-addressing table, so that its size follows the
 * edges (a dense norder x norder map was 1.6 GB at 20,000 blocks). */
typedef struct edge_map {
    uint64_t *keys; /* a * norder + b + 1; 0 = empty */
    int *vals;
    size_t cap, n;
} edge_map;

static uint64_t edge_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static int *edge_map_slot(edge_map *em, uint64_t key, bool *found)
{
    size_t i = (size_t)edge_hash(key) & (em->cap - 1);
    while (em->keys[i] && em->keys[i] != key)
        i = (i + 1) & (em->cap - 1);
    *found = em->keys[i] == key;
    return &em->vals[i];
}

static bool edge_map_grow(edge_map *em)
{
    size_t nc = em->cap ? em->cap * 2 : 64;
    edge_map ne = {erg__calloc(nc, sizeof(uint64_t)), erg__malloc(nc * sizeof(int)), nc, em->n};
    if (!ne.keys || !ne.vals) {
        erg__free(ne.keys);
        erg__free(ne.vals);
        return false;
    }
    for (size_t i = 0; i < em->cap; i++) {
        if (!em->keys[i])
            continue;
        bool f;
        int *v = edge_map_slot(&ne, em->keys[i], &f);
        ne.keys[v - ne.vals] = em->keys[i];
        *v = em->vals[i];
    }
    erg__free(em->keys);
    erg__free(em->vals);
    *em = ne;
    return true;
}

static void edge_map_free(edge_map *em)
{
    erg__free(em->keys);
    erg__free(em->vals);
    memset(em, 0, sizeof *em);
}

static pedge *edge_get(erg_shard *s, edge_map *emap, int a, int b, erg_error *err)
{
    uint64_t key = (uint64_t)a * (uint64_t)s->norder + (uint64_t)b + 1;
    if ((emap->n + 1) * 2 > emap->cap && !edge_map_grow(emap)) {
        erg_error_set(err, ERG_ENOMEM, "out of memory");
        return NULL;
    }
    bool found;
    int *slot = edge_map_slot(emap, key, &found);
    if (found)
        return &s->edges[*slot];
    if (!ERG__GROW(s->edges, s->capedges, (size_t)s->nedges + 1, 1)) {
        erg_error_set(err, ERG_ENOMEM, "out of memory");
        return NULL;
    }
    pedge *ne = &s->edges[s->nedges];
    int Ka = s->pbs[s->order[a]].K, Kb = s->pbs[s->order[b]].K;
    ne->a = a;
    ne->b = b;
    ne->cost_s = erg__calloc((size_t)(Ka * Kb), sizeof(double));
    ne->bytes = erg__calloc((size_t)(Ka * Kb), sizeof(double));
    if (!ne->cost_s || !ne->bytes) {
        erg__free(ne->cost_s);
        erg__free(ne->bytes);
        erg_error_set(err, ERG_ENOMEM, "out of memory");
        return NULL;
    }
    emap->keys[slot - emap->vals] = key;
    *slot = s->nedges++;
    emap->n++;
    return ne;
}

static void free_costs(erg_shard *s)
{
    for (int p = 0; p < s->npb; p++) {
        pblock *b = &s->pbs[p];
        erg__free(b->time_s);
        erg__free(b->comm_s);
        erg__free(b->intr_s);
        erg__free(b->comm_bytes);
        erg__free(b->mem_bytes);
        erg__free(b->flops);
        b->time_s = b->comm_s = b->intr_s = b->comm_bytes = b->mem_bytes = b->flops = NULL;
        for (int mi = 0; mi < b->nmem; mi++) {
            erg__free(b->mem[mi].cost_s);
            erg__free(b->mem[mi].mem_b);
            b->mem[mi].cost_s = b->mem[mi].mem_b = NULL;
        }
    }
    for (int e = 0; e < s->nedges; e++) {
        erg__free(s->edges[e].cost_s);
        erg__free(s->edges[e].bytes);
    }
    erg__free(s->edges);
    s->edges = NULL;
    s->nedges = 0;
    s->capedges = 0;
    for (int i = 0; i < s->nseg; i++)
        erg__shard_segment_free_costs(&s->segs[i]);
    erg__shard_dp_free(s);
    s->profiled = false;
}

static bool param_gte(const erg_shard *s, int v)
{
    const hlo_instr *in = &s->c->ins[v];
    return in->op == HLO_OP_GTE && in->nops == 1 && s->c->ins[in->ops[0]].op == HLO_OP_PARAMETER;
}

static long gte_index(const erg_shard *s, int v)
{
    int64_t ix[1];
    return erg__hlo_attr_ints(s->m, &s->c->ins[v], "index", ix, 1) == 1 ? (long)ix[0] : -1;
}

/* Bytes of an unowned parameter held replicated: a tuple parameter (loop state) counts only
 * the elements whose get-tuple-element no block owns (those count in their block). */
static double unowned_param_bytes(const erg_shard *s, int v)
{
    const hlo_shape *sh = &s->c->ins[v].shape;
    if (sh->kind != HLO_TUPLE)
        return erg__hlo_shape_bytes(sh);
    double b = 0;
    for (int e = 0; e < sh->nelems; e++) {
        bool owned = false;
        for (int u = 0; u < s->nodes[v].nusers && !owned; u++) {
            int w = s->nodes[v].users[u];
            owned = param_gte(s, w) && s->nodes[w].pb >= 0 && gte_index(s, w) == e;
        }
        if (!owned)
            b += erg__hlo_shape_bytes(&sh->elems[e]);
    }
    return b;
}

/* The instruction whose spec the body parameter's tuple element e takes: the ROOT tuple's
 * operand e (when the ROOT is a tuple of the parameter's arity), or -1. */
int erg__shard_loop_producer(const erg_shard *s, int e)
{
    if (!s->loop)
        return -1;
    const hlo_instr *r = &s->c->ins[s->c->root];
    if (r->op != HLO_OP_TUPLE || e < 0 || e >= r->nops)
        return -1;
    return r->ops[e];
}

static erg_status loop_carried_costs(erg_shard *s, edge_map *emap, erg_error *err)
{
    if (!s->loop)
        return ERG_OK;
    spec rep;
    memset(rep.d, (unsigned char)SP_R, sizeof rep.d);
    for (int g = 0; g < s->n; g++) {
        if (!param_gte(s, g))
            continue;
        int u = erg__shard_loop_producer(s, (int)gte_index(s, g));
        if (u < 0 || u == g)
            continue;
        const hlo_shape *sh = &s->c->ins[g].shape;
        int q = s->nodes[u].pb, p = s->nodes[g].pb;
        if (q < 0)
            continue; /* replicated -> anything: a local slice */
        pblock *Q = &s->pbs[q];
        const member *mu = &Q->mem[s->nodes[u].slot];
        if (p < 0 || p == q) {
            for (int k = 0; k < Q->K; k++) {
                double bytes;
                const spec *dst = p < 0 ? &rep : &s->pbs[p].mem[s->nodes[g].slot].out[k];
                double c = erg__shard_reshard(s, sh, &mu->out[k], dst, &bytes);
                Q->time_s[k] += c;
                Q->comm_s[k] += c;
                Q->comm_bytes[k] += bytes;
            }
            continue;
        }
        pblock *P = &s->pbs[p];
        const member *mg = &P->mem[s->nodes[g].slot];
        pedge *E = edge_get(s, emap, s->pos_of[q], s->pos_of[p], err);
        if (!E)
            return ERG_ENOMEM;
        for (int kq = 0; kq < Q->K; kq++)
            for (int kp = 0; kp < P->K; kp++) {
                double bytes;
                double c = erg__shard_reshard(s, sh, &mu->out[kq], &mg->out[kp], &bytes);
                E->cost_s[kq * P->K + kp] += c;
                E->bytes[kq * P->K + kp] += bytes;
            }
    }
    return ERG_OK;
}

void erg_shard_cost_options_init(erg_shard_cost_options *o)
{
    memset(o, 0, sizeof *o);
    o->compute = ERG_SHARD_COMPUTE_MODEL;
    o->optimizer_factor = 4;
    o->keep = 64;
}

erg_status erg_shard_profile(erg_shard *s, const erg_shard_cost_options *o,
                             erg_progress_fn progress, void *user, erg_error *err)
{
    if (!s || !o)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_profile: NULL argument");
    double t0 = erg__shard_now_s();
    free_costs(s);
    erg_status st = erg__shard_load_devices(o->devices_path, o->device, &s->dev, err);
    if (st)
        return st;
    s->opt_factor = o->optimizer_factor > 0 ? o->optimizer_factor : 4;
    s->mem_budget = o->mem_budget_bytes > 0 ? o->mem_budget_bytes : s->dev.mem_bytes;
    int keep = o->keep > 0 ? o->keep : 64;
    timer_ctx T = {0};
    T.mode = o->compute;
    shard_imported *imp = NULL;
    int nimp = 0;
    edge_map emap = {0};
    size_t *kv = NULL;
    if (o->compute == ERG_SHARD_COMPUTE_CUBLAS && (st = erg__shard_cublas_open(&T, err)))
        goto done;
    if (o->compute != ERG_SHARD_COMPUTE_MODEL && o->cache_path &&
        (st = erg__shard_gemm_cache_load(&T, o->cache_path, err)))
        goto done;
    if (o->profiles_path && (st = erg__shard_load_profiles(s, o->profiles_path, &imp, &nimp, err)))
        goto done;
    snprintf(s->cost_source, sizeof s->cost_source, "%s, %s compute%s", s->dev.name,
             o->compute == ERG_SHARD_COMPUTE_MODEL  ? "roofline"
             : o->compute == ERG_SHARD_COMPUTE_BLAS ? "CPU BLAS measured"
                                                    : "cuBLAS measured",
             o->profiles_path ? ", imported profiles" : "");
    /* Blocks. */
    s->const_time_s = s->const_mem_bytes = s->const_flops = 0;
    uint64_t total = (uint64_t)s->norder, done_n = 0;
    for (int oi = 0; oi < s->norder; oi++) {
        pblock *p = &s->pbs[s->order[oi]];
        int K = p->K;
        p->time_s = erg__calloc((size_t)K, sizeof(double));
        p->comm_s = erg__calloc((size_t)K, sizeof(double));
        p->intr_s = erg__calloc((size_t)K, sizeof(double));
        p->comm_bytes = erg__calloc((size_t)K, sizeof(double));
        p->mem_bytes = erg__calloc((size_t)K, sizeof(double));
        p->flops = erg__calloc((size_t)K, sizeof(double));
        if (!p->time_s || !p->comm_s || !p->intr_s || !p->comm_bytes || !p->mem_bytes ||
            !p->flops) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto done;
        }
        for (int mi = 0; mi < p->nmem; mi++) {
            member *m = &p->mem[mi];
            const hlo_instr *in = &s->c->ins[m->ins];
            const node *nd = &s->nodes[m->ins];
            m->cost_s = erg__calloc((size_t)K, sizeof(double));
            m->mem_b = erg__calloc((size_t)K, sizeof(double));
            if (!m->cost_s || !m->mem_b) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto done;
            }
            for (int k = 0; k < K; k++) {
                double ct, fl, mb = 0;
                if ((st = member_compute(s, &T, m, K, k, &ct, &fl, err)))
                    goto done;
                p->time_s[k] += ct;
                m->cost_s[k] += ct;
                p->flops[k] += fl;
                int tiles = erg__shard_tiles(s, &m->out[k], in->shape.rank);
                if (in->op == HLO_OP_PARAMETER || param_gte(s, m->ins))
                    mb =
                        erg__hlo_shape_bytes(&in->shape) / tiles * (nd->weight ? s->opt_factor : 1);
                else if ((in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION) &&
                         (nd->is_anchor || !strcmp(m->role, "dot")))
                    mb = erg__hlo_shape_bytes(&in->shape) / tiles;
                p->mem_bytes[k] += mb;
                m->mem_b[k] = mb;
            }
            for (int c = 0; c < m->ncolls; c++) {
                double ct =
                    erg__shard_coll_time(s, m->colls[c].kind, m->colls[c].axis, m->colls[c].bytes);
                int n = axis_n(s, m->colls[c].axis);
                m->cost_s[m->coll_k[c]] += ct;
                p->intr_s[m->coll_k[c]] += ct;
                p->time_s[m->coll_k[c]] += ct;
                p->comm_s[m->coll_k[c]] += ct;
                p->comm_bytes[m->coll_k[c]] += coll_factor(m->colls[c].kind, n) * m->colls[c].bytes;
            }
        }
        if (progress && progress(user, ++done_n, total)) {
            st = erg_error_set(err, ERG_ECANCELED, "canceled");
            goto done;
        }
    }
    /* Edges: every operand edge whose ends disagree. */
    for (int v = 0; v < s->n; v++) {
        const hlo_instr *in = &s->c->ins[v];
        const node *nv = &s->nodes[v];
        if (nv->pb < 0) {
            /* Unowned: replicated compute, and owned operands must be gathered. */
            if (!nv->sink) {
                spec r;
                memset(r.d, (unsigned char)SP_R, sizeof r.d);
                member fake = {.ins = v, .out = &r, .req = NULL};
                double ct = 0, fl = 0;
                bool contr = in->op == HLO_OP_DOT || in->op == HLO_OP_CONVOLUTION;
                if (!contr && (st = member_compute(s, NULL, &fake, 1, 0, &ct, &fl, err)))
                    goto done;
                if (contr) {
                    fl = in->nops == 2 ? dot_flops(s, in) : 0;
                    ct = fl / (s->dev.peak_flops * s->dev.eff);
                }
                s->const_time_s += ct;
                s->const_flops += fl;
                if (in->op == HLO_OP_PARAMETER)
                    s->const_mem_bytes += unowned_param_bytes(s, v);
                for (int j = 0; j < in->nops; j++) {
                    int u = in->ops[j];
                    int q = s->nodes[u].pb;
                    if (q < 0)
                        continue;
                    pblock *Q = &s->pbs[q];
                    for (int k = 0; k < Q->K; k++) {
                        double bytes;
                        double c = erg__shard_reshard(s, &s->c->ins[u].shape,
                                                      &Q->mem[s->nodes[u].slot].out[k], &r, &bytes);
                        Q->mem[s->nodes[u].slot].cost_s[k] += c;
                        Q->time_s[k] += c;
                        Q->comm_s[k] += c;
                        Q->comm_bytes[k] += bytes;
                    }
                }
            }
            continue;
        }
        pblock *P = &s->pbs[nv->pb];
        const member *mv = &P->mem[nv->slot];
        for (int j = 0; j < in->nops; j++) {
            int u = in->ops[j];
            int q = s->nodes[u].pb;
            if (q < 0)
                continue; /* replicated -> anything is a local slice */
            const hlo_shape *sh = &s->c->ins[u].shape;
            const member *mu = &s->pbs[q].mem[s->nodes[u].slot];
            if (q == nv->pb) {
                for (int k = 0; k < P->K; k++) {
                    double bytes;
                    double c =
                        erg__shard_reshard(s, sh, &mu->out[k], &mv->req[j * P->K + k], &bytes);
                    P->time_s[k] += c;
                    P->comm_s[k] += c;
                    P->comm_bytes[k] += bytes;
                }
                continue;
            }
            pblock *Q = &s->pbs[q];
            pedge *E = edge_get(s, &emap, s->pos_of[q], s->pos_of[nv->pb], err);
            if (!E) {
                st = ERG_ENOMEM;
                goto done;
            }
            for (int kq = 0; kq < Q->K; kq++)
                for (int kp = 0; kp < P->K; kp++) {
                    double bytes;
                    double c =
                        erg__shard_reshard(s, sh, &mu->out[kq], &mv->req[j * P->K + kp], &bytes);
                    E->cost_s[kq * P->K + kp] += c;
                    E->bytes[kq * P->K + kp] += bytes;
                }
        }
    }
    /* Loop-carried state of a while body: element e leaves as the ROOT tuple's operand e and
     * comes back as get-tuple-element(param, e); the plan writes the parameter's element e
     * with the producer's spec (so that ROOT and parameter agree), and the consumer reshards
     * from it once per iteration. */
    if ((st = loop_carried_costs(s, &emap, err)))
        goto done;
    /* All-reduce reassociation across blocks (analyze.c): sibling dots in two blocks whose
     * partial sums are added pay one all-reduce, not two, when both need one. */
    for (int r = 0; r < s->nrpairs; r++) {
        const rpair *R = &s->rpairs[r];
        int q = s->nodes[R->a].pb, p = s->nodes[R->b].pb;
        if (q < 0 || p < 0 || q == p || s->pos_of[q] < 0 || s->pos_of[p] < 0)
            continue;
        int Kq = s->pbs[q].K, Kp = s->pbs[p].K;
        pedge *E = edge_get(s, &emap, s->pos_of[q], s->pos_of[p], err);
        if (!E) {
            st = ERG_ENOMEM;
            goto done;
        }
        for (int kq = 0; kq < Kq; kq++)
            for (int kp = 0; kp < Kp; kp++) {
                int ax = R->axa[kq];
                if (ax < 0 || ax != R->axb[kp] || R->ba[kq] != R->bb[kp])
                    continue;
                E->cost_s[kq * Kp + kp] -= erg__shard_coll_time(s, COLL_AR, ax, R->ba[kq]);
                E->bytes[kq * Kp + kp] -= coll_factor(COLL_AR, axis_n(s, ax)) * R->ba[kq];
            }
    }
    /* A loop body runs `trips` times with one plan: scale times, volumes and FLOPs (memory
     * stays per iteration). */
    if (s->trips > 1) {
        double f = (double)s->trips;
        for (int oi = 0; oi < s->norder; oi++) {
            pblock *p = &s->pbs[s->order[oi]];
            for (int k = 0; k < p->K; k++) {
                p->time_s[k] *= f;
                p->comm_s[k] *= f;
                p->intr_s[k] *= f;
                p->comm_bytes[k] *= f;
                p->flops[k] *= f;
            }
            for (int mi = 0; mi < p->nmem; mi++)
                for (int k = 0; k < p->K; k++)
                    p->mem[mi].cost_s[k] *= f;
        }
        for (int e = 0; e < s->nedges; e++) {
            int Ka = s->pbs[s->order[s->edges[e].a]].K, Kb = s->pbs[s->order[s->edges[e].b]].K;
            for (int x = 0; x < Ka * Kb; x++) {
                s->edges[e].cost_s[x] *= f;
                s->edges[e].bytes[x] *= f;
            }
        }
        s->const_time_s *= f;
        s->const_flops *= f;
    }
    /* Segments: enumerate combinations, apply imported profiles, keep the best. */
    if (o->profiles_only) {
        /* every unique segment needs a row, or its modelled and measured times would mix */
        if (!o->profiles_path) {
            st = erg_error_set(err, ERG_EINVAL, "profiles_only needs a profiles file");
            goto done;
        }
        for (int si = 0; si < s->nseg; si++) {
            bool any = false;
            for (int x = 0; x < nimp && !any; x++)
                any = imp[x].seg == si;
            if (s->segs[si].unique == si && !any) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s: unique segment %d has no row; measured costs only "
                                   "(--profiles-only) need at least one per unique segment",
                                   o->profiles_path, si);
                goto done;
            }
        }
    }
    if ((st = erg__shard_segments_build(s, imp, nimp, keep, o->profiles_only, err)))
        goto done;
    if (o->compute != ERG_SHARD_COMPUTE_MODEL && o->cache_path &&
        (st = erg__shard_gemm_cache_save(&T, o->cache_path, err)))
        goto done;
    s->profiled = true;
    s->profile_s = erg__shard_now_s() - t0;
done:
    erg__free(T.tab);
    erg__shard_cublas_close(&T);
    erg__free(imp);
    edge_map_free(&emap);
    erg__free(kv);
    if (st)
        free_costs(s);
    return st;
}

void erg__shard_eval(const erg_shard *s, const size_t *k, double *time_s, double *mem_bytes,
                     double *flops)
{
    double t = s->const_time_s, m = s->const_mem_bytes, f = s->const_flops;
    for (int oi = 0; oi < s->norder; oi++) {
        const pblock *p = &s->pbs[s->order[oi]];
        t += p->time_s[k[oi]];
        m += p->mem_bytes[k[oi]];
        f += p->flops[k[oi]];
    }
    for (int e = 0; e < s->nedges; e++) {
        const pedge *E = &s->edges[e];
        int Kb = s->pbs[s->order[E->b]].K;
        t += E->cost_s[k[E->a] * (size_t)Kb + k[E->b]];
    }
    *time_s = t;
    *mem_bytes = m;
    if (flops)
        *flops = f;
}

erg_status erg_shard_evaluate(const erg_shard *s, const size_t *strategies, double *time_s,
                              double *memory_bytes, erg_error *err)
{
    if (!s || !strategies || !time_s || !memory_bytes)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_evaluate: NULL argument");
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "erg_shard_evaluate: run erg_shard_profile first");
    for (int i = 0; i < s->norder; i++)
        if (strategies[i] >= (size_t)s->pbs[s->order[i]].K)
            return erg_error_set(err, ERG_EINVAL, "block %d has no strategy %zu", i, strategies[i]);
    erg__shard_eval(s, strategies, time_s, memory_bytes, NULL);
    return ERG_OK;
}

/* The communication the cost model charges for strategy vector k (per position in order[]),
 * by collective kind: each block member's own collectives, the resharding inside blocks and
 * on the edges between them (with the all-reduces reassociation saves), the gathers for
 * replicated consumers and the loop-carried resharding; times trips. Its total bytes equal
 * the sum of the blocks' comm_bytes and the edges' bytes that the search adds up. */
void erg__shard_plan_comm(const erg_shard *s, const size_t *k, shard_comm *out)
{
    memset(out, 0, sizeof *out);
    spec rep;
    memset(rep.d, (unsigned char)SP_R, sizeof rep.d);
    double b;
#define KOF(pb) k[s->pos_of[pb]]
    for (int oi = 0; oi < s->norder; oi++) {
        const pblock *p = &s->pbs[s->order[oi]];
        for (int mi = 0; mi < p->nmem; mi++) {
            const member *m = &p->mem[mi];
            for (int c = 0; c < m->ncolls; c++) {
                int n = axis_n(s, m->colls[c].axis);
                if ((size_t)m->coll_k[c] != k[oi] || n <= 1 || m->colls[c].bytes <= 0)
                    continue;
                out->count[m->colls[c].kind] += 1;
                out->bytes[m->colls[c].kind] +=
                    coll_factor(m->colls[c].kind, n) * m->colls[c].bytes;
            }
        }
    }
    for (int v = 0; v < s->n; v++) {
        const hlo_instr *in = &s->c->ins[v];
        const node *nv = &s->nodes[v];
        if (nv->pb < 0 && nv->sink)
            continue;
        for (int j = 0; j < in->nops; j++) {
            int u = in->ops[j], q = s->nodes[u].pb;
            if (q < 0 || s->pos_of[q] < 0)
                continue;
            const spec *src = &s->pbs[q].mem[s->nodes[u].slot].out[KOF(q)];
            const spec *dst = &rep;
            if (nv->pb >= 0) {
                const pblock *P = &s->pbs[nv->pb];
                dst = &P->mem[nv->slot].req[j * P->K + KOF(nv->pb)];
            }
            reshard_kinds(s, &s->c->ins[u].shape, src, dst, &b, out->count, out->bytes);
        }
    }
    for (int g = 0; s->loop && g < s->n; g++) {
        int u = param_gte(s, g) ? erg__shard_loop_producer(s, (int)gte_index(s, g)) : -1;
        if (u < 0 || u == g || s->nodes[u].pb < 0)
            continue;
        int q = s->nodes[u].pb, p = s->nodes[g].pb;
        const spec *dst = p < 0 ? &rep : &s->pbs[p].mem[s->nodes[g].slot].out[KOF(p)];
        reshard_kinds(s, &s->c->ins[g].shape, &s->pbs[q].mem[s->nodes[u].slot].out[KOF(q)], dst, &b,
                      out->count, out->bytes);
    }
    for (int r = 0; r < s->nrpairs; r++) {
        const rpair *R = &s->rpairs[r];
        int q = s->nodes[R->a].pb, p = s->nodes[R->b].pb;
        if (q < 0 || p < 0 || q == p || s->pos_of[q] < 0 || s->pos_of[p] < 0)
            continue;
        int ax = R->axa[KOF(q)];
        if (ax < 0 || ax != R->axb[KOF(p)] || R->ba[KOF(q)] != R->bb[KOF(p)])
            continue;
        out->count[COLL_AR] -= 1;
        out->bytes[COLL_AR] -= coll_factor(COLL_AR, axis_n(s, ax)) * R->ba[KOF(q)];
    }
#undef KOF
    for (int c = 0; c < 3; c++) {
        out->count[c] *= (double)s->trips;
        out->bytes[c] *= (double)s->trips;
    }
}

static void fmt_combo(const erg_shard *s, const segment *g, long c, char *buf, size_t size)
{
    size_t k[64];
    long cc = c;
    int n = ERG__MIN(g->n, 64);
    for (int i = n - 1; i >= 0; i--) {
        int K = s->pbs[s->order[g->first + i]].K;
        k[i] = (size_t)(cc % K);
        cc /= K;
    }
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at + 8 < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%zu", i ? "-" : "", k[i]);
}

erg_status erg_shard_profile_report(const erg_shard *s, size_t max_rows, char **text,
                                    erg_error *err)
{
    if (!s || !text)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_profile_report: NULL argument");
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "run erg_shard_profile first");
    erg__buf b = {0};
    erg_status st = ERG_OK;
    size_t *kv = erg__calloc((size_t)s->norder, sizeof(size_t));
    if (!kv)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
#define P(...)                                                                                     \
    do {                                                                                           \
        if ((st = erg__buf_printf(&b, __VA_ARGS__)))                                               \
            goto fail;                                                                             \
    } while (0)
    P("costs: %s; mesh %dx%d; memory budget %.3f GB per device; profiling %.3f s (DP tables "
      "%.6f s)\n",
      s->cost_source, s->mesh[0], s->mesh[1], s->mem_budget / 1e9, s->profile_s, s->dp_prepare_s);
    P("replicated remainder: %.6f ms, %.3f MB per device\n", s->const_time_s * 1e3,
      s->const_mem_bytes / 1e6);
    for (int si = 0; si < s->nseg; si++) {
        const segment *g = &s->segs[si];
        if (g->unique != si)
            continue;
        P("\nunique segment %d: blocks (%d, %d), %ld combinations, %d kept%s\n", si, g->first,
          g->first + g->n, g->ncombo, g->nkeep, g->imported ? " (imported times)" : "");
        P("  %-24s %12s %12s %12s %12s %14s %12s\n", "strategies", "time_ms", "compute_ms",
          "intrinsic_ms", "reshard_ms", "comm_MB", "memory_MB");
        for (int y = 0; y < g->nkeep && (size_t)y < max_rows; y++) {
            char cb[200];
            fmt_combo(s, g, g->keep[y], cb, sizeof cb);
            erg__shard_seg_decode(s, g, g->keep[y], kv);
            double t, m, cs, cby, is;
            erg__shard_seg_cost(s, g, NULL, -1, kv, &t, &m, &cs, &cby, &is);
            P("  %-24s %12.4f %12.4f %12.4f %12.4f %14.3f %12.3f\n", cb, g->keep_time[y] * 1e3,
              (t - cs) * 1e3, is * 1e3, (cs - is) * 1e3, cby / 1e6, g->keep_mem[y] / 1e6);
        }
    }
#undef P
    erg__free(kv);
    *text = b.data;
    return ERG_OK;
fail:
    erg__free(kv);
    erg__buf_free(&b);
    return erg_error_set(err, st, "out of memory");
}

erg_status erg_shard_profile_csv(const erg_shard *s, char **text, erg_error *err)
{
    if (!s || !text)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_profile_csv: NULL argument");
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "run erg_shard_profile first");
    erg__buf b = {0};
    size_t *kv = erg__calloc((size_t)s->norder + 1, sizeof(size_t));
    erg_status st =
        kv ? erg__buf_printf(&b, "segment,strategies,time_s,memory_bytes\n") : ERG_ENOMEM;
    for (int si = 0; si < s->nseg && !st; si++) {
        const segment *g = &s->segs[si];
        if (g->unique != si)
            continue;
        for (int y = 0; y < g->nkeep && !st; y++) {
            erg__shard_seg_decode(s, g, g->keep[y], kv);
            st = erg__buf_printf(&b, "%d,", si);
            for (int i = 0; i < g->n && !st; i++)
                st = erg__buf_printf(&b, "%s%zu", i ? "-" : "", kv[g->first + i]);
            if (!st)
                st = erg__buf_printf(&b, ",%.17g,%.17g\n", g->keep_time[y] / (double)s->trips,
                                     g->keep_mem[y]);
        }
    }
    erg__free(kv);
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, st, "out of memory");
    }
    *text = b.data;
    return ERG_OK;
}

erg_status erg_shard_comm_report(const erg_shard *s, size_t max_rows, char **text, erg_error *err)
{
    if (!s || !text)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_comm_report: NULL argument");
    if (!s->profiled)
        return erg_error_set(err, ERG_ESTATE, "run erg_shard_profile first");
    /* The first segment that repeats, else the largest-cost first segment. */
    int pick = 0;
    for (int si = 0; si < s->nseg; si++)
        if (s->segs[si].unique != si) {
            pick = s->segs[si].unique;
            break;
        }
    const segment *g = &s->segs[pick];
    long nc = g->ncombo;
    int reps = 0;
    for (int si = 0; si < s->nseg; si++)
        reps += s->segs[si].unique == pick;
    shard_ci *rows = erg__malloc((size_t)nc * sizeof(shard_ci));
    double *bytes = erg__malloc((size_t)nc * sizeof(double));
    size_t *kv = erg__calloc((size_t)s->norder, sizeof(size_t));
    int *rel = NULL;
    int nrel = erg__shard_seg_edges(s, g, &rel);
    erg__buf b = {0};
    erg_status st = ERG_OK;
    if (!rows || !bytes || !kv || nrel < 0) {
        st = ERG_ENOMEM;
        goto fail;
    }
    for (long c = 0; c < nc; c++) {
        erg__shard_seg_decode(s, g, c, kv);
        double t, m, cs, cb;
        erg__shard_seg_cost(s, g, rel, nrel, kv, &t, &m, &cs, &cb, NULL);
        rows[c] = (shard_ci){c, cs};
        bytes[c] = cb;
    }
    qsort(rows, (size_t)nc, sizeof *rows, erg__shard_cmp_ci);
#define P(...)                                                                                     \
    do {                                                                                           \
        if ((st = erg__buf_printf(&b, __VA_ARGS__)))                                               \
            goto fail;                                                                             \
    } while (0)
    P("communication per combination of segment %d (blocks %d..%d, occurs %d time%s), mesh "
      "%dx%d, %s\n",
      pick, g->first, g->first + g->n - 1, reps, reps == 1 ? "" : "s", s->mesh[0], s->mesh[1],
      s->dev.name);
    P("anchors:");
    for (int i = 0; i < g->n; i++)
        P(" %s", s->c->ins[s->pbs[s->order[g->first + i]].anchor].name);
    P("\n%-6s %-24s %14s %12s\n", "rank", "strategies", "comm_MB", "comm_ms");
    for (long x = 0; x < nc && (size_t)x < max_rows; x++) {
        char cb[200];
        fmt_combo(s, g, rows[x].c, cb, sizeof cb);
        P("%-6ld %-24s %14.3f %12.4f\n", x + 1, cb, bytes[rows[x].c] / 1e6, rows[x].v * 1e3);
    }
    if ((size_t)nc > max_rows)
        P("... %ld more combinations\n", nc - (long)max_rows);
#undef P
    erg__free(rows);
    erg__free(bytes);
    erg__free(kv);
    erg__free(rel);
    *text = b.data;
    return ERG_OK;
fail:
    erg__free(rows);
    erg__free(bytes);
    erg__free(kv);
    erg__free(rel);
    erg__buf_free(&b);
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

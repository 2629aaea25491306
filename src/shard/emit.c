/* emit.c: a plan as text, as JSON, and as the input module annotated with sharding={...}
 * (docs/shard.md). */
#include "shard/shard_internal.h"

#include <jansson.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Sharding strings use XLA's explicit device-list form on the mesh (m0, m1) with device
 * id d(i, j) = i*m1 + j. Tile dims t[k] are the sizes of the mesh axes dim k is split over;
 * when they cover fewer devices than the mesh, a trailing dim holds the replicas and
 * last_tile_dim_replicate is added. Device ids are listed in row-major order of the tile
 * index; the replicated mesh axes run along the trailing dim.
 */
static erg_status sharding_str(const erg_shard *s, const hlo_shape *sh, const spec *sp, erg__buf *b)
{
    int m0 = s->mesh[0], m1 = s->mesh[1], D = m0 * m1;
    if (sh->kind != HLO_ARRAY || sh->rank == 0 || erg__shard_tiles(s, sp, sh->rank) == 1)
        return erg__buf_printf(b, "{replicated}");
    int rank = sh->rank, t[HLO_MAX_RANK + 1];
    int P = 1;
    bool used[2] = {false, false};
    for (int k = 0; k < rank; k++) {
        int8_t c = sp->d[k];
        t[k] = c == SP_R ? 1 : c == SP_BOTH ? D : (c == 0 ? m0 : m1);
        if (c == 0 || c == SP_BOTH)
            used[0] = true;
        if (c == 1 || c == SP_BOTH)
            used[1] = true;
        P *= t[k];
    }
    int nt = rank;
    if (P < D)
        t[nt++] = D / P;
    erg_status st = erg__buf_printf(b, "{devices=[");
    for (int k = 0; k < nt && !st; k++)
        st = erg__buf_printf(b, "%s%d", k ? "," : "", t[k]);
    if (!st)
        st = erg__buf_printf(b, "]");
    int idx[HLO_MAX_RANK + 1] = {0};
    for (int n = 0; n < D && !st; n++) {
        int i = 0, j = 0;
        for (int k = 0; k < rank; k++) {
            int8_t c = sp->d[k];
            if (c == 0)
                i = idx[k];
            else if (c == 1)
                j = idx[k];
            else if (c == SP_BOTH) {
                i = idx[k] / m1;
                j = idx[k] % m1;
            }
        }
        if (nt > rank) {
            int r = idx[rank];
            if (!used[0] && !used[1]) {
                i = r / m1;
                j = r % m1;
            } else if (!used[0]) {
                i = r;
            } else {
                j = r;
            }
        }
        st = erg__buf_printf(b, "%s%d", n ? "," : "", i * m1 + j);
        for (int k = nt - 1; k >= 0; k--) {
            if (++idx[k] < t[k])
                break;
            idx[k] = 0;
        }
    }
    if (!st)
        st = erg__buf_printf(b, "%s}", nt > rank ? " last_tile_dim_replicate" : "");
    return st;
}

/* Inverse of sharding_str for one array: recover the spec from `{replicated}` or
 * `{devices=[t...]ids [last_tile_dim_replicate]}` on this mesh. The axis of a tiled dim is
 * read from the device-id stride between its first two tiles (m1 for axis 0, 1 for axis 1);
 * a dim tiled over all devices is S01. Returns false for anything else. */
bool erg__shard_parse_sharding(const erg_shard *s, const char *text, size_t len, int rank,
                               spec *out)
{
    int m0 = s->mesh[0], m1 = s->mesh[1], D = m0 * m1;
    memset(out->d, (unsigned char)SP_R, sizeof out->d);
    char buf[4096];
    if (len >= sizeof buf)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (!strcmp(buf, "{replicated}"))
        return true;
    const char *p = buf;
    if (strncmp(p, "{devices=[", 10))
        return false;
    p += 10;
    int t[HLO_MAX_RANK + 1], nt = 0;
    for (;;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p || v < 1 || v > D || nt > rank)
            return false;
        t[nt++] = (int)v;
        p = e;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != ']')
            return false;
        p++;
        break;
    }
    int ids[4096], nid = 0;
    for (;;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p || v < 0 || v >= D || nid >= 4096)
            return false;
        ids[nid++] = (int)v;
        p = e;
        if (*p == ',') {
            p++;
            continue;
        }
        break;
    }
    bool rep = !strncmp(p, " last_tile_dim_replicate", 24);
    if (rep)
        p += 24;
    if (strcmp(p, "}") || nid != D || nt != rank + (rep ? 1 : 0))
        return false;
    int prod = 1;
    for (int k = 0; k < nt; k++)
        prod *= t[k];
    if (prod != D)
        return false;
    for (int k = 0; k < rank; k++) {
        if (t[k] == 1)
            continue;
        if (t[k] == D && D > 1 && m0 > 1 && m1 > 1) {
            out->d[k] = SP_BOTH;
            continue;
        }
        /* Row-major stride of dim k in the id list. */
        int stride = 1;
        for (int q = k + 1; q < nt; q++)
            stride *= t[q];
        int step = ids[stride] - ids[0];
        if (t[k] == m0 && step == m1 && m0 > 1)
            out->d[k] = 0;
        else if (t[k] == m1 && step == 1 && m1 > 1)
            out->d[k] = 1;
        else
            return false;
    }
    return true;
}

const spec *erg__shard_plan_spec(const erg_shard *s, const erg_shard_plan *p, int ins)
{
    const node *nd = &s->nodes[ins];
    if (nd->pb < 0 || s->pos_of[nd->pb] < 0)
        return NULL;
    return &s->pbs[nd->pb].mem[nd->slot].out[p->k[s->pos_of[nd->pb]]];
}

/* One replacement of the module text: [cut, resume) becomes ", sharding=" + txt (when the
 * instruction had none) or txt (replacing its old value). */
typedef struct edit {
    size_t cut, resume;
    bool add_key, applied;
    const hlo_instr *in;
    char *txt;
} edit;

static int cmp_edit(const void *a, const void *b)
{
    const edit *x = a, *y = b;
    return x->cut < y->cut ? -1 : x->cut > y->cut;
}

static erg_status push_edit(edit **ed, int *n, size_t *cap, const hlo_instr *in, char *txt)
{
    if (!ERG__GROW(*ed, *cap, *n + 1, 64)) {
        erg__free(txt);
        return ERG_ENOMEM;
    }
    const hlo_attr *old = erg__hlo_find_attr(in, "sharding");
    (*ed)[(*n)++] =
        (edit){old ? old->off : in->end, old ? old->off + old->len : in->end, !old, false, in, txt};
    return ERG_OK;
}

/* The sharding text of instruction i of the analysed computation (a tuple for tuple shapes:
 * tuple instructions per operand, the loop parameter per ROOT operand, fused attention per
 * element laid out like its output). */
static erg_status instr_sharding(const erg_shard *s, const erg_shard_plan *p, int i, erg__buf *b)
{
    const hlo_instr *in = &s->c->ins[i];
    const spec *sp = erg__shard_plan_spec(s, p, i);
    spec rep;
    memset(rep.d, (unsigned char)SP_R, sizeof rep.d);
    if (in->shape.kind != HLO_TUPLE)
        return sharding_str(s, &in->shape, sp ? sp : &rep, b);
    erg_status st = erg__buf_printf(b, "{");
    for (int e = 0; e < in->shape.nelems && !st; e++) {
        const spec *es = NULL;
        if (in->op == HLO_OP_TUPLE && e < in->nops)
            es = erg__shard_plan_spec(s, p, in->ops[e]);
        else if (in->op == HLO_OP_PARAMETER && s->loop) {
            /* Loop state: element e as the ROOT tuple produces it, so that the body's
             * parameter and ROOT shardings agree (XLA requires it). */
            int u = erg__shard_loop_producer(s, e);
            es = u >= 0 ? erg__shard_plan_spec(s, p, u) : NULL;
        } else if (in->op == HLO_OP_CUSTOM_CALL && sp && s->nodes[i].cc == CC_ATTENTION) {
            /* fused attention: the spec is element 0's; elements laid out alike (dQ, dK, dV)
             * share its batch and head splits, others are replicated */
            const hlo_shape *e0 = &in->shape.elems[0], *ee = &in->shape.elems[e];
            int h = s->nodes[i].attn_head;
            if (ee->kind == HLO_ARRAY && ee->rank == e0->rank && ee->rank > 0 &&
                ee->dims[0] == e0->dims[0] && (h < 0 || ee->dims[h] == e0->dims[h]))
                es = sp;
        }
        if (!(st = erg__buf_printf(b, "%s", e ? ", " : "")))
            st = sharding_str(s, &in->shape.elems[e], es ? es : &rep, b);
    }
    return st ? st : erg__buf_printf(b, "}");
}

/* Loop body plans: the caller's while, its init tuple, the parameters that feed that tuple
 * and the condition's parameter get the body parameter's shardings, so that the loop's
 * shardings agree everywhere. */
static erg_status loop_edits(const erg_shard *s, const erg_shard_plan *p, edit **ed, int *n,
                             size_t *cap)
{
    const erg_hlo_module *m = s->m;
    int bi = (int)(s->c - m->comps);
    int pi = -1;
    for (int i = 0; i < s->n && pi < 0; i++)
        if (s->c->ins[i].op == HLO_OP_PARAMETER && s->c->ins[i].param_num == 0 &&
            s->c->ins[i].shape.kind == HLO_TUPLE)
            pi = i;
    if (pi < 0)
        return ERG_OK;
    const hlo_shape *ts = &s->c->ins[pi].shape;
    spec rep;
    memset(rep.d, (unsigned char)SP_R, sizeof rep.d);
    erg_status st = ERG_OK;
    for (int ci = 0; ci < m->ncomps && !st; ci++) {
        if (ci == bi)
            continue;
        const hlo_comp *C = &m->comps[ci];
        for (int w = 0; w < C->n && !st; w++) {
            const hlo_instr *W = &C->ins[w];
            if (W->op != HLO_OP_WHILE || W->nops != 1)
                continue;
            char *body = erg__hlo_attr_str(m, W, "body");
            bool mine = body && erg__hlo_find_comp(m, body) == bi;
            erg__free(body);
            if (!mine || W->shape.kind != HLO_TUPLE || W->shape.nelems != ts->nelems)
                continue;
            erg__buf tb = {0};
            if ((st = instr_sharding(s, p, pi, &tb)))
                break;
            char *t1 = erg__strdup(tb.data), *t2 = erg__strdup(tb.data);
            if (!t1 || !t2 || (st = push_edit(ed, n, cap, W, t1))) {
                erg__free(t1);
                erg__free(t2);
                erg__buf_free(&tb);
                return ERG_ENOMEM;
            }
            const hlo_instr *T = &C->ins[W->ops[0]];
            if (T->op == HLO_OP_TUPLE && T->shape.kind == HLO_TUPLE && T->nops == ts->nelems) {
                if ((st = push_edit(ed, n, cap, T, t2))) {
                    erg__buf_free(&tb);
                    return st;
                }
                t2 = NULL;
                for (int e = 0; e < T->nops && !st; e++) {
                    const hlo_instr *X = &C->ins[T->ops[e]];
                    if (X->op != HLO_OP_PARAMETER || X->shape.kind != HLO_ARRAY)
                        continue;
                    int u = erg__shard_loop_producer(s, e);
                    const spec *es = u >= 0 ? erg__shard_plan_spec(s, p, u) : NULL;
                    erg__buf xb = {0};
                    if (!(st = sharding_str(s, &X->shape, es ? es : &rep, &xb)))
                        st = push_edit(ed, n, cap, X, xb.data);
                    else
                        erg__buf_free(&xb);
                }
            }
            erg__free(t2);
            /* the condition's parameter */
            char *cond = erg__hlo_attr_str(m, W, "condition");
            int cc = cond ? erg__hlo_find_comp(m, cond) : -1;
            erg__free(cond);
            for (int j = 0; cc >= 0 && cc != bi && j < m->comps[cc].n && !st; j++) {
                const hlo_instr *P0 = &m->comps[cc].ins[j];
                if (P0->op == HLO_OP_PARAMETER && P0->param_num == 0 &&
                    P0->shape.kind == HLO_TUPLE && P0->shape.nelems == ts->nelems) {
                    char *t3 = erg__strdup(tb.data);
                    st = t3 ? push_edit(ed, n, cap, P0, t3) : ERG_ENOMEM;
                }
            }
            erg__buf_free(&tb);
        }
    }
    return st;
}

/* Parse the annotated text and compare it with the input module: same computations,
 * instructions and attributes apart from sharding, num_partitions on the header, and every
 * edited instruction carrying exactly the sharding written for it. EINTERNAL otherwise. */
static erg_status reread(const erg_shard *s, const edit *ed, int ned, const char *text, size_t len,
                         erg_error *err)
{
    const erg_hlo_module *m = s->m;
    erg_hlo_module *m2 = NULL;
    erg_error e2;
    char why[400];
    erg_status st = erg_hlo_parse(text, len, "annotated module", &m2, &e2);
    if (st == ERG_ENOMEM)
        return erg_error_set(err, st, "out of memory");
    if (st)
        return erg_error_set(err, ERG_EINTERNAL,
                             "%s: the annotated module does not re-read (a bug in ergon; please "
                             "report it with this module): %s",
                             m->filename, e2.msg);
    bool ok = erg__hlo_module_same(m, m2, "sharding", why, sizeof why);
    long want_np = m->has_num_partitions ? m->num_partitions : (long)s->mesh[0] * s->mesh[1];
    if (ok && m2->num_partitions != want_np) {
        snprintf(why, sizeof why, "num_partitions reads back as %ld, not %ld", m2->num_partitions,
                 want_np);
        ok = false;
    }
    for (int k = 0; ok && k < ned; k++) {
        if (!ed[k].applied)
            continue;
        int ci = 0;
        while (ci < m->ncomps &&
               !(ed[k].in >= m->comps[ci].ins && ed[k].in < m->comps[ci].ins + m->comps[ci].n))
            ci++;
        if (ci == m->ncomps)
            continue;
        const hlo_instr *y = &m2->comps[ci].ins[ed[k].in - m->comps[ci].ins];
        const hlo_attr *a = erg__hlo_find_attr(y, "sharding");
        if (!a || a->len != strlen(ed[k].txt) || memcmp(m2->text + a->off, ed[k].txt, a->len)) {
            snprintf(why, sizeof why, "the sharding of '%s' does not read back as %.200s", y->name,
                     ed[k].txt);
            ok = false;
        }
    }
    erg_hlo_free(m2);
    if (!ok)
        return erg_error_set(err, ERG_EINTERNAL,
                             "%s: the annotated module re-reads as a different module (a bug in "
                             "ergon; please report it with this module): %s",
                             m->filename, why);
    return ERG_OK;
}

erg_status erg_shard_annotate(const erg_shard *s, const erg_shard_plan *p, char **text,
                              erg_error *err)
{
    if (!s || !p || !text)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_annotate: NULL argument");
    const erg_hlo_module *m = s->m;
    erg__buf b = {0};
    erg_status st = ERG_OK;
    edit *ed = NULL;
    int ned = 0;
    size_t caped = 0;
    /* Edits: every block member, every parameter and the ROOT of the analysed computation;
     * for a loop body also the caller's loop (loop_edits). Applied in text order. */
    for (int i = 0; i < s->n && !st; i++) {
        const hlo_instr *in = &s->c->ins[i];
        if (!erg__shard_plan_spec(s, p, i) && in->op != HLO_OP_PARAMETER && i != s->c->root)
            continue;
        erg__buf tb = {0};
        if ((st = instr_sharding(s, p, i, &tb))) {
            erg__buf_free(&tb);
            break;
        }
        st = push_edit(&ed, &ned, &caped, in, tb.data);
    }
    if (!st && s->loop)
        st = loop_edits(s, p, &ed, &ned, &caped);
    if (st)
        goto fail;
    qsort(ed, (size_t)ned, sizeof *ed, cmp_edit);
    /* Header: add num_partitions. */
    if ((st = erg__buf_append(&b, m->text, m->header_end)))
        goto fail;
    if (!m->has_num_partitions &&
        (st = erg__buf_printf(&b, ", num_partitions=%d", s->mesh[0] * s->mesh[1])))
        goto fail;
    size_t at = m->header_end;
    /* A header that runs straight into the first computation ("HloModule m%comp (...)"):
     * keep them apart, or the new value would swallow the computation's name. (A comment
     * right after the header ends the value by itself.) */
    if (!m->has_num_partitions && at < m->len && !isspace((unsigned char)m->text[at]) &&
        !(m->text[at] == '/' && at + 1 < m->len &&
          (m->text[at + 1] == '/' || m->text[at + 1] == '*')) &&
        (st = erg__buf_append(&b, " ", 1)))
        goto fail;
    for (int k = 0; k < ned; k++) {
        if (ed[k].cut < at)
            continue; /* the same instruction twice (a parameter feeding two loops) */
        if ((st = erg__buf_append(&b, m->text + at, ed[k].cut - at)) ||
            (ed[k].add_key && (st = erg__buf_printf(&b, ", sharding="))) ||
            (st = erg__buf_printf(&b, "%s", ed[k].txt)))
            goto fail;
        ed[k].applied = true;
        at = ed[k].resume;
        /* An instruction that the next one follows on the same line with nothing between
         * ("add(%d, %d)r = ..."): keep them apart, or the new attribute value would run
         * into the next name ("sharding={...}r") and the output would not re-parse. */
        if (at < m->len &&
            (isalnum((unsigned char)m->text[at]) || m->text[at] == '_' || m->text[at] == '%') &&
            (st = erg__buf_append(&b, " ", 1)))
            goto fail;
    }
    if ((st = erg__buf_append(&b, m->text + at, m->len - at)))
        goto fail;
    /* What it writes it can read back: the text is parsed again and must be the input module
     * with the plan's shardings (a check on every call, not only in the fuzz harness). */
    st = reread(s, ed, ned, b.data ? b.data : "", b.len, err);
    for (int k = 0; k < ned; k++)
        erg__free(ed[k].txt);
    erg__free(ed);
    if (st) {
        erg__buf_free(&b);
        return st;
    }
    *text = b.data;
    return ERG_OK;
fail:
    for (int k = 0; k < ned; k++)
        erg__free(ed[k].txt);
    erg__free(ed);
    erg__buf_free(&b);
    return erg_error_set(err, st, "out of memory");
}

erg_status erg_shard_plan_describe(const erg_shard *s, const erg_shard_plan *p, char **text,
                                   erg_error *err)
{
    if (!s || !p || !text)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_plan_describe: NULL argument");
    erg__buf b = {0};
    erg_status st = ERG_OK;
#define P(...)                                                                                     \
    do {                                                                                           \
        if ((st = erg__buf_printf(&b, __VA_ARGS__)))                                               \
            goto fail;                                                                             \
    } while (0)
    P("method %s, mesh %dx%d, %s\n",
      p->method == ERG_SHARD_DP    ? "dp (CFP)"
      : p->method == ERG_SHARD_ILP ? "ilp (Alpa, GLPK)"
                                   : "given (strategies not searched)",
      s->mesh[0], s->mesh[1], s->cost_source);
    if (s->mesh_req[0] != s->mesh[0] || s->mesh_req[1] != s->mesh[1])
        P("(mesh %dx%d viewed as %dx%d: no dim divides by %d)\n", s->mesh_req[0], s->mesh_req[1],
          s->mesh[0], s->mesh[1], s->mesh_req[0] * s->mesh_req[1]);
    P("solution vector:");
    for (int si = 0; si < s->nseg; si++) {
        const segment *g = &s->segs[si];
        P(" [");
        for (int i = 0; i < g->n; i++)
            P("%s%zu", i ? "," : "", p->k[g->first + i]);
        P("]");
    }
    P("\niteration time %.6f ms (search objective %.6f ms)%s\n", p->time_s * 1e3,
      p->objective_s * 1e3, p->timed_out ? ", ILP stopped at its time limit" : "");
    if (p->method == ERG_SHARD_DP && p->ilp_polished)
        P("segment frontier too large and the budget binds: the block ILP (within "
          "min(--time-limit, 10 s)) found a better plan than the chain DP%s\n",
          p->exact ? " and proved it optimal" : " (not proven optimal)");
    else if (p->method == ERG_SHARD_DP && p->lower_bound_s > 0)
        P("segment frontier too large and the budget binds: chain DP + second pass, and "
          "elimination with a Lagrangian memory weight; best plan %.4f%% above the lower bound "
          "%.6f ms%s\n",
          (p->time_s / p->lower_bound_s - 1) * 100, p->lower_bound_s * 1e3,
          p->exact ? " (optimal)" : "");
    else if (p->method == ERG_SHARD_DP && p->ve)
        P("DP exact: segment frontier too large, blocks eliminated one by one (every "
          "resharding edge seen), no second pass\n");
    else if (p->method == ERG_SHARD_DP && p->exact)
        P("DP exact: every resharding edge is in its state (frontier DP), no second pass\n");
    else if (p->method == ERG_SHARD_DP)
        P("frontier too large for the exact DP: adjacent-segment DP, then a second pass "
          "(edges between non-adjacent segments): %d block%s changed\n",
          p->refined, p->refined == 1 ? "" : "s");
    P("memory per device %.3f MB (budget %.3f MB)\n", p->mem_bytes / 1e6, s->mem_budget / 1e6);
    P("modelled throughput %.3f TFLOP/s (all devices)\n", p->tflops);
    P("search time %.9f s\n", p->search_s);
    if (p->method == ERG_SHARD_DP)
        P("DP tables (built while profiling) %.6f s\n", s->dp_prepare_s);
    P("strategies per block:\n");
    for (int oi = 0; oi < s->norder; oi++) {
        const pblock *pb = &s->pbs[s->order[oi]];
        P("  PB %-3d %-22s %zu: %s\n", oi, s->c->ins[pb->anchor].name, p->k[oi],
          pb->names[p->k[oi]]);
    }
#undef P
    *text = b.data;
    return ERG_OK;
fail:
    erg__buf_free(&b);
    return erg_error_set(err, st, "out of memory");
}

typedef struct param_ref {
    long num;
    int ins;
} param_ref;
static int cmp_param_ref(const void *a, const void *b)
{
    const param_ref *x = a, *y = b;
    return x->num != y->num ? (x->num < y->num ? -1 : 1) : (x->ins > y->ins) - (x->ins < y->ins);
}

erg_status erg_shard_plan_json(const erg_shard *s, const erg_shard_plan *p, char **json,
                               erg_error *err)
{
    if (!s || !p || !json)
        return erg_error_set(err, ERG_EINVAL, "erg_shard_plan_json: NULL argument");
    json_t *root = json_object(), *blocks = json_array(), *segs = json_array(),
           *params = json_array();
    if (!root || !blocks || !segs || !params)
        goto oom;
    json_object_set_new(root, "module", json_string(s->m->name));
    json_object_set_new(root, "mesh", json_pack("[ii]", s->mesh[0], s->mesh[1]));
    /* the mesh asked for, when a 1-D mesh had to be viewed as 2-D */
    if (s->mesh_req[0] != s->mesh[0] || s->mesh_req[1] != s->mesh[1])
        json_object_set_new(root, "mesh_requested",
                            json_pack("[ii]", s->mesh_req[0], s->mesh_req[1]));
    json_object_set_new(root, "method",
                        json_string(p->method == ERG_SHARD_DP    ? "dp"
                                    : p->method == ERG_SHARD_ILP ? "ilp"
                                                                 : "given"));
    json_object_set_new(root, "costs", json_string(s->cost_source));
    json_object_set_new(root, "time_s", json_real(p->time_s));
    json_object_set_new(root, "objective_s", json_real(p->objective_s));
    json_object_set_new(root, "memory_bytes", json_real(p->mem_bytes));
    json_object_set_new(root, "memory_budget_bytes", json_real(s->mem_budget));
    json_object_set_new(root, "tflops", json_real(p->tflops));
    json_object_set_new(root, "search_s", json_real(p->search_s));
    json_object_set_new(root, "timed_out", json_boolean(p->timed_out));
    /* DP: how it searched: "frontier" (segment DP), "elimination" (block-level) or "chain"
     * (adjacent segments plus a second pass; not guaranteed optimal). */
    if (p->method == ERG_SHARD_DP)
        json_object_set_new(root, "dp_kind",
                            json_string(p->ilp_polished        ? "chain+ilp"
                                        : p->lower_bound_s > 0 ? "chain+lagrange"
                                        : p->ve                ? "elimination"
                                        : p->exact             ? "frontier"
                                                               : "chain"));
    if (p->method == ERG_SHARD_DP && p->lower_bound_s > 0)
        json_object_set_new(root, "lower_bound_s", json_real(p->lower_bound_s));
    /* What the cost model charged for this plan, by collective kind (count, bytes moved per
     * device), to set next to what XLA's partitioner emits (tools/shard_xla.py). */
    shard_comm cm;
    erg__shard_plan_comm(s, p->k, &cm);
    static const char *const kind_names[3] = {"all-reduce", "all-gather", "all-to-all"};
    json_t *comm = json_pack("{s:f}", "bytes_per_device", cm.bytes[0] + cm.bytes[1] + cm.bytes[2]);
    for (int c = 0; comm && c < 3; c++)
        if (json_object_set_new(
                comm, kind_names[c],
                json_pack("{s:f, s:f}", "count", cm.count[c], "bytes", cm.bytes[c]))) {
            json_decref(comm);
            comm = NULL;
        }
    if (!comm || json_object_set_new(root, "communication", comm))
        goto oom;
    for (int oi = 0; oi < s->norder; oi++) {
        const pblock *pb = &s->pbs[s->order[oi]];
        json_t *o = json_pack("{s:s, s:i, s:i, s:s, s:i}", "anchor", s->c->ins[pb->anchor].name,
                              "strategy", (int)p->k[oi], "num_strategies", pb->K, "name",
                              pb->names[p->k[oi]], "members", pb->nmem);
        json_t *names = json_array();
        for (int mi = 0; names && mi < pb->nmem; mi++)
            if (json_array_append_new(names, json_string(s->c->ins[pb->mem[mi].ins].name))) {
                json_decref(names);
                names = NULL;
            }
        if (!o || !names || json_object_set_new(o, "member_names", names) ||
            json_array_append_new(blocks, o)) {
            json_decref(o);
            goto oom;
        }
    }
    /* The shardings of the analysed computation's parameters, by parameter number and name,
     * as --out-hlo writes them: what a framework applies to its arguments (argument i is
     * parameter i in a module lowered by jax.jit). `block`: the block position that owns
     * the parameter (a weight), or -1. */
    int np = 0;
    param_ref *byn = erg__malloc(((size_t)s->n + 1) * sizeof *byn);
    if (!byn)
        goto oom;
    for (int i = 0; i < s->n; i++)
        if (s->c->ins[i].op == HLO_OP_PARAMETER)
            byn[np++] = (param_ref){s->c->ins[i].param_num, i};
    qsort(byn, (size_t)np, sizeof *byn, cmp_param_ref);
    for (int x = 0; x < np; x++) {
        int i = byn[x].ins;
        const hlo_instr *in = &s->c->ins[i];
        erg__buf b = {0};
        if (instr_sharding(s, p, i, &b)) {
            erg__buf_free(&b);
            erg__free(byn);
            goto oom;
        }
        int pb = s->nodes[i].pb;
        json_t *o = json_pack("{s:I, s:s, s:s, s:i}", "number", (json_int_t)in->param_num, "name",
                              in->name, "sharding", b.data ? b.data : "{replicated}", "block",
                              pb >= 0 ? s->pos_of[pb] : -1);
        erg__buf_free(&b);
        if (!o || json_array_append_new(params, o)) {
            erg__free(byn);
            goto oom;
        }
    }
    erg__free(byn);
    for (int si = 0; si < s->nseg; si++) {
        const segment *g = &s->segs[si];
        json_t *o = json_pack("{s:i, s:i, s:i}", "first_block", g->first, "num_blocks", g->n,
                              "unique", g->unique);
        if (!o || json_array_append_new(segs, o))
            goto oom;
    }
    json_object_set_new(root, "blocks", blocks);
    json_object_set_new(root, "segments", segs);
    json_object_set_new(root, "parameters", params);
    blocks = segs = params = NULL;
    char *t = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!t)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    *json = erg__strdup(t);
    free(t);
    return *json ? ERG_OK : erg_error_set(err, ERG_ENOMEM, "out of memory");
oom:
    json_decref(root);
    json_decref(blocks);
    json_decref(segs);
    json_decref(params);
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

erg_status erg_shard_write(const erg_shard *s, const erg_shard_plan *p, erg_shard_output what,
                           const char *path, erg_error *err)
{
    if (!s || !path || (what != ERG_SHARD_OUT_PROFILES && !p))
        return erg_error_set(err, ERG_EINVAL, "erg_shard_write: NULL argument");
    char *text = NULL;
    erg_status st;
    switch (what) {
    case ERG_SHARD_OUT_HLO:
        st = erg_shard_annotate(s, p, &text, err);
        break;
    case ERG_SHARD_OUT_JSON:
        st = erg_shard_plan_json(s, p, &text, err);
        break;
    case ERG_SHARD_OUT_PROFILES:
        st = erg_shard_profile_csv(s, &text, err);
        break;
    default:
        return erg_error_set(err, ERG_EINVAL, "erg_shard_write: unknown output %d", (int)what);
    }
    if (!st)
        st = erg__write_file(path, text, strlen(text), err);
    erg_free(text);
    return st;
}

/* report.c: the analysis report of `ergon shard analyze` (erg_shard_report): blocks, their
 * dots' per-strategy plans, custom-call classes, merged all-reduces, segments, strategy map. */
#include "shard/shard_internal.h"

#include <string.h>

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
            char *body = erg__hlo_attr_str(s->m, in, "body");
            int bi = body ? erg__hlo_find_comp(s->m, body) : -1;
            const char *lp;
            long t = bi >= 0 ? erg__hlo_trip_count(s->m, bi, &lp) : 0;
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
                erg__shard_spec_str(&mm->out[k], in->shape.rank, buf, sizeof buf);
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
                    erg__shard_spec_str(&mm->out[k],
                                        in->shape.kind == HLO_ARRAY ? in->shape.rank : 0, buf,
                                        sizeof buf);
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

/* dots.c: dots and convolutions as the analysis sees them: their batch, contracting and space
 * dims (convolutions through dim_labels), the output spec of given operand specs, and the
 * strategies of an anchor dot on the mesh (Alpa's, named out = lhs x rhs). */
#include "shard/shard_internal.h"

#include <stdlib.h>
#include <string.h>

bool erg__shard_conv_labels(const erg_hlo_module *m, const hlo_instr *in, int lrank, int rrank,
                            int orank, int idx[6])
{
    /* dim_labels=b01f_01io->b01f: lhs batch 'b' and feature 'f', rhs input 'i' and output
     * 'o' features, output 'b' and 'f'; digits are spatial. Grouped convolutions are not
     * handled (replicated). */
    char *v = erg__hlo_attr_str(m, in, "dim_labels");
    char *fg = erg__hlo_attr_str(m, in, "feature_group_count");
    char *bg = erg__hlo_attr_str(m, in, "batch_group_count");
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

bool erg__shard_dot_info(const erg_shard *s, int i, dotinfo *d)
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
        if (!erg__shard_conv_labels(s->m, in, L->rank, R->rank, in->shape.rank, idx))
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
    int nb = erg__hlo_attr_ints(s->m, in, "lhs_batch_dims", d->lb, HLO_MAX_RANK);
    int nb2 = erg__hlo_attr_ints(s->m, in, "rhs_batch_dims", d->rb, HLO_MAX_RANK);
    int nc = erg__hlo_attr_ints(s->m, in, "lhs_contracting_dims", d->lc, HLO_MAX_RANK);
    int nc2 = erg__hlo_attr_ints(s->m, in, "rhs_contracting_dims", d->rc, HLO_MAX_RANK);
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
bool erg__shard_dot_eval(const erg_shard *s, int i, const dotinfo *d, const spec *l, const spec *r,
                         spec *out, int *ar_axes)
{
    *out = erg__shard_spec_rep();
    *ar_axes = 0;
    for (int a = 0; a < 2; a++) {
        if (s->mesh[a] == 1)
            continue;
        int la = -1, ra = -1;
        for (int k = 0; k < d->lrank; k++)
            if (erg__shard_uses_axis(l->d[k], a)) {
                if (la >= 0)
                    return false;
                la = k;
            }
        for (int k = 0; k < d->rrank; k++)
            if (erg__shard_uses_axis(r->d[k], a)) {
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

int erg__shard_enumerate_dot(const erg_shard *s, int i, const dotinfo *d, strat *out, int max)
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
        st.l = erg__shard_spec_rep();
        st.r = erg__shard_spec_rep();
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
        if (!ok || !erg__shard_spec_valid_for(s, L, &st.l) ||
            !erg__shard_spec_valid_for(s, R, &st.r))
            continue;
        if (!erg__shard_dot_eval(s, i, d, &st.l, &st.r, &st.o, &st.ar))
            continue;
        if (!erg__shard_spec_valid_for(s, &in->shape, &st.o))
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

erg_status erg__shard_strategy_name(const erg_shard *s, int i, const strat *st, char **out)
{
    const hlo_instr *in = &s->c->ins[i];
    char o[80], l[80], r[80], buf[260];
    erg__shard_spec_str(&st->o, in->shape.rank, o, sizeof o);
    erg__shard_spec_str(&st->l, s->c->ins[in->ops[0]].shape.rank, l, sizeof l);
    erg__shard_spec_str(&st->r, s->c->ins[in->ops[1]].shape.rank, r, sizeof r);
    snprintf(buf, sizeof buf, "%s = %s x %s", o, l, r);
    *out = erg__strdup(buf);
    return *out ? ERG_OK : ERG_ENOMEM;
}

/* ctab.c: per-stage clock tables over a profile and a fast plan evaluator. */
#include "planner/ctab.h"

#include <stdlib.h>
#include <string.h>

static int cmp_idx_freq(const void *a, const void *b, void *ctx);

void erg__ctab_free(erg__ctab *c)
{
    if (!c)
        return;
    if (c->k)
        for (int i = 0; i < 2 * c->S; i++) {
            erg__free(c->k[i].freq);
            erg__free(c->k[i].t);
            erg__free(c->k[i].e);
        }
    if (c->both)
        for (int s = 0; s < c->S; s++)
            erg__free(c->both[s]);
    erg__free(c->k);
    erg__free(c->both);
    erg__free(c->nboth);
    erg__free(c->common);
    erg__free(c);
}

static int cmp_int_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

int erg__ctab_find(const erg__ctab *c, int s, erg_instr_kind kind, int freq)
{
    const erg__ckind *k = &c->k[s * 2 + (int)kind];
    int lo = 0, hi = k->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (k->freq[mid] == freq)
            return mid;
        if (k->freq[mid] < freq)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

erg_status erg__ctab_new(const erg_profile *p, int S, erg__ctab **out, erg_error *err)
{
    *out = NULL;
    if (!p)
        return erg_error_set(err, ERG_EINVAL, "NULL profile");
    if (S < 1 || erg_profile_num_stages(p) < S)
        return erg_error_set(err, ERG_EINVAL, "the profile has %d stages, the pipeline needs %d",
                             erg_profile_num_stages(p), S);
    erg__ctab *c = erg__calloc(1, sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    c->S = S;
    c->prof = p;
    c->k = erg__calloc((size_t)S * 2, sizeof *c->k);
    c->both = erg__calloc((size_t)S, sizeof *c->both);
    c->nboth = erg__calloc((size_t)S, sizeof *c->nboth);
    if (!c->k || !c->both || !c->nboth)
        goto oom;
    for (int s = 0; s < S; s++)
        for (int kd = 0; kd < 2; kd++) {
            size_t n = erg_profile_num_points(p, s, (erg_instr_kind)kd);
            const erg_profile_point *pt = erg_profile_points(p, s, (erg_instr_kind)kd);
            if (n == 0 || !pt) {
                erg__ctab_free(c);
                return erg_error_set(err, ERG_EINVAL, "the profile has no %s points for stage %d",
                                     erg_instr_kind_name((erg_instr_kind)kd), s);
            }
            erg__ckind *k = &c->k[s * 2 + kd];
            k->freq = erg__calloc(n, sizeof(int));
            k->t = erg__calloc(n, sizeof(double));
            k->e = erg__calloc(n, sizeof(double));
            int *idx = erg__calloc(n, sizeof(int));
            if (!k->freq || !k->t || !k->e || !idx) {
                erg__free(idx);
                goto oom;
            }
            for (size_t i = 0; i < n; i++)
                idx[i] = (int)i;
            qsort_r(idx, n, sizeof(int), cmp_idx_freq, (void *)pt);
            for (size_t i = 0; i < n; i++) {
                k->freq[i] = pt[idx[i]].freq_mhz;
                k->t[i] = pt[idx[i]].time_s;
                k->e[i] = pt[idx[i]].energy_j;
            }
            k->n = (int)n;
            erg__free(idx);
        }
    for (int s = 0; s < S; s++) {
        const erg__ckind *f = &c->k[s * 2];
        c->both[s] = erg__calloc((size_t)f->n, sizeof(int));
        if (!c->both[s])
            goto oom;
        for (int i = 0; i < f->n; i++)
            if (erg__ctab_find(c, s, ERG_BACKWARD, f->freq[i]) >= 0)
                c->both[s][c->nboth[s]++] = f->freq[i];
        qsort(c->both[s], (size_t)c->nboth[s], sizeof(int), cmp_int_desc);
        if (c->nboth[s] == 0) {
            erg__ctab_free(c);
            return erg_error_set(err, ERG_EINVAL,
                                 "stage %d has no clock with both forward and backward points", s);
        }
    }
    c->common = erg__calloc((size_t)c->nboth[0], sizeof(int));
    if (!c->common)
        goto oom;
    for (int i = 0; i < c->nboth[0]; i++) {
        int f = c->both[0][i];
        bool all = true;
        for (int s = 1; s < S && all; s++)
            all = erg__ctab_find(c, s, ERG_FORWARD, f) >= 0 &&
                  erg__ctab_find(c, s, ERG_BACKWARD, f) >= 0;
        if (all)
            c->common[c->ncommon++] = f;
    }
    *out = c;
    return ERG_OK;
oom:
    erg__ctab_free(c);
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

static int cmp_idx_freq(const void *a, const void *b, void *ctx)
{
    const erg_profile_point *pt = ctx;
    int x = pt[*(const int *)a].freq_mhz, y = pt[*(const int *)b].freq_mhz;
    return (x > y) - (x < y);
}

erg_status erg__ctab_eval(const erg__ctab *c, const erg_dag *dag, const erg_plan *plan,
                          double power_w, double *es, double *dur, double *stage_j, erg__eval *out,
                          erg_error *err)
{
    int S = erg_dag_num_stages(dag), n = erg_dag_num_instrs(dag);
    int simple = erg_dag_num_chunks(dag) == 1;
    double *tmp = erg__calloc((size_t)n * 2, sizeof(double));
    if (!tmp)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *D = dur ? dur : tmp, *ES = es ? es : tmp + n;
    double compute = 0;
    double *busy = NULL, *cj = NULL;
    busy = erg__calloc((size_t)S * 2, sizeof(double));
    if (!busy) {
        erg__free(tmp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    cj = busy + S;
    for (int s = 0; s < S; s++) {
        const int *f = erg_plan_stage_freqs_const(plan, s);
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        if (erg_plan_stage_len(plan, s) != len) {
            erg__free(tmp);
            erg__free(busy);
            return erg_error_set(err, ERG_EINVAL, "the plan does not fit the schedule's rank %d",
                                 s);
        }
        for (int k = 0; k < len; k++) {
            int id = off + k;
            erg_instr in = erg_dag_instr(dag, id, NULL);
            double t, e;
            if (simple && in.kind <= ERG_BACKWARD) {
                int i = erg__ctab_find(c, s, in.kind, f[k]);
                if (i < 0) {
                    erg__free(tmp);
                    erg__free(busy);
                    return erg_error_set(err, ERG_ENOTFOUND,
                                         "stage %d %s of microbatch %d runs at %d MHz, which the "
                                         "profile does not have",
                                         s, erg_instr_kind_name(in.kind), in.microbatch, f[k]);
                }
                const erg__ckind *kk = &c->k[s * 2 + (int)in.kind];
                t = kk->t[i];
                e = kk->e[i];
            } else {
                erg_profile_point pt;
                erg_status cst = erg_instr_cost_point(c->prof, dag, id, f[k], &pt, err);
                if (cst) {
                    erg__free(tmp);
                    erg__free(busy);
                    return cst;
                }
                t = pt.time_s;
                e = pt.energy_j;
            }
            D[id] = t;
            busy[s] += t;
            cj[s] += e;
            compute += e;
        }
    }
    double T = 0;
    erg_status st = erg_dag_cpm(dag, D, ES, NULL, &T, err);
    if (!st) {
        double idle = 0;
        for (int s = 0; s < S; s++) {
            idle += T - busy[s];
            if (stage_j)
                stage_j[s] = cj[s] + power_w * (T - busy[s]);
        }
        out->time_s = T;
        out->energy_j = compute + power_w * idle;
    }
    erg__free(tmp);
    erg__free(busy);
    return st;
}

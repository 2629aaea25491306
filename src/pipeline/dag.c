/* dag.c: the instruction DAG of a schedule and critical-path analysis. */
#include "core/internal.h"
#include "pipeline/dag_internal.h"

#include <math.h>
#include <string.h>

#define ERG_MAX_DAG_INSTRS (1 << 24)

void erg_dag_free(erg_dag *d)
{
    if (!d)
        return;
    erg__free(d->stage);
    erg__free(d->instr);
    erg__free(d->id_of);
    erg__free(d->succ_off);
    erg__free(d->succ);
    erg__free(d->pred_off);
    erg__free(d->pred);
    erg__free(d->topo);
    erg__free(d);
}

erg_status erg_dag_new(const erg_schedule *sched, int S, int M, erg_dag **out, erg_error *err)
{
    *out = NULL;
    if (!sched)
        return erg_error_set(err, ERG_EINVAL, "NULL schedule");
    if (S < 1 || M < 1 || (long long)S * M * 2 > ERG_MAX_DAG_INSTRS)
        return erg_error_set(err, ERG_EINVAL,
                             "pipeline size out of range: S=%d stages, M=%d microbatches", S, M);
    erg_dag *d = erg__calloc(1, sizeof(*d));
    if (!d)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    d->sched = *sched;
    d->S = S;
    d->M = M;
    int n = d->n = 2 * S * M;
    d->stage = erg__calloc((size_t)n, sizeof(int));
    d->instr = erg__calloc((size_t)n, sizeof(erg_instr));
    d->id_of = erg__calloc((size_t)n, sizeof(int));
    d->succ_off = erg__calloc((size_t)n + 1, sizeof(int));
    d->pred_off = erg__calloc((size_t)n + 1, sizeof(int));
    d->succ = erg__calloc((size_t)2 * n, sizeof(int));
    d->pred = erg__calloc((size_t)2 * n, sizeof(int));
    d->topo = erg__calloc((size_t)n, sizeof(int));
    int *indeg = erg__calloc((size_t)n, sizeof(int));
    if (!d->stage || !d->instr || !d->id_of || !d->succ_off || !d->pred_off || !d->succ ||
        !d->pred || !d->topo || !indeg) {
        erg__free(indeg);
        erg_dag_free(d);
        return erg_error_set(err, ERG_ENOMEM, "out of memory building a %d-instruction DAG", n);
    }
    for (int i = 0; i < n; i++)
        d->id_of[i] = -1;
    for (int s = 0; s < S; s++) {
        erg_status st = erg_schedule_stage_order(sched, S, M, s, d->instr + (size_t)s * 2 * M, err);
        if (st) {
            erg__free(indeg);
            erg_dag_free(d);
            return st;
        }
        for (int k = 0; k < 2 * M; k++) {
            int id = s * 2 * M + k;
            erg_instr in = d->instr[id];
            d->stage[id] = s;
            int slot = (s * 2 + (int)in.kind) * M + in.microbatch;
            if (in.microbatch < 0 || in.microbatch >= M || d->id_of[slot] >= 0) {
                erg__free(indeg);
                erg_dag_free(d);
                return erg_error_set(err, ERG_EINTERNAL,
                                     "schedule %s gives stage %d an invalid order",
                                     erg_schedule_name(sched->kind), s);
            }
            d->id_of[slot] = id;
        }
    }
    /* Successors: same-stage next first, then the cross-stage dependency. */
    int e = 0;
    for (int id = 0; id < n; id++) {
        d->succ_off[id] = e;
        int s = d->stage[id];
        erg_instr in = d->instr[id];
        int pos = id - s * 2 * M;
        if (pos + 1 < 2 * M)
            d->succ[e++] = id + 1;
        if (in.kind == ERG_FORWARD && s + 1 < S)
            d->succ[e++] = d->id_of[((s + 1) * 2 + ERG_FORWARD) * M + in.microbatch];
        else if (in.kind == ERG_BACKWARD && s > 0)
            d->succ[e++] = d->id_of[((s - 1) * 2 + ERG_BACKWARD) * M + in.microbatch];
    }
    d->succ_off[n] = e;
    d->nedges = e;
    for (int i = 0; i < e; i++)
        indeg[d->succ[i]]++;
    d->pred_off[0] = 0;
    for (int i = 0; i < n; i++)
        d->pred_off[i + 1] = d->pred_off[i] + indeg[i];
    int *fill = erg__calloc((size_t)n, sizeof(int));
    if (!fill) {
        erg__free(indeg);
        erg_dag_free(d);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int u = 0; u < n; u++)
        for (int k = d->succ_off[u]; k < d->succ_off[u + 1]; k++) {
            int v = d->succ[k];
            d->pred[d->pred_off[v] + fill[v]++] = u;
        }
    erg__free(fill);
    /* Kahn's algorithm: a schedule whose orders contradict the data
     * dependencies would deadlock, i.e. form a cycle. */
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0)
            d->topo[tail++] = i;
    while (head < tail) {
        int u = d->topo[head++];
        for (int k = d->succ_off[u]; k < d->succ_off[u + 1]; k++)
            if (--indeg[d->succ[k]] == 0)
                d->topo[tail++] = d->succ[k];
    }
    erg__free(indeg);
    if (tail != n) {
        erg_dag_free(d);
        return erg_error_set(err, ERG_EINVAL,
                             "schedule %s with S=%d, M=%d deadlocks (its instruction orders "
                             "form a dependency cycle)",
                             erg_schedule_name(sched->kind), S, M);
    }
    *out = d;
    return ERG_OK;
}

int erg_dag_num_stages(const erg_dag *d)
{
    return d->S;
}
int erg_dag_num_microbatches(const erg_dag *d)
{
    return d->M;
}
int erg_dag_num_instrs(const erg_dag *d)
{
    return d->n;
}

erg_instr erg_dag_instr(const erg_dag *d, int id, int *stage)
{
    if (id < 0 || id >= d->n) {
        if (stage)
            *stage = -1;
        return (erg_instr){ERG_FORWARD, -1};
    }
    if (stage)
        *stage = d->stage[id];
    return d->instr[id];
}

int erg_dag_instr_id(const erg_dag *d, int stage, erg_instr_kind kind, int mb)
{
    if (stage < 0 || stage >= d->S || mb < 0 || mb >= d->M || (unsigned)kind > 1)
        return -1;
    return d->id_of[(stage * 2 + (int)kind) * d->M + mb];
}

int erg_dag_successors(const erg_dag *d, int id, const int **succ)
{
    *succ = d->succ + d->succ_off[id];
    return d->succ_off[id + 1] - d->succ_off[id];
}

int erg_dag_predecessors(const erg_dag *d, int id, const int **pred)
{
    *pred = d->pred + d->pred_off[id];
    return d->pred_off[id + 1] - d->pred_off[id];
}

const int *erg_dag_topo_order(const erg_dag *d)
{
    return d->topo;
}

erg_status erg_dag_cpm(const erg_dag *d, const double *dur, double *es, double *lf,
                       double *makespan, erg_error *err)
{
    int n = d->n;
    double *ES = es, *LF = lf;
    double *tmp = NULL;
    if (!ES || !LF) {
        tmp = erg__calloc((size_t)n * 2, sizeof(double));
        if (!tmp)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        if (!ES)
            ES = tmp;
        if (!LF)
            LF = tmp + n;
    }
    for (int i = 0; i < n; i++)
        if (!(dur[i] >= 0) || !isfinite(dur[i])) {
            erg__free(tmp);
            return erg_error_set(err, ERG_EINVAL, "instruction %d has an invalid duration %g", i,
                                 dur[i]);
        }
    double T = 0;
    for (int k = 0; k < n; k++) {
        int u = d->topo[k];
        double s = 0;
        for (int j = d->pred_off[u]; j < d->pred_off[u + 1]; j++) {
            double f = ES[d->pred[j]] + dur[d->pred[j]];
            if (f > s)
                s = f;
        }
        ES[u] = s;
        if (s + dur[u] > T)
            T = s + dur[u];
    }
    for (int k = n - 1; k >= 0; k--) {
        int u = d->topo[k];
        double f = T;
        for (int j = d->succ_off[u]; j < d->succ_off[u + 1]; j++) {
            double ls = LF[d->succ[j]] - dur[d->succ[j]];
            if (ls < f)
                f = ls;
        }
        LF[u] = f;
    }
    if (makespan)
        *makespan = T;
    erg__free(tmp);
    return ERG_OK;
}

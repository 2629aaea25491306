/* dag.c: the instruction DAG of a schedule and critical-path analysis. */
#include "core/internal.h"
#include "pipeline/dag_internal.h"
#include "pipeline/order_internal.h"

#include <math.h>
#include <string.h>

#define ERG_MAX_DAG_INSTRS (1 << 24)

void erg_dag_free(erg_dag *d)
{
    if (!d)
        return;
    erg_order_free(d->order);
    erg__free(d->stage);
    erg__free(d->instr);
    erg__free(d->rank_off);
    erg__free(d->id_of);
    erg__free(d->succ_off);
    erg__free(d->succ);
    erg__free(d->pred_off);
    erg__free(d->pred);
    erg__free(d->topo);
    erg__free(d->rank_nstages);
    erg__free(d);
}

/* Build from an order we own (taken over, freed on failure). */
static erg_status dag_build(erg_order *o, const erg_schedule *sched, erg_dag **out, erg_error *err)
{
    int P = o->P, NS = o->S, M = o->M, n = o->off[P];
    if (n > ERG_MAX_DAG_INSTRS) {
        erg_order_free(o);
        return erg_error_set(err, ERG_EINVAL, "pipeline too large: %d instructions", n);
    }
    erg_dag *d = erg__calloc(1, sizeof(*d));
    if (!d) {
        erg_order_free(o);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (sched)
        d->sched = *sched;
    else
        d->sched.kind = o->kind;
    d->sched.order = NULL;
    d->order = o;
    d->S = P;
    d->V = o->V;
    d->NS = NS;
    d->M = M;
    d->n = n;
    d->stage = erg__calloc((size_t)n, sizeof(int));
    d->instr = erg__calloc((size_t)n, sizeof(erg_instr));
    d->rank_off = erg__calloc((size_t)P + 1, sizeof(int));
    d->id_of = erg__calloc((size_t)NS * 4 * M, sizeof(int));
    d->succ_off = erg__calloc((size_t)n + 1, sizeof(int));
    d->pred_off = erg__calloc((size_t)n + 1, sizeof(int));
    d->succ = erg__calloc((size_t)3 * n + 1, sizeof(int));
    d->pred = erg__calloc((size_t)3 * n + 1, sizeof(int));
    d->topo = erg__calloc((size_t)n, sizeof(int));
    d->rank_nstages = erg__calloc((size_t)P, sizeof(int));
    int *indeg = erg__calloc((size_t)n, sizeof(int));
    if (!d->stage || !d->instr || !d->rank_off || !d->id_of || !d->succ_off || !d->pred_off ||
        !d->succ || !d->pred || !d->topo || !d->rank_nstages || !indeg) {
        erg__free(indeg);
        erg_dag_free(d);
        return erg_error_set(err, ERG_ENOMEM, "out of memory building a %d-instruction DAG", n);
    }
    for (size_t i = 0; i < (size_t)NS * 4 * M; i++)
        d->id_of[i] = -1;
    memcpy(d->rank_off, o->off, sizeof(int) * ((size_t)P + 1));
    for (int st = 0; st < NS; st++)
        d->rank_nstages[o->stage_rank[st]]++;
    memcpy(d->instr, o->instrs, sizeof(erg_instr) * (size_t)n);
    for (int r = 0; r < P; r++)
        for (int id = o->off[r]; id < o->off[r + 1]; id++) {
            d->stage[id] = r;
            erg_instr in = d->instr[id];
            d->id_of[((size_t)in.stage * 4 + in.kind % 4) * M + in.microbatch] = id;
            if (in.kind == ERG_OVERLAP_F_B) {
                d->id_of[((size_t)in.stage * 4 + ERG_FORWARD) * M + in.microbatch] = id;
                d->id_of[((size_t)in.stage2 * 4 + in.kind2) * M + in.microbatch2] = id;
            }
        }
    /* Successors: same-rank next first, then the cross-stage ones. */
    int e = 0;
    for (int id = 0; id < n; id++) {
        d->succ_off[id] = e;
        int r = d->stage[id];
        erg_instr in = d->instr[id];
        if (id + 1 < d->rank_off[r + 1])
            d->succ[e++] = id + 1;
        int parts = in.kind == ERG_OVERLAP_F_B ? 2 : 1;
        for (int p = 0; p < parts; p++) {
            erg_instr_kind k = p ? in.kind2 : in.kind == ERG_OVERLAP_F_B ? ERG_FORWARD : in.kind;
            int s = p ? in.stage2 : in.stage, mb = p ? in.microbatch2 : in.microbatch;
            int v = -1;
            if (k == ERG_FORWARD && s + 1 < NS)
                v = d->id_of[((size_t)(s + 1) * 4 + ERG_FORWARD) * M + mb];
            else if ((k == ERG_BACKWARD || k == ERG_BACKWARD_INPUT) && s > 0) {
                v = d->id_of[((size_t)(s - 1) * 4 + ERG_BACKWARD) * M + mb];
                if (v < 0)
                    v = d->id_of[((size_t)(s - 1) * 4 + ERG_BACKWARD_INPUT) * M + mb];
            }
            if (v < 0 || v == id)
                continue;
            int dup = 0;
            for (int q = d->succ_off[id]; q < e; q++)
                dup |= d->succ[q] == v;
            if (!dup)
                d->succ[e++] = v;
        }
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
    /* Kahn's algorithm: orders that contradict the data dependencies would
     * deadlock, i.e. form a cycle. */
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
    if (tail != n) {
        /* Name each rank's first action that can never run. */
        memset(fill, 0, sizeof(int) * (size_t)n);
        for (int i = 0; i < tail; i++)
            fill[d->topo[i]] = 1;
        erg__buf b = {0};
        for (int r = 0; r < P; r++)
            for (int id = d->rank_off[r]; id < d->rank_off[r + 1]; id++)
                if (!fill[id]) {
                    char t[64];
                    erg_instr_format(d->instr[id], t, sizeof t);
                    (void)erg__buf_printf(&b, "%s %s:%d:%d (%s)", b.len ? ";" : "",
                                          o->name[0] ? o->name : "rank", o->line[r], o->cell[id],
                                          t);
                    break;
                }
        erg_status st = erg_error_set(
            err, o->kind == ERG_SCHED_FILE ? ERG_EPARSE : ERG_EINVAL,
            "schedule %s with P=%d ranks, M=%d deadlocks (its orders form a dependency cycle); "
            "the ranks stop at:%s",
            o->kind == ERG_SCHED_FILE ? o->name : erg_schedule_name(o->kind), P, M,
            b.data ? b.data : "");
        erg__buf_free(&b);
        erg__free(fill);
        erg__free(indeg);
        erg_dag_free(d);
        return st;
    }
    erg__free(fill);
    erg__free(indeg);
    *out = d;
    return ERG_OK;
}

erg_status erg_dag_new(const erg_schedule *sched, int P, int M, erg_dag **out, erg_error *err)
{
    *out = NULL;
    if (!sched)
        return erg_error_set(err, ERG_EINVAL, "NULL schedule");
    if (sched->kind != ERG_SCHED_FILE &&
        (P < 1 || M < 1 || (long long)P * M * 2 > ERG_MAX_DAG_INSTRS))
        return erg_error_set(err, ERG_EINVAL,
                             "pipeline size out of range: S=%d stages, M=%d microbatches", P, M);
    erg_order *o = NULL;
    erg_status st = erg_order_new(sched, P, M, &o, err);
    if (st)
        return st;
    return dag_build(o, sched, out, err);
}

erg_status erg_dag_new_from_order(const erg_order *order, erg_dag **out, erg_error *err)
{
    *out = NULL;
    if (!order)
        return erg_error_set(err, ERG_EINVAL, "NULL order");
    erg_schedule s = {.kind = ERG_SCHED_FILE, .order = order};
    erg_order *o = NULL;
    erg_status st = erg_order_new(&s, 0, 0, &o, err);
    if (st)
        return st;
    o->kind = order->kind;
    o->V = order->V;
    s.kind = order->kind;
    s.chunks = order->V;
    s.order = NULL;
    return dag_build(o, &s, out, err);
}

int erg_dag_num_stages(const erg_dag *d)
{
    return d->S;
}
int erg_dag_num_microbatches(const erg_dag *d)
{
    return d->M;
}
int erg_dag_num_chunks(const erg_dag *d)
{
    return d->V;
}
int erg_dag_num_pipeline_stages(const erg_dag *d)
{
    return d->NS;
}
erg_schedule erg_dag_schedule(const erg_dag *d)
{
    return d->sched;
}
const erg_order *erg_dag_order(const erg_dag *d)
{
    return d->order;
}
int erg_dag_num_instrs(const erg_dag *d)
{
    return d->n;
}
int erg_dag_rank_offset(const erg_dag *d, int rank)
{
    return rank < 0 || rank > d->S ? -1 : d->rank_off[rank];
}
int erg_dag_rank_len(const erg_dag *d, int rank)
{
    return rank < 0 || rank >= d->S ? 0 : d->rank_off[rank + 1] - d->rank_off[rank];
}

erg_instr erg_dag_instr(const erg_dag *d, int id, int *stage)
{
    if (id < 0 || id >= d->n) {
        if (stage)
            *stage = -1;
        return (erg_instr){ERG_FORWARD, -1, -1, ERG_FORWARD, -1, -1};
    }
    if (stage)
        *stage = d->stage[id];
    return d->instr[id];
}

int erg_dag_instr_id(const erg_dag *d, int stage, erg_instr_kind kind, int mb)
{
    if (stage < 0 || stage >= d->NS || mb < 0 || mb >= d->M || (unsigned)kind > 3)
        return -1;
    return d->id_of[((size_t)stage * 4 + kind) * d->M + mb];
}

int erg_dag_edge_cross_rank(const erg_dag *d, int u, int v)
{
    return u >= 0 && v >= 0 && u < d->n && v < d->n && d->stage[u] != d->stage[v];
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

void erg_dag_get_arrays(const erg_dag *d, erg_dag_arrays *out)
{
    out->num_instrs = d->n;
    out->num_edges = d->nedges;
    out->rank = d->stage;
    out->instr = d->instr;
    out->topo = d->topo;
    out->succ_off = d->succ_off;
    out->succ = d->succ;
    out->pred_off = d->pred_off;
    out->pred = d->pred;
}

erg_status erg_dag_cpm_p2p(const erg_dag *d, const double *dur, double p2p, double *es, double *lf,
                           double *makespan, erg_error *err)
{
    int n = d->n;
    double *ES = es, *LF = lf;
    double *tmp = NULL;
    if (!(p2p >= 0) || !isfinite(p2p))
        return erg_error_set(err, ERG_EINVAL, "invalid P2P transfer time %g", p2p);
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
            int p = d->pred[j];
            double f = ES[p] + dur[p] + (d->stage[p] != d->stage[u] ? p2p : 0);
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
            int v = d->succ[j];
            double ls = LF[v] - dur[v] - (d->stage[v] != d->stage[u] ? p2p : 0);
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

erg_status erg_dag_cpm(const erg_dag *d, const double *dur, double *es, double *lf,
                       double *makespan, erg_error *err)
{
    return erg_dag_cpm_p2p(d, dur, 0, es, lf, makespan, err);
}

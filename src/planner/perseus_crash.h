/* perseus_crash.h: the state of the Perseus crashing loop, shared by the full pass
 * (perseus.c) and the incremental one (perseus_incr.c); planner-private. */
#ifndef ERGON_PERSEUS_CRASH_H
#define ERGON_PERSEUS_CRASH_H

#include "ergon/pipeline.h"
#include "planner/maxflow.h"
#include "planner/perseus_internal.h"

#include <stdint.h>

typedef struct op_spec {
    int stage;
    erg_instr_kind kind;
    int ncand;
    erg__cand *cand; /* q descending */
    int min_q, max_q;
    double abc[3];
    int fitted;       /* abc came from erg__perseus_fit (not --fits, not one duration) */
    double *cost;     /* [max_q - min_q + 1]: C(d) */
    int64_t *lb, *ub; /* [same]: flow bounds in micro-joules at duration d */
    int *freq;        /* [same]: clock used at duration d */
    double nf_used;
} op_spec;

typedef struct crash_state {
    const erg_dag *dag;
    erg_dag_arrays g; /* the DAG's arrays (erg_dag_get_arrays) */
    int n;
    long lag;     /* transfer time of a cross-stage edge, in units (0 = none): the
                   * fixed duration of every dependency between two ranks */
    int *spec_of; /* [n] index into specs */
    op_spec *specs;
    int *d;        /* [n] duration in units */
    long *es, *lf; /* [n] CPM */
    long T;
    erg__flow flow;
    unsigned char *reach;
    int *shorten, *lengthen; /* [n] lists */
    int *crit;               /* [n] this iteration's critical instructions, ascending */
    int ncrit;
    int nshorten, nlengthen; /* sizes of the lists of the last step */
    int64_t inf;             /* the "infinite" bound in micro-joules */
    unsigned char *ends;     /* [n] ERG__NO_PRED | ERG__NO_SUCC (DAG sources and sinks) */
    double *cval;            /* [n] cost of each instruction at its current duration */
    /* Critical arcs of this iteration (arc pair k = flow arcs 2k, 2k+1). */
    int narcs;
    int *arc_u, *arc_v, *arc_key; /* endpoints; key into prev_flow */
    int64_t *arc_lb, *arc_ub;
    /* Flow (including lb) of every arc in the previous iteration's solution,
     * by key: op arc of x = x, dependency j of the DAG = n + j, source arc =
     * n + E, sink arc = n + E + 1. -1 = not critical then. */
    int64_t *prev_flow;
    int64_t *im;                /* [nodes] imbalance of the warm-start flow */
    long warm_ok, warm_fail;    /* statistics */
    struct erg__crash_inc *inc; /* the incremental step's state (perseus_incr.c), or NULL */
} crash_state;

enum { ERG__NO_PRED = 1, ERG__NO_SUCC = 2 };

enum { CUT_WARM, CUT_COLD, CUT_TWO_PHASE };

/* CPM's forward relaxation of instruction u: its earliest start, the latest finish of its
 * predecessors (plus the transfer time lag across stages). Shared by the full CPM (perseus.c)
 * and the window CPM (perseus_incr.c); inline, the no-lag case its own loop. */
static inline long crash_es_of(const int *pred_off, const int *pred, const long *es, const int *d,
                               const int *stage, long lag, int u)
{
    long s = 0;
    if (lag == 0) {
        for (int j = pred_off[u]; j < pred_off[u + 1]; j++) {
            int p = pred[j];
            long f = es[p] + d[p];
            if (f > s)
                s = f;
        }
    } else {
        for (int j = pred_off[u]; j < pred_off[u + 1]; j++) {
            int p = pred[j];
            long f = es[p] + d[p] + (stage[p] != stage[u] ? lag : 0);
            if (f > s)
                s = f;
        }
    }
    return s;
}

static inline double spec_cost(const op_spec *sp, int d)
{
    return sp->cost[d - sp->min_q];
}

/* perseus.c: the critical path method on the durations cs->d: es, lf and T. */
void erg__crash_cpm(crash_state *cs);
/* perseus.c: the cut of the lower-bounded problem on the arc lists cs->arc_* (mode CUT_*);
 * 0 = infeasible. */
int erg__crash_solve_cut(crash_state *cs, int mode);
/* perseus.c: the second half of a crashing step, from cs->shorten/lengthen (ns, nl entries,
 * ascending): the cost checks, then the new durations. 0 = the loop ends. */
int erg__crash_apply(crash_state *cs, int ns, int nl, double *cost_change);

/* perseus_incr.c: the incremental crashing step (docs/planner.md, "Incremental crashing").
 * init after the initial CPM (cs->es, cs->lf, cs->T valid); step as crash_step (1 = a plan,
 * 0 = the end), -1 = out of memory. */
int erg__crash_incr_init(crash_state *cs);
int erg__crash_incr_step(crash_state *cs, double *cost_change);
void erg__crash_incr_free(crash_state *cs);

#endif

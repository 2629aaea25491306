/* dag_internal.h: the instruction DAG's layout, shared with the planner. */
#ifndef ERGON_DAG_INTERNAL_H
#define ERGON_DAG_INTERNAL_H

#include "ergon/pipeline.h"

struct erg_dag {
    erg_schedule sched;
    int S, M, n;      /* stages, microbatches, instructions (2SM) */
    int *stage;       /* [n] stage of each instruction */
    erg_instr *instr; /* [n] kind and microbatch */
    int *id_of;       /* [S][2][M] -> id */
    int *succ_off, *succ; /* CSR successors (same-stage next first) */
    int *pred_off, *pred; /* CSR predecessors */
    int *topo;        /* [n] topological order */
    int nedges;
};

#endif

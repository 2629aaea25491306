/* dag_internal.h: the instruction DAG's layout, private to the pipeline module (other modules
 * read a DAG through pipeline.h: its accessors and erg_dag_get_arrays). */
#ifndef ERGON_DAG_INTERNAL_H
#define ERGON_DAG_INTERNAL_H

#include "ergon/pipeline.h"

struct erg_dag {
    erg_schedule sched;
    erg_order *order;     /* owned copy */
    int S;                /* ranks P (historical name: plans call them stages) */
    int V, NS, M, n;      /* chunks, pipeline stages, microbatches, instructions */
    int *stage;           /* [n] rank of each instruction */
    erg_instr *instr;     /* [n] the instruction */
    int *rank_off;        /* [P+1] first id of each rank */
    int *id_of;           /* [NS][4][M] -> id (F, B, I, W) */
    int *succ_off, *succ; /* CSR successors (same-rank next first) */
    int *pred_off, *pred; /* CSR predecessors */
    int *topo;            /* [n] topological order */
    int nedges;
    int *rank_nstages; /* [P] pipeline stages on each rank */
};

#endif
